"""WMT 2014 EN-DE / EN-FR (section 5.1): download, extract, clean into the fetch stage's six files + stats.json."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

from aiayn.data.clean import CleanOptions, clean_parallel, iter_parallel
from aiayn.data.download import RetryPolicy
from aiayn.data.sgm import read_sgm_pair
from aiayn.data.sources.catalog import EvalSet, PairSpec, wmt14_spec
from aiayn.data.sources.remote import Fetcher, TestSetError, open_source, write_stats
from aiayn.run import folders


def _eval_split(
    fetcher: Fetcher, eval_set: EvalSet, src_lang: str, tgt_lang: str, out_dir: Path, split: str, clean: CleanOptions
) -> dict:
    """Write one SGM dev/test set, refusing it unless it has exactly the expected number of segments."""
    src_member, ref_member = eval_set.paths(src_lang, tgt_lang)
    src_path, ref_path = fetcher.members(eval_set.archive, [src_member, ref_member])
    src, ref = read_sgm_pair(src_path, ref_path)
    if len(src) != eval_set.expected_lines:
        raise TestSetError(
            f"refusing {src_path}: {len(src)} segments, but {eval_set.name} has "
            f"{eval_set.expected_lines} ({eval_set.description}); sets of different sizes "
            f"must never be mixed"
        )
    stats = clean_parallel(
        zip(src, ref),
        out_dir / folders.raw_file(split, "src"),
        out_dir / folders.raw_file(split, "tgt"),
        clean,
        train=False,
    )
    return {**stats, "set": eval_set.name, "description": eval_set.description, "files": [src_member, ref_member]}


def _train_pairs(
    fetcher: Fetcher, spec: PairSpec, src_lang: str, tgt_lang: str, read: dict[str, int]
) -> Iterator[tuple[str, str]]:
    """The training corpora one after the other, each fetched only when reached; counts lines read per corpus."""
    for corpus in spec.train:
        src_path, tgt_path = fetcher.members(corpus.archive, [corpus.path(src_lang), corpus.path(tgt_lang)])
        read[corpus.name] = 0
        for pair in iter_parallel(src_path, tgt_path):
            read[corpus.name] += 1
            yield pair


def prepare_wmt14(
    pair: str,
    out_dir: Path,
    cache_dir: Path,
    mirror: str | os.PathLike | None = None,
    clean: CleanOptions = CleanOptions(),
    max_train_pairs: int | None = None,
    progress: bool = True,
    *,
    src_lang: str | None = None,
    tgt_lang: str | None = None,
    spec: PairSpec | None = None,
    policy: RetryPolicy = RetryPolicy(),
) -> dict:
    """Write `out_dir/{train,valid,test}.{src,tgt}` and `stats.json` for `pair` (wmt14_en_de | wmt14_en_fr).

    Train: the paper's corpora, cleaned (CleanOptions); valid: newstest2013; test: newstest2014-full (3003
    lines). Direction defaults to English -> other. `spec` replaces the catalog entry (tests, private mirrors).
    """
    spec = spec or wmt14_spec(pair)
    fetcher, (src_lang, tgt_lang) = open_source(
        spec, out_dir, cache_dir, mirror, progress, policy, src_lang, tgt_lang, max_train_pairs
    )
    out_dir = Path(out_dir)
    # The small evaluation sets first: a wrong test set fails before gigabytes of training data are read.
    valid = _eval_split(fetcher, spec.valid, src_lang, tgt_lang, out_dir, "valid", clean)
    test = _eval_split(fetcher, spec.test, src_lang, tgt_lang, out_dir, "test", clean)
    read: dict[str, int] = {}
    train = clean_parallel(
        _train_pairs(fetcher, spec, src_lang, tgt_lang, read),
        out_dir / folders.raw_file("train", "src"),
        out_dir / folders.raw_file("train", "tgt"),
        clean,
        train=True,
        max_pairs=max_train_pairs,
    )
    return write_stats(
        out_dir, fetcher, (src_lang, tgt_lang), clean, train={**train, "corpora_read": read}, valid=valid, test=test
    )
