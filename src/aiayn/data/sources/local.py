"""A local folder of parallel files `<prefix>.<lang>` (plain, .gz or .sgm), e.g. Multi30k, for the fetch stage."""

from __future__ import annotations

import hashlib
import heapq
from collections.abc import Iterator
from dataclasses import asdict
from pathlib import Path

from aiayn.data.clean import CleanOptions, clean_parallel, iter_parallel, normalize_text, write_json
from aiayn.run import folders

SUFFIXES = ("", ".sgm", ".gz")


def find_file(folder: Path, prefix: str, lang: str) -> Path:
    """`folder/<prefix>.<lang>` with an optional .sgm/.gz suffix; a missing file names every name tried."""
    tried = [Path(folder) / f"{prefix}.{lang}{suffix}" for suffix in SUFFIXES]
    for path in tried:
        if path.is_file():
            return path
    raise FileNotFoundError(
        f"no {prefix!r} file for language {lang!r} in {folder} (tried {', '.join(p.name for p in tried)})"
    )


def _key(src: str, seed: int, form: str | None) -> int:
    """A stable 64-bit hash of a normalised source sentence; equal sentences share it."""
    text = f"{seed}\0{normalize_text(src, form)}".encode()
    return int.from_bytes(hashlib.blake2b(text, digest_size=8).digest(), "big")


def holdout_keys(src_path: Path, tgt_path: Path, size: int, seed: int, form: str | None) -> set[int]:
    """The `size` smallest distinct source hashes: a deterministic, content-based sample in constant memory."""
    heap: list[int] = []  # negated keys: a max-heap of the smallest keys seen so far
    chosen: set[int] = set()
    for src, _ in iter_parallel(src_path, tgt_path):
        key = _key(src, seed, form)
        if key in chosen:
            continue
        if len(heap) < size:
            heapq.heappush(heap, -key)
            chosen.add(key)
        elif key < -heap[0]:
            chosen.discard(-heapq.heappushpop(heap, -key))
            chosen.add(key)
    return chosen


def held_out_pairs(
    src_path: Path, tgt_path: Path, keys: set[int], seed: int, form: str | None
) -> list[tuple[str, str]]:
    """The first pair, in file order, of each held-out source sentence."""
    held_out: dict[int, tuple[str, str]] = {}
    for src, tgt in iter_parallel(src_path, tgt_path):
        key = _key(src, seed, form)
        if key in keys and key not in held_out:
            held_out[key] = (src, tgt)
    return list(held_out.values())


def _without(
    pairs: Iterator[tuple[str, str]], keys: set[int], seed: int, form: str | None, counts: dict[str, int]
) -> Iterator[tuple[str, str]]:
    """The pairs whose source sentence is not held out, counting the ones removed."""
    for src, tgt in pairs:
        if _key(src, seed, form) in keys:
            counts["removed_for_test"] += 1
        else:
            yield src, tgt


def prepare_local(
    path: Path,
    out_dir: Path,
    src_lang: str,
    tgt_lang: str,
    train_prefix: str = "train",
    valid_prefix: str = "valid",
    test_prefix: str | None = None,
    clean: CleanOptions = CleanOptions(),
    max_train_pairs: int | None = None,
    *,
    holdout_size: int = 1000,
    holdout_seed: int = 0,
) -> dict:
    """Write `out_dir/{train,valid,test}.{src,tgt}` and `stats.json` from the files in folder `path`.

    With `test_prefix=None` the test set is carved off the training files: the `holdout_size` pairs whose source
    sentences hash lowest (seeded, so deterministic); every training pair sharing a held-out source is removed,
    so test and train share no source sentence. The carving happens before cleaning and `max_train_pairs`.
    """
    folder, out_dir = Path(path), Path(out_dir)
    if not folder.is_dir():
        raise FileNotFoundError(f"data.path={str(path)!r} is not a folder")
    if max_train_pairs is not None and max_train_pairs < 1:
        raise ValueError(f"data.max_train_pairs must be >= 1 or null, got {max_train_pairs}")
    files = {
        split: (find_file(folder, prefix, src_lang), find_file(folder, prefix, tgt_lang))
        for split, prefix in (("train", train_prefix), ("valid", valid_prefix), ("test", test_prefix))
        if prefix is not None
    }
    out_dir.mkdir(parents=True, exist_ok=True)
    stats: dict = {
        "source": f"local:{folder.resolve()}",
        "src_lang": src_lang,
        "tgt_lang": tgt_lang,
        "clean": asdict(clean) | {"length_filters_apply_to": "train only"},
    }
    stats["valid"] = clean_parallel(
        iter_parallel(*files["valid"]),
        out_dir / folders.raw_file("valid", "src"),
        out_dir / folders.raw_file("valid", "tgt"),
        clean,
        train=False,
    ) | {"files": [p.name for p in files["valid"]]}
    train_pairs: Iterator[tuple[str, str]] = iter_parallel(*files["train"])
    removed = {"removed_for_test": 0}
    if test_prefix is None:
        if holdout_size < 1:
            raise ValueError(f"holdout_size must be >= 1 when data.test_prefix is null, got {holdout_size}")
        keys = holdout_keys(*files["train"], holdout_size, holdout_seed, clean.normalize)
        test_pairs = iter(held_out_pairs(*files["train"], keys, holdout_seed, clean.normalize))
        test_name = (
            f"held out from {train_prefix}: {len(keys)} distinct source sentences (seed {holdout_seed}); "
            f"train keeps no pair with one of them"
        )
        train_pairs = _without(train_pairs, keys, holdout_seed, clean.normalize, removed)
    else:
        test_pairs, test_name = iter_parallel(*files["test"]), f"{test_prefix} ({files['test'][0].name})"
    train = clean_parallel(
        train_pairs,
        out_dir / folders.raw_file("train", "src"),
        out_dir / folders.raw_file("train", "tgt"),
        clean,
        train=True,
        max_pairs=max_train_pairs,
    )
    # "read" counts the pairs left after the carve; removed_for_test counts those held out and their repeats.
    stats["train"] = train | removed | {"files": [p.name for p in files["train"]]}
    stats["test"] = clean_parallel(
        test_pairs,
        out_dir / folders.raw_file("test", "src"),
        out_dir / folders.raw_file("test", "tgt"),
        clean,
        train=False,
    )
    stats["test_set"] = test_name
    write_json(out_dir / folders.DATA_STATS, stats)
    return stats
