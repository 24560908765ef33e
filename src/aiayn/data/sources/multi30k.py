"""Multi30k task 1 (Elliott et al. 2016): download, verify and gunzip its published files, clean them into the fetch
stage's six files + stats.json. Train is train, valid is val, test is test_2016_flickr."""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from pathlib import Path

from aiayn.data.clean import CleanOptions, CorpusError, clean_parallel, iter_parallel
from aiayn.data.download import RetryPolicy
from aiayn.data.sources.catalog import MULTI30K, MULTI30K_TOK, TextPairSpec, TextSplit
from aiayn.data.sources.remote import Fetcher, TestSetError, open_source, write_stats
from aiayn.run import folders

# data.form: which published files (the raw captions: MULTI30K, or the literature's lowercased, tokenised ones:
# MULTI30K_TOK)
FORMS = ("raw", "lc.norm.tok")


def _split_files(fetcher: Fetcher, split: TextSplit, langs: tuple[str, str]) -> list[Path]:
    """The gunzipped source and target files of `split` (fetched, verified and extracted into the cache)."""
    paths = []
    for lang in langs:
        name = split.archive(lang).filename
        paths += fetcher.members(name, [name.removesuffix(".gz")]) if name.endswith(".gz") else [fetcher.file(name)]
    return paths


def _checked(
    pairs: Iterable[tuple[str, str]], split: TextSplit, path: Path, error: type[ValueError]
) -> Iterator[tuple[str, str]]:
    """`pairs`, then `error` (inside the writer, so nothing is written) when the whole file held a number of lines
    other than the split's; a reader that stops early (max_train_pairs) checks nothing."""
    lines = 0
    for pair in pairs:
        lines += 1
        yield pair
    if lines != split.expected_lines:
        raise error(
            f"refusing {path}: {lines} lines, but {split.name} has {split.expected_lines} ({split.description}); "
            f"sets of different sizes must never be mixed"
        )


def _split(
    fetcher: Fetcher,
    split: TextSplit,
    langs: tuple[str, str],
    out_dir: Path,
    name: str,
    clean: CleanOptions,
    max_pairs: int | None = None,
) -> dict:
    """Write `out_dir/{name}.{src,tgt}` from `split`, cleaned as a training split when `name` is train."""
    src_path, tgt_path = _split_files(fetcher, split, langs)
    train = name == "train"
    pairs = _checked(iter_parallel(src_path, tgt_path), split, src_path, CorpusError if train else TestSetError)
    stats = clean_parallel(
        pairs,
        out_dir / folders.raw_file(name, "src"),
        out_dir / folders.raw_file(name, "tgt"),
        clean,
        train=train,
        max_pairs=max_pairs,
    )
    files = [split.archive(lang).filename for lang in langs]
    return {**stats, "set": split.name, "description": split.description, "files": files}


def prepare_multi30k(
    out_dir: Path,
    cache_dir: Path,
    mirror: str | os.PathLike | None = None,
    clean: CleanOptions = CleanOptions(),
    max_train_pairs: int | None = None,
    progress: bool = True,
    *,
    src_lang: str | None = None,
    tgt_lang: str | None = None,
    form: str = "raw",
    spec: TextPairSpec | None = None,
    policy: RetryPolicy = RetryPolicy(),
) -> dict:
    """Write `out_dir/{train,valid,test}.{src,tgt}` and `stats.json` from Multi30k's task-1 files.

    Train (29000 pairs) is cleaned like every training corpus (CleanOptions); valid (val, 1014 lines) and test
    (test_2016_flickr, 1000 lines) keep every line. Direction defaults to English -> German. Each file is fetched
    into `cache_dir` (or read from a `mirror` folder, or downloaded from a `mirror` URL) and checked against its
    pinned sha256. `form` picks the published files (FORMS: "raw", or "lc.norm.tok", the literature's lowercased,
    punctuation-normalised, Moses-tokenised ones); `spec` replaces the catalog entry (tests, private mirrors).
    """
    if form not in FORMS:
        raise ValueError(f"data.form={form!r}: Multi30k is published as {' or '.join(FORMS)}")
    spec = spec or (MULTI30K if form == "raw" else MULTI30K_TOK)
    fetcher, langs = open_source(
        spec, out_dir, cache_dir, mirror, progress, policy, src_lang, tgt_lang, max_train_pairs
    )
    valid = _split(fetcher, spec.valid, langs, Path(out_dir), "valid", clean)
    test = _split(fetcher, spec.test, langs, Path(out_dir), "test", clean)
    train = _split(fetcher, spec.train, langs, Path(out_dir), "train", clean, max_train_pairs)
    return write_stats(Path(out_dir), fetcher, langs, clean, train=train, valid=valid, test=test)
