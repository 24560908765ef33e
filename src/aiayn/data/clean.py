"""Streamed, counted cleaning of parallel text: Unicode/whitespace normalisation and length filters (train only)."""

from __future__ import annotations

import gzip
import re
import unicodedata
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from itertools import zip_longest
from pathlib import Path
from typing import Any

from aiayn.config.schema import NORMAL_FORMS, CleanConfig
from aiayn.data.sgm import read_sgm
from aiayn.io import atomic_path, atomic_write_json
from aiayn.progress import Progress

DROP_REASONS = ("empty", "too_short", "too_long", "ratio")
_FORMS = (None, *NORMAL_FORMS)  # None: as it is
# Departure: see docs/departures.md#corpus-cleaning-counts
# Invisible characters that only fragment subwords, removed, and each removal counted by its kind (stats.json
# "changed"): C0/C1 controls (except the whitespace ones, which become spaces), e.g. a NUL byte; format characters
# (soft hyphen, zero-width space, bidi marks and overrides, word joiners); the byte-order mark.
REMOVED = {
    "control_chars": re.compile("[\x00-\x08\x0e-\x1f\x7f-\x84\x86-\x9f]"),
    "format_chars": re.compile("[\u00ad\u200b\u200e\u200f\u202a-\u202e\u2060-\u2064]"),
    "bom": re.compile("\ufeff"),
}
CHANGE_REASONS = (*REMOVED, "unicode_form")  # lines changed other than by whitespace, by why
_SPACE = re.compile(r"\s+")


class CorpusError(ValueError):
    """A corpus file that cannot be used as is (bad UTF-8, parallel files of different lengths)."""


_DEFAULTS = CleanConfig()


@dataclass(frozen=True)
class CleanOptions:
    """Cleaning settings (`cfg.data.clean`): lengths in whitespace-separated words; None disables a filter."""

    # Departure: see docs/departures.md#corpus-cleaning (section 5.1 describes no cleaning or filtering).

    min_len: int | None = _DEFAULTS.min_len  # the values of data.clean, said once in the config schema
    max_len: int | None = _DEFAULTS.max_len
    max_ratio: float | None = _DEFAULTS.max_ratio
    normalize: str | None = _DEFAULTS.normalize

    def __post_init__(self) -> None:
        if self.normalize not in _FORMS:
            raise ValueError(f"data.clean.normalize must be one of {_FORMS}, got {self.normalize!r}")
        if self.min_len is not None and self.min_len < 0:
            raise ValueError(f"data.clean.min_len must be >= 0, got {self.min_len}")
        if self.max_len is not None and self.max_len < (self.min_len or 0):
            raise ValueError(f"data.clean.max_len ({self.max_len}) is below data.clean.min_len ({self.min_len})")
        if self.max_ratio is not None and self.max_ratio < 1:
            raise ValueError(f"data.clean.max_ratio must be >= 1 (longer/shorter), got {self.max_ratio}")


def normalize_text(text: str, form: str | None = "NFC", changes: dict[str, int] | None = None) -> str:
    """Drop invisible control, format and BOM characters, apply Unicode normal form `form`, collapse whitespace runs
    and strip; with `changes`, count the line under each reason that changed it (CHANGE_REASONS)."""
    for reason, pattern in REMOVED.items():
        text, n = pattern.subn("", text)
        if n and changes is not None:
            changes[reason] += 1
    if form:
        normal = unicodedata.normalize(form, text)  # type: ignore[arg-type]  # one of _FORMS (CleanOptions)
        if normal != text and changes is not None:
            changes["unicode_form"] += 1
        text = normal
    return " ".join(text.split())


def collapse_whitespace(text: str) -> str:
    """What references get (as sacreBLEU does): whitespace runs to one space, stripped; nothing else touched."""
    return _SPACE.sub(" ", text).strip()


def iter_lines(path: Path) -> Iterator[str]:
    """Lines of a UTF-8 text file (.gz read transparently) without their endings; bad UTF-8 names file and line."""
    path = Path(path)
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rb") as f:
        # Binary iteration splits on b"\n" only, so a stray \r or U+2028 inside a sentence never splits it.
        for lineno, raw in enumerate(f, 1):
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise CorpusError(
                    f"{path}:{lineno}: not valid UTF-8 ({exc.reason} at byte {exc.start} of the line)"
                ) from exc
            if lineno == 1:
                line = line.removeprefix("\ufeff")
            yield line.rstrip("\n").rstrip("\r")


def read_segments(path: Path) -> Iterator[str]:
    """Sentences of a corpus file: `<seg>` texts of an .sgm file, else its lines."""
    path = Path(path)
    if path.name.endswith(".sgm"):
        yield from (seg.text for seg in read_sgm(path))
    else:
        yield from iter_lines(path)


def iter_parallel(src_path: Path, tgt_path: Path) -> Iterator[tuple[str, str]]:
    """Aligned (source, target) sentences of two files; files of different lengths are rejected, naming both."""
    for count, (src, tgt) in enumerate(zip_longest(read_segments(src_path), read_segments(tgt_path))):
        if src is None or tgt is None:  # `count` lines of each were read before this one
            longer, shorter = (tgt_path, src_path) if src is None else (src_path, tgt_path)
            total = sum(1 for _ in read_segments(longer))
            raise CorpusError(f"line counts differ: {shorter} has {count} lines but {longer} has {total}")
        yield src, tgt


def drop_reason(src: str, tgt: str, options: CleanOptions) -> str | None:
    """Why a training pair is dropped (one of DROP_REASONS), or None to keep it."""
    n_src, n_tgt = len(src.split()), len(tgt.split())
    shorter, longer = min(n_src, n_tgt), max(n_src, n_tgt)
    if shorter == 0:
        return "empty"
    if options.min_len is not None and shorter < options.min_len:
        return "too_short"
    if options.max_len is not None and longer > options.max_len:
        return "too_long"
    if options.max_ratio is not None and longer / shorter > options.max_ratio:
        return "ratio"
    return None


def clean_parallel(
    pairs: Iterable[tuple[str, str]],
    src_out: Path,
    tgt_out: Path,
    options: CleanOptions,
    *,
    train: bool,
    max_pairs: int | None = None,
) -> dict:
    """Normalise and write `pairs` to two files (atomically); returns counts of lines read, kept and dropped.

    Train: both sides normalised, then filtered by drop_reason; stops after `max_pairs` kept pairs.
    Valid/test: every line is kept, so references stay aligned with the official set; the source is normalised
    like training text and the reference only has its whitespace collapsed, so BLEU scores it as sacreBLEU would.
    """
    if max_pairs is not None and not train:
        raise ValueError("max_pairs applies to the training split only")
    stats: dict[str, Any] = {
        "read": 0,
        "kept": 0,
        "dropped": dict.fromkeys(DROP_REASONS, 0),
        "changed": dict.fromkeys(CHANGE_REASONS, 0),
    }  # lines (either side) cleaning changed, by reason
    if not train:
        stats["empty_kept"] = 0
    stopped = False
    lines = Progress(f"clean {Path(src_out).stem}", None, "pairs read")
    with (
        atomic_path(src_out) as src_tmp,
        atomic_path(tgt_out) as tgt_tmp,
        open(src_tmp, "w", encoding="utf-8", newline="\n") as fs,
        open(tgt_tmp, "w", encoding="utf-8", newline="\n") as ft,
    ):
        for src, tgt in pairs:
            if max_pairs is not None and stats["kept"] >= max_pairs:
                stopped = True
                break
            stats["read"] += 1
            lines.update()
            src = normalize_text(src, options.normalize, stats["changed"])
            tgt = normalize_text(tgt, options.normalize, stats["changed"]) if train else collapse_whitespace(tgt)
            if train and (reason := drop_reason(src, tgt, options)):
                stats["dropped"][reason] += 1
                continue
            if not train and not (src and tgt):
                stats["empty_kept"] += 1
            stats["kept"] += 1
            fs.write(src + "\n")
            ft.write(tgt + "\n")
    lines.finish()
    if train:
        stats["stopped_at_max_pairs"] = stopped
    return stats


def write_json(path: Path, obj: dict) -> Path:
    """Write `obj` as indented JSON, atomically."""
    atomic_write_json(path, obj)
    return Path(path)
