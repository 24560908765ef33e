"""What the remote sources share: fetching catalog files through the download cache or a mirror, and refusing a
dev/test set of the wrong size."""

from __future__ import annotations

import os
from dataclasses import asdict
from pathlib import Path
from typing import Any

from aiayn.data.archive import extract
from aiayn.data.clean import CleanOptions, write_json
from aiayn.data.download import RetryPolicy, fetch
from aiayn.data.sources.catalog import PairSpec, TextPairSpec
from aiayn.run import folders


class TestSetError(ValueError):
    """A dev/test set whose size is not the one expected for the named set (e.g. a filtered newstest2014)."""

    __test__ = False  # not a pytest test class, despite the name


class Fetcher:
    """Fetches catalog files into `cache_dir` (or reads them from a mirror folder) and extracts members."""

    def __init__(
        self,
        spec: PairSpec | TextPairSpec,
        cache_dir: Path,
        mirror: str | os.PathLike | None,
        progress: bool,
        policy: RetryPolicy,
    ) -> None:
        self.spec, self.cache_dir, self.mirror = spec, Path(cache_dir), mirror
        self.progress, self.policy = progress, policy
        self.used: dict[str, str] = {}

    def file(self, filename: str) -> Path:
        """The local path of catalog file `filename` (an archive, or a plain text file), downloaded or read from the
        mirror and verified."""
        archive = self.spec.archive(filename)
        path = fetch(
            archive.filename,
            archive.url,
            self.cache_dir,
            self.mirror,
            archive.sha256,
            archive.md5,
            progress=self.progress,
            policy=self.policy,
            legacy_filename=archive.legacy_filename,
        )
        self.used[filename] = archive.url if self.mirror is None else f"{self.mirror} (mirror of {archive.url})"
        return path

    def members(self, filename: str, names: list[str]) -> list[Path]:
        """Local paths of `names` inside archive `filename`, downloading and extracting as needed (the one member
        of a single-file .gz is its name without .gz)."""
        extracted = extract(self.file(filename), self.cache_dir / "extracted" / filename, names, self.progress)
        return [extracted[name] for name in names]


def open_source(
    spec: PairSpec | TextPairSpec,
    out_dir: Path,
    cache_dir: Path,
    mirror: str | os.PathLike | None,
    progress: bool,
    policy: RetryPolicy,
    src_lang: str | None,
    tgt_lang: str | None,
    max_train_pairs: int | None,
) -> tuple[Fetcher, tuple[str, str]]:
    """A Fetcher for `spec` and the translation direction (default: the catalog's), after the settings are checked
    and `out_dir` made."""
    langs = (src_lang or spec.langs[0], tgt_lang or spec.langs[1])
    if set(langs) != set(spec.langs):
        raise ValueError(
            f"data.src_lang/data.tgt_lang = {langs[0]}/{langs[1]} do not match {spec.name} (languages {spec.langs})"
        )
    if max_train_pairs is not None and max_train_pairs < 1:
        raise ValueError(f"data.max_train_pairs must be >= 1 or null, got {max_train_pairs}")
    Path(out_dir).mkdir(parents=True, exist_ok=True)
    return Fetcher(spec, Path(cache_dir), mirror, progress, policy), langs


def write_stats(
    out_dir: Path, fetcher: Fetcher, langs: tuple[str, str], clean: CleanOptions, **splits: dict[str, Any]
) -> dict:
    """`out_dir/stats.json`: the source, its direction, cleaning, each split's counts (`splits`) and the files used."""
    spec = fetcher.spec
    stats = {
        "source": spec.name,
        "src_lang": langs[0],
        "tgt_lang": langs[1],
        "test_set": spec.test.description,
        "valid_set": spec.valid.description,
        "clean": asdict(clean) | {"length_filters_apply_to": "train only"},
        **splits,
        "archives": dict(fetcher.used),
    }
    write_json(Path(out_dir) / folders.DATA_STATS, stats)
    return stats
