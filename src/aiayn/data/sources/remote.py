"""What the remote sources share: fetching catalog files through the download cache or a mirror, and refusing a
dev/test set of the wrong size."""

from __future__ import annotations

import os
from pathlib import Path

from aiayn.data.download import RetryPolicy, extract, fetch
from aiayn.data.sources.catalog import PairSpec, TextPairSpec


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

    def members(self, filename: str, names: list[str]) -> list[Path]:
        """Local paths of `names` inside archive `filename`, downloading and extracting as needed (the one member
        of a single-file .gz is its name without .gz)."""
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
        extracted = extract(path, self.cache_dir / "extracted" / filename, names, self.progress)
        return [extracted[name] for name in names]
