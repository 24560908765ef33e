"""Atomic file writes: a temporary file in the same folder, then `os.replace`, so a crash never leaves half a file;
a full disk during one ends with a DiskFullError naming the file, what it needed and what is free."""

from __future__ import annotations

import errno
import json
import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

# The checkout this package is installed from (pip install -e): conf/ and pipeline/ beside src/. The one place that
# counts parent folders. An installed package (pip install .) has no checkout: it reads nothing from one, and what
# needs the project's conf/ (composing a pipeline config) finds it in the working folder or at AIAYN_CONF.
CHECKOUT = Path(__file__).resolve().parents[2]


class OneLineError(Exception):
    """An error whose message says all a user needs (the file or key, what is wrong, what to do): the stage scripts
    print it as one `error:` line, with no traceback."""


class DiskFullError(OneLineError, OSError):
    """A write that met a full disk: one line naming the file, the bytes it needed (when known) and the bytes
    free. Nothing half-written is left for a rerun to trust; free space and rerun."""

    def __init__(self, path: Path | str, needed: int | None = None, written: int | None = None) -> None:
        path = Path(path)
        free = free_bytes(path)
        need = (
            f"needs {needed:,} bytes"
            if needed is not None
            else f"needs more than the {written:,} bytes written"
            if written
            else "needs more space"
        )
        super().__init__(
            errno.ENOSPC,
            f"no space left on the device writing {path}: {need}, "
            f"{free:,} bytes free there; free space and rerun (finished work is kept)",
        )
        self.path, self.needed, self.free = path, needed, free

    def __str__(self) -> str:
        return self.strerror or ""


def free_bytes(path: Path) -> int:
    """Free bytes on the file system holding `path` (its nearest existing folder)."""
    path = Path(path).absolute()
    while not path.exists() and path != path.parent:
        path = path.parent
    return shutil.disk_usage(path).free


def is_disk_full(err: BaseException) -> bool:
    return isinstance(err, OSError) and err.errno in (errno.ENOSPC, errno.EDQUOT)


@contextmanager
def atomic_path(path: Path | str, needed: int | None = None) -> Iterator[Path]:
    """Yield a temporary path beside `path`; on success it replaces `path`, on error it is removed. A full disk
    raises DiskFullError (naming `path`, `needed` bytes when the caller knows them)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    try:
        yield Path(tmp)
        os.chmod(tmp, 0o666 & ~umask())  # mkstemp's 0600 would hide results from the rest of a shared group
        os.replace(tmp, path)
    except BaseException as err:
        written = Path(tmp).stat().st_size if Path(tmp).exists() else None
        Path(tmp).unlink(missing_ok=True)
        if is_disk_full(err) and not isinstance(err, DiskFullError):
            raise DiskFullError(path, needed, written) from err
        raise


def umask() -> int:
    """This process's umask (read without changing it)."""
    mask = os.umask(0)
    os.umask(mask)
    return mask


def atomic_write_text(path: Path | str, text: str) -> Path:
    """Write UTF-8 text to `path` atomically (aiayn.io.atomic_path); return the path."""
    with atomic_path(path) as tmp:
        tmp.write_text(text, encoding="utf-8")
    return Path(path)


def atomic_write_json(path: Path | str, obj: Any) -> Path:
    """`obj` as indented JSON with sorted keys, written atomically; return the path."""
    return atomic_write_text(path, json.dumps(obj, indent=2, sort_keys=True) + "\n")


def save_png(fig: Any, path: Path | str) -> Path:
    """A matplotlib figure rendered with Agg and written atomically as PNG; no Software metadata, so the bytes
    depend only on the data."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    FigureCanvasAgg(fig)
    with atomic_path(path) as tmp:
        fig.savefig(tmp, format="png", dpi=100, metadata={"Software": None})
    return Path(path)


def read_lines(path: Path | str) -> list[str]:
    """One sentence per line; split on "\\n" only, since str.splitlines also breaks on U+2028 inside sentences."""
    lines = Path(path).read_text(encoding="utf-8").split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return lines


def read_json(path: Path | str) -> Any:
    """Read a JSON file; a malformed one raises ValueError naming the file and the position."""
    try:
        return json.loads(Path(path).read_text(encoding="utf-8"))
    except json.JSONDecodeError as err:
        raise ValueError(f"{path}: invalid JSON at line {err.lineno}, column {err.colno}: {err.msg}") from err
