"""Robust downloads: resume, retry, checksum, cache, mirrors (archives are unpacked by aiayn.data.archive).

Made for slow servers that drop connections (the statmt EN-FR archives: 2.4-2.6 GB at ~150 kB/s, five hours
each): a dropped TLS stream, a reset or a stall (no byte for `stall_s`) ends one attempt, and the next resumes from
the `.part` file with an HTTP Range request. The retry budget counts consecutive attempts that made no progress,
so a transfer that keeps advancing is never abandoned; waits grow exponentially, capped, with jitter. A verified
archive is remembered (size, mtime, digest in `<cache>/.verified/`) and not hashed again.
"""

from __future__ import annotations

import hashlib
import http.client
import json
import logging
import os
import random
import ssl
import time
import urllib.error
import urllib.request
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from aiayn.config.schema import DownloadConfig
from aiayn.io import DiskFullError, OneLineError, atomic_write_json, is_disk_full
from aiayn.progress import Progress, byte_bar, on_terminal

log = logging.getLogger(__name__)

CHUNK_SIZE = 1 << 20
# 408/429 and 5xx are transient server states worth retrying; other HTTP errors are not.
_RETRY_STATUS = {408, 429, 500, 502, 503, 504}


class DownloadError(OneLineError, RuntimeError):
    """A download failed for good (bad URL, HTTP error, retries exhausted, a mirror without the file)."""


class ChecksumError(RuntimeError):
    """A file's checksum differs from the recorded one."""


class UnverifiedWarning(UserWarning):
    """A file was used without a recorded checksum to verify it against."""


class _Transient(ConnectionError):
    """A download attempt ended early; the next attempt resumes it."""


# A cut TLS stream (ssl.SSLError, SSLEOFError), a reset or refused connection, a stall (the socket timeout), a short
# or malformed response: each ends one attempt, which the next resumes.
_RETRYABLE = (_Transient, ConnectionError, TimeoutError, ssl.SSLError, urllib.error.URLError, http.client.HTTPException)


_DEFAULTS = DownloadConfig()


@dataclass(frozen=True)
class RetryPolicy:
    """How long a download keeps trying (`data.download`).

    `retries`: attempts in a row that may fail without adding a byte to the .part file before giving up (an
    attempt that made progress resets the count). `stall_s`: seconds without a byte after which an attempt is
    abandoned. Waits: `backoff_s` doubling per failure without progress, at most `backoff_max_s`, times a random
    factor in [0.5, 1] so that parallel downloads do not retry in step.
    """

    retries: int = _DEFAULTS.retries  # the values of data.download, said once in the config schema
    stall_s: float = _DEFAULTS.stall_s
    backoff_s: float = _DEFAULTS.backoff_s
    backoff_max_s: float = _DEFAULTS.backoff_max_s

    def __post_init__(self) -> None:
        if self.retries < 0 or not self.stall_s > 0 or self.backoff_s < 0 or self.backoff_max_s < self.backoff_s:
            raise ValueError(
                f"bad download retry policy {self}: retries >= 0, stall_s > 0, 0 <= backoff_s <= backoff_max_s"
            )

    def wait(self, failures: int) -> float:
        """Seconds before the next attempt after `failures` failed attempts in a row (0: one that progressed)."""
        return min(self.backoff_max_s, self.backoff_s * 2 ** max(failures - 1, 0)) * random.uniform(0.5, 1.0)


def file_digest(path: Path, algorithm: str = "sha256", chunk_size: int = CHUNK_SIZE) -> str:
    """Hex digest of a file, read in chunks (constant memory)."""
    digest = hashlib.new(algorithm)
    with open(path, "rb") as f:
        while chunk := f.read(chunk_size):
            digest.update(chunk)
    return digest.hexdigest()


def verify_file(
    path: Path,
    expected_sha256: str | None = None,
    expected_md5: str | None = None,
    *,
    source: str = "",
    move_aside: bool = True,
    stamps: Path | None = None,
) -> str:
    """Check `path` against its recorded sum; warn with the computed sha256 when none is recorded.

    On a mismatch the bad file is renamed aside (unless `move_aside` is False) and ChecksumError names both sums.
    With `stamps` (a folder), a file once verified is remembered there by path, size and mtime, and not hashed
    again while those stay the same (EN-FR's archives are 6.6 GB to hash). Returns the digest.
    """
    path = Path(path)
    algorithm, expected = ("sha256", expected_sha256) if expected_sha256 else ("md5", expected_md5)
    stamp = _stamp_file(stamps, path) if stamps is not None and expected else None
    if stamp is not None and expected and _stamp_matches(stamp, path, algorithm, expected):
        return expected.lower()
    actual = file_digest(path, algorithm if expected else "sha256")
    if not expected:
        warnings.warn(
            f"{path.name} is UNVERIFIED (no published checksum recorded); its sha256 is {actual} "
            f"- record it to pin this file",
            UnverifiedWarning,
            stacklevel=2,
        )
        return actual
    if actual.lower() == expected.lower():
        if stamps is not None:
            _remember(stamps, path, algorithm, actual)
        return actual
    where = f" from {source}" if source else ""
    kept = ""
    if move_aside:
        bad = path.with_name(f"{path.name.removesuffix('.part')}.bad-{actual[:12]}")
        os.replace(path, bad)
        kept = f"; the bad file is kept at {bad}"
    raise ChecksumError(
        f"checksum mismatch for {path.name}{where}: expected {algorithm} {expected}, got {actual}{kept}"
    )


def _stamp_file(stamps: Path, path: Path) -> Path:
    """Where the verification of `path` is remembered: by name and a hash of its absolute path."""
    key = hashlib.sha256(str(Path(path).resolve()).encode()).hexdigest()[:12]
    return Path(stamps) / f"{Path(path).name}.{key}.json"


def _remember(stamps: Path, path: Path, algorithm: str, digest: str) -> None:
    """Record that `path`, at its current size and mtime, has this digest."""
    info = path.stat()
    atomic_write_json(
        _stamp_file(stamps, path),
        {
            "path": str(path.resolve()),
            "size": info.st_size,
            "mtime_ns": info.st_mtime_ns,
            "algorithm": algorithm,
            "digest": digest,
        },
    )


def _stamp_matches(stamp: Path, path: Path, algorithm: str, expected: str) -> bool:
    try:
        data, info = json.loads(stamp.read_text(encoding="utf-8")), path.stat()
    except (OSError, ValueError):
        return False
    return (data.get("size"), data.get("mtime_ns"), data.get("algorithm"), str(data.get("digest")).lower()) == (
        info.st_size,
        info.st_mtime_ns,
        algorithm,
        expected.lower(),
    )


def download(
    url: str,
    dest: Path,
    expected_sha256: str | None = None,
    progress: bool = True,
    policy: RetryPolicy = RetryPolicy(),
    chunk_size: int = CHUNK_SIZE,
    *,
    expected_md5: str | None = None,
    stamps: Path | None = None,
    sleep: Callable[[float], None] = time.sleep,
) -> Path:
    """Download `url` to `dest` via `dest.part`, resuming and retrying (RetryPolicy), then verify; a verified
    `dest` is reused. A full disk ends it with DiskFullError; the .part stays and resumes on the next call."""
    dest = Path(dest)
    if dest.exists():
        verify_file(dest, expected_sha256, expected_md5, source=url, stamps=stamps)
        return dest
    part = dest.with_name(dest.name + ".part")
    part.parent.mkdir(parents=True, exist_ok=True)
    failures = 0
    while True:
        before = part.stat().st_size if part.exists() else 0
        try:
            _fetch_into(url, part, progress, chunk_size, policy.stall_s)
            break
        except _RETRYABLE as exc:
            after = part.stat().st_size if part.exists() else 0
            failures = 0 if after > before else failures + 1
            if failures > policy.retries:
                raise DownloadError(
                    f"{url}: gave up after {failures} attempts in a row that added nothing "
                    f"({exc}); {part} keeps its {after:,} bytes and resumes on the next run"
                ) from exc
            wait = policy.wait(failures)
            log.warning(
                "%s: attempt ended at byte %s (%s: %s); resuming in %.0f s",
                url,
                f"{after:,}",
                type(exc).__name__,
                exc,
                wait,
            )
            sleep(wait)
    digest = verify_file(part, expected_sha256, expected_md5, source=url)
    os.replace(part, dest)
    if stamps is not None and (expected_sha256 or expected_md5):
        _remember(stamps, dest, "sha256" if expected_sha256 else "md5", digest)
    return dest


def _open(request: urllib.request.Request, timeout: float):
    """urlopen, with `timeout` as the longest wait for any byte (a stalled server ends the attempt)."""
    return urllib.request.urlopen(request, timeout=timeout)


def _fetch_into(url: str, part: Path, progress: bool, chunk_size: int, timeout: float) -> None:
    """One attempt: append to `part` from its current size (HTTP Range), or restart if the server ignores it."""
    offset = part.stat().st_size if part.exists() else 0
    request = urllib.request.Request(url, headers={"Range": f"bytes={offset}-"} if offset else {})
    try:
        response = _open(request, timeout)
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
        with open(part, "ab" if offset else "wb") as f, byte_bar(total, part.name, progress, offset) as bar:
            while chunk := response.read(chunk_size):
                try:
                    f.write(chunk)
                    f.flush()  # a full disk shows here, chunk by chunk, not at close
                except OSError as err:
                    if is_disk_full(err):
                        raise DiskFullError(part, None if total is None else total - received) from err
                    raise
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


def fetch(
    filename: str,
    url: str,
    cache_dir: Path,
    mirror: str | os.PathLike | None = None,
    expected_sha256: str | None = None,
    expected_md5: str | None = None,
    *,
    progress: bool = True,
    policy: RetryPolicy = RetryPolicy(),
    legacy_filename: str | None = None,
    sleep: Callable[[float], None] = time.sleep,
) -> Path:
    """A verified local copy of `filename`: read in place from a mirror folder, else downloaded into `cache_dir`.

    `legacy_filename`, the name a cache or mirror folder used before names were unique per source, is accepted
    when its checksum verifies (a cached copy is renamed, not downloaded again).
    """
    stamps = Path(cache_dir) / ".verified"
    source = locate(filename, url, mirror)
    if isinstance(source, Path):
        old = source.with_name(legacy_filename) if legacy_filename else None
        if not source.is_file() and old is not None and old.is_file():
            source = old  # an older mirror folder: the name without its source folder
        if not source.is_file():
            also = f" (or {legacy_filename}, the server's name)" if legacy_filename else ""
            raise DownloadError(f"mirror folder {source.parent} has no {filename}{also}")
        verify_file(source, expected_sha256, expected_md5, source=str(source.parent), move_aside=False, stamps=stamps)
        return source
    dest = Path(cache_dir) / filename
    old = Path(cache_dir) / legacy_filename if legacy_filename and legacy_filename != filename else None
    if not dest.exists() and old is not None and old.is_file() and (expected_sha256 or expected_md5):
        verify_file(old, expected_sha256, expected_md5, source=str(old), move_aside=False)
        os.replace(old, dest)
        log.info("%s: the cached %s verified; renamed to its source-unique name", dest, old.name)
    return download(
        source, dest, expected_sha256, progress, policy, expected_md5=expected_md5, stamps=stamps, sleep=sleep
    )
