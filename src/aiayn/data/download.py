"""Robust downloads (resume, retry, checksum, cache, mirrors) and streamed, safe archive extraction."""
from __future__ import annotations

import gzip
import hashlib
import http.client
import logging
import os
import shutil
import sys
import tarfile
import time
import urllib.error
import urllib.request
import warnings
import zlib
from collections.abc import Iterable
from pathlib import Path, PurePosixPath

from tqdm import tqdm

from aiayn.progress import Progress, on_terminal

from aiayn.io import atomic_path

log = logging.getLogger(__name__)

CHUNK_SIZE = 1 << 20
# 408/429 and 5xx are transient server states worth retrying; other HTTP errors are not.
_RETRY_STATUS = {408, 429, 500, 502, 503, 504}


class DownloadError(RuntimeError):
    """A download failed for good (bad URL, HTTP error, retries exhausted)."""


class ChecksumError(RuntimeError):
    """A file's checksum differs from the recorded one."""


class ArchiveError(RuntimeError):
    """An archive is truncated, corrupt, unsafe or lacks a member."""


class UnverifiedWarning(UserWarning):
    """A file was used without a recorded checksum to verify it against."""


class _Transient(ConnectionError):
    """A download attempt ended early; the next attempt resumes it."""


_RETRYABLE = (_Transient, ConnectionError, TimeoutError, urllib.error.URLError, http.client.HTTPException)


def _bar(total: int | None, desc: str, progress: bool, initial: int = 0) -> tqdm:
    """A byte progress bar, shown only when asked for and stderr is a terminal."""
    return tqdm(total=total, initial=initial, desc=desc, unit="B", unit_scale=True,
                disable=not (progress and sys.stderr.isatty()))


def file_digest(path: Path, algorithm: str = "sha256", chunk_size: int = CHUNK_SIZE) -> str:
    """Hex digest of a file, read in chunks (constant memory)."""
    digest = hashlib.new(algorithm)
    with open(path, "rb") as f:
        while chunk := f.read(chunk_size):
            digest.update(chunk)
    return digest.hexdigest()


def verify_file(path: Path, expected_sha256: str | None = None, expected_md5: str | None = None,
                *, source: str = "", move_aside: bool = True) -> str:
    """Check `path` against its recorded sum; warn with the computed sha256 when none is recorded.

    On a mismatch the bad file is renamed aside (unless `move_aside` is False) and ChecksumError names both sums.
    Returns the computed digest.
    """
    path = Path(path)
    algorithm, expected = ("sha256", expected_sha256) if expected_sha256 else ("md5", expected_md5)
    actual = file_digest(path, algorithm if expected else "sha256")
    if not expected:
        warnings.warn(f"{path.name} is UNVERIFIED (no published checksum recorded); its sha256 is {actual} "
                      f"- record it to pin this file", UnverifiedWarning, stacklevel=2)
        return actual
    if actual.lower() == expected.lower():
        return actual
    where = f" from {source}" if source else ""
    kept = ""
    if move_aside:
        bad = path.with_name(f"{path.name.removesuffix('.part')}.bad-{actual[:12]}")
        os.replace(path, bad)
        kept = f"; the bad file is kept at {bad}"
    raise ChecksumError(f"checksum mismatch for {path.name}{where}: expected {algorithm} {expected}, "
                        f"got {actual}{kept}")


def download(url: str, dest: Path, expected_sha256: str | None = None, progress: bool = True,
             retries: int = 3, chunk_size: int = CHUNK_SIZE, *, expected_md5: str | None = None,
             timeout: float = 60.0, backoff_s: float = 1.0) -> Path:
    """Download `url` to `dest` via `dest.part`, resuming and retrying, then verify; a verified `dest` is reused."""
    dest = Path(dest)
    if dest.exists():
        verify_file(dest, expected_sha256, expected_md5, source=url)
        return dest
    part = dest.with_name(dest.name + ".part")
    part.parent.mkdir(parents=True, exist_ok=True)
    for attempt in range(retries + 1):
        try:
            _fetch_into(url, part, progress, chunk_size, timeout)
            break
        except _RETRYABLE as exc:
            if attempt == retries:
                raise DownloadError(f"{url}: gave up after {retries + 1} attempts: {exc}") from exc
            log.warning("%s: attempt %d failed (%s); resuming", url, attempt + 1, exc)
            time.sleep(backoff_s * 2 ** attempt)
    verify_file(part, expected_sha256, expected_md5, source=url)
    os.replace(part, dest)
    return dest


def _fetch_into(url: str, part: Path, progress: bool, chunk_size: int, timeout: float) -> None:
    """One attempt: append to `part` from its current size (HTTP Range), or restart if the server ignores it."""
    offset = part.stat().st_size if part.exists() else 0
    request = urllib.request.Request(url, headers={"Range": f"bytes={offset}-"} if offset else {})
    try:
        response = urllib.request.urlopen(request, timeout=timeout)
    except urllib.error.HTTPError as exc:
        if exc.code == 416 and offset:  # nothing left to send: the .part is complete (the checksum decides)
            return
        if exc.code in _RETRY_STATUS:
            raise _Transient(f"HTTP {exc.code} {exc.reason}") from exc
        raise DownloadError(f"{url}: HTTP {exc.code} {exc.reason}") from exc
    with response:
        if offset and getattr(response, "status", None) != 206:
            offset = 0  # the server sent the whole file: start over rather than append a second copy
        length = response.headers.get("Content-Length")
        total = offset + int(length) if length is not None else None
        received = offset
        lines = Progress(f"download {part.name.removesuffix('.part')}", total and total // 2**20, "MiB", every_s=60)
        lines.done = offset // 2**20
        with open(part, "ab" if offset else "wb") as f, _bar(total, part.name, progress, offset) as bar:
            while chunk := response.read(chunk_size):
                f.write(chunk)
                received += len(chunk)
                bar.update(len(chunk))
                if progress and not on_terminal():  # a log file gets a line a minute instead of a bar
                    lines.update((received >> 20) - lines.done)
    # http.client returns b"" rather than raising when a connection drops before Content-Length is met.
    if total is not None and received < total:
        raise _Transient(f"connection dropped at byte {received} of {total}")


def locate(filename: str, url: str, mirror: str | os.PathLike | None) -> str | Path:
    """Where to get `filename`: the official `url`, `mirror/filename` (base URL) or a local mirror folder's file."""
    if mirror is None:
        return url
    mirror = str(mirror)
    if mirror.startswith(("http://", "https://", "ftp://")):
        return mirror.rstrip("/") + "/" + filename
    folder = Path(mirror.removeprefix("file://")).expanduser()
    if not folder.is_dir():
        raise DownloadError(f"mirror {mirror!r} is neither a URL nor an existing folder")
    return folder / filename


def fetch(filename: str, url: str, cache_dir: Path, mirror: str | os.PathLike | None = None,
          expected_sha256: str | None = None, expected_md5: str | None = None, *, progress: bool = True,
          retries: int = 3, backoff_s: float = 1.0) -> Path:
    """A verified local copy of `filename`: read in place from a mirror folder, else downloaded into `cache_dir`."""
    source = locate(filename, url, mirror)
    if isinstance(source, Path):
        if not source.is_file():
            raise DownloadError(f"mirror folder {source.parent} has no {filename}")
        verify_file(source, expected_sha256, expected_md5, source=str(source.parent), move_aside=False)
        return source
    return download(source, Path(cache_dir) / filename, expected_sha256, progress, retries,
                    expected_md5=expected_md5, backoff_s=backoff_s)


def _safe_target(dest_dir: Path, name: str, archive: Path) -> Path:
    """The extraction path of member `name`, refusing absolute paths and `..` (path traversal)."""
    parts = PurePosixPath(name).parts
    if not parts or PurePosixPath(name).is_absolute() or ".." in parts:
        raise ArchiveError(f"{archive}: refusing unsafe member path {name!r}")
    target = dest_dir.joinpath(*parts)
    if not target.resolve().is_relative_to(dest_dir.resolve()):
        raise ArchiveError(f"{archive}: refusing member {name!r} that escapes {dest_dir}")
    return target


def extract(archive: Path, dest_dir: Path, members: Iterable[str] | None = None, progress: bool = True,
            chunk_size: int = CHUNK_SIZE) -> dict[str, Path]:
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
        with _bar(archive.stat().st_size, archive.name, progress) as bar, open(archive, "rb") as raw, \
                tarfile.open(fileobj=_Counting(raw, bar), mode="r|*") as tar:
            for info in tar:
                if (wanted is not None and info.name not in wanted) or info.name in done or info.isdir():
                    continue
                if not info.isfile():
                    raise ArchiveError(f"{archive}: refusing non-regular member {info.name!r} (link or device)")
                target = _safe_target(dest_dir, info.name, archive)
                with atomic_path(target) as tmp, open(tmp, "wb") as out:
                    shutil.copyfileobj(tar.extractfile(info), out, chunk_size)
                done[info.name] = target
                if wanted is not None and set(done) == wanted:
                    break
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
        with gzip.open(archive, "rb") as src, atomic_path(target) as tmp, open(tmp, "wb") as out, \
                _bar(None, archive.name, progress) as bar:
            while chunk := src.read(chunk_size):
                out.write(chunk)
                bar.update(len(chunk))
    except (EOFError, zlib.error, gzip.BadGzipFile) as exc:
        raise ArchiveError(f"{archive}: truncated or corrupt archive ({exc})") from exc
    return target
