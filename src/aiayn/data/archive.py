"""Streamed, safe extraction of downloaded archives: .tar, .tgz, .tar.gz and single-file .gz, atomically, refusing
links, devices and member paths that leave the destination."""

from __future__ import annotations

import gzip
import shutil
import tarfile
import zlib
from collections.abc import Iterable
from pathlib import Path, PurePosixPath

from tqdm import tqdm

from aiayn.data.download import CHUNK_SIZE
from aiayn.io import DiskFullError, atomic_path
from aiayn.progress import byte_bar


class ArchiveError(RuntimeError):
    """An archive is truncated, corrupt, unsafe or lacks a member."""


def member_name(name: str) -> str:
    """A tar member's path without leading "./" (tar -C dir . writes them), as the catalog names it."""
    while name.startswith("./"):
        name = name[2:]
    return name


def _safe_target(dest_dir: Path, name: str, archive: Path) -> Path:
    """The extraction path of member `name`, refusing absolute paths and `..` (path traversal)."""
    parts = PurePosixPath(name).parts
    if not parts or PurePosixPath(name).is_absolute() or ".." in parts:
        raise ArchiveError(f"{archive}: refusing unsafe member path {name!r}")
    target = dest_dir.joinpath(*parts)
    if not target.resolve().is_relative_to(dest_dir.resolve()):
        raise ArchiveError(f"{archive}: refusing member {name!r} that escapes {dest_dir}")
    return target


def extract(
    archive: Path,
    dest_dir: Path,
    members: Iterable[str] | None = None,
    progress: bool = True,
    chunk_size: int = CHUNK_SIZE,
) -> dict[str, Path]:
    """Stream `members` (None: all regular files) of a .tar/.tgz/.tar.gz, or a single-file .gz, into `dest_dir`.

    Members already extracted are kept. Returns member name -> extracted path.
    """
    archive, dest_dir = Path(archive), Path(dest_dir)
    wanted = None if members is None else set(members)
    if archive.name.endswith(".gz") and not archive.name.endswith(".tar.gz"):
        name = archive.name.removesuffix(".gz")
        if wanted is not None and wanted != {name}:
            raise ArchiveError(f"{archive}: a single-file .gz holds only {name!r}, not {sorted(wanted)}")
        return {name: _gunzip(archive, dest_dir / name, progress, chunk_size)}
    done = {m: dest_dir / m for m in (wanted or ()) if (dest_dir / m).is_file()}
    if wanted is not None and set(done) == wanted:
        return done
    try:
        with (
            byte_bar(archive.stat().st_size, archive.name, progress) as bar,
            open(archive, "rb") as raw,
            tarfile.open(fileobj=_Counting(raw, bar), mode="r|*") as tar,  # type: ignore[call-overload]
        ):
            for info in tar:
                name = member_name(info.name)
                if (wanted is not None and name not in wanted) or name in done or info.isdir() or not name:
                    continue
                if not info.isfile():
                    raise ArchiveError(f"{archive}: refusing non-regular member {info.name!r} (link or device)")
                target = _safe_target(dest_dir, name, archive)
                with atomic_path(target, needed=info.size) as tmp, open(tmp, "wb") as out:
                    shutil.copyfileobj(tar.extractfile(info), out, chunk_size)
                done[name] = target
                if wanted is not None and set(done) == wanted:
                    break
    except DiskFullError:
        raise
    except (tarfile.TarError, EOFError, zlib.error, OSError) as exc:
        raise ArchiveError(f"{archive}: truncated or corrupt archive ({exc})") from exc
    missing = sorted((wanted or set()) - set(done))
    if missing:
        raise ArchiveError(f"{archive}: has no member(s) {missing}")
    return done


class _Counting:
    """A read-only file wrapper that advances a progress bar by the compressed bytes read."""

    def __init__(self, raw, bar: tqdm) -> None:
        self.raw, self.bar = raw, bar

    def read(self, size: int = -1) -> bytes:
        data = self.raw.read(size)
        self.bar.update(len(data))
        return data


def _gunzip(archive: Path, target: Path, progress: bool, chunk_size: int) -> Path:
    """Decompress a single-file .gz to `target` (atomic); a truncated stream names the archive."""
    if target.is_file():
        return target
    try:
        with (
            gzip.open(archive, "rb") as src,
            atomic_path(target) as tmp,
            open(tmp, "wb") as out,
            byte_bar(None, archive.name, progress) as bar,
        ):
            while chunk := src.read(chunk_size):
                out.write(chunk)
                bar.update(len(chunk))
    except (EOFError, zlib.error, gzip.BadGzipFile) as exc:
        raise ArchiveError(f"{archive}: truncated or corrupt archive ({exc})") from exc
    return target
