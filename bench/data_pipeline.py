"""Data pipeline benchmark: cleaning and subword encoding throughput, peak memory, padding of token batches.

The corpus is the WMT14 sample from ../shared grown to --pairs pairs (seeded reshuffles of its lines), so the
lengths are WMT-like. Each figure is printed with a reference measured in the same run:
- cleaning vs. a plain read+write of the same lines;
- encode_split (sentencepiece + binary files) vs. bare sentencepiece encoding of a slice;
- token-count batching's padding vs. random batches of the same mean size (target: at most 5% padding);
- train.length_bucket 0, 8, 16: distinct batch shapes per epoch and the padding they cost.
Usage: python bench/data_pipeline.py [--pairs 1000000] [--vocab-size 8000] [--max-tokens 25000]
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import random
import resource
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from aiayn.data.batching import TokenBatchSampler, padding_fraction, round_up
from aiayn.data.binary import EncodedSplit, encode_split
from aiayn.data.clean import CleanOptions, clean_parallel, iter_parallel
from aiayn.data.tokenizer import Tokenizer, train_tokenizer

REPO = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("AIAYN_SHARED", REPO.parent / "shared"))


def grow(sample: Path, out: Path, pairs: int, seed: int = 0) -> tuple[Path, Path]:
    """Write `pairs` pairs: the sample's pairs again and again, each round in a new seeded order."""
    base = list(iter_parallel(sample / "train.en", sample / "train.de"))
    rng, written = random.Random(seed), 0
    with open(out / "big.en", "w", encoding="utf-8") as fs, open(out / "big.de", "w", encoding="utf-8") as ft:
        while written < pairs:
            rng.shuffle(base)
            for src, tgt in base[: pairs - written]:
                fs.write(src + "\n")
                ft.write(tgt + "\n")
            written += min(len(base), pairs - written)
    return out / "big.en", out / "big.de"


def timed(fn, *args, **kwargs):
    start = time.perf_counter()
    result = fn(*args, **kwargs)
    return result, time.perf_counter() - start


def _copy_lines(src: Path, tgt: Path, out: Path) -> None:
    """Reference for cleaning: stream the same lines through Python, unchanged."""
    with open(out / "copy.src", "w", encoding="utf-8") as fs, open(out / "copy.tgt", "w", encoding="utf-8") as ft:
        for s, t in iter_parallel(src, tgt):
            fs.write(s + "\n")
            ft.write(t + "\n")


def _encode_child(model: str, src: str, tgt: str, prefix: str, queue) -> None:
    """Runs in a fresh process so its peak RSS is the encoder's alone."""
    header, seconds = timed(encode_split, Tokenizer(Path(model)), Path(src), Path(tgt), Path(prefix))
    queue.put((header["n"], seconds, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024))


def bench_encode(model: Path, src: Path, tgt: Path, prefix: Path) -> tuple[float, float, float]:
    """Pairs/s of encode_split and its peak RSS (MB), and pairs/s of bare sentencepiece on a 100k slice."""
    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    child = ctx.Process(target=_encode_child, args=(str(model), str(src), str(tgt), str(prefix), queue))
    child.start()
    n, seconds, peak_mb = queue.get()
    child.join()
    tokenizer = Tokenizer(model)
    pairs = [p for _, p in zip(range(100_000), iter_parallel(src, tgt))]
    _, bare = timed(lambda: (tokenizer.encode([s for s, _ in pairs]), tokenizer.encode([t for _, t in pairs])))
    return n / seconds, peak_mb, len(pairs) / bare


def bench_padding(prefix: Path, max_tokens: int) -> tuple[float, float]:
    """Padding fraction of one epoch of token-count batches, and of random batches of the same mean size."""
    split = EncodedSplit(prefix)
    src_lens, tgt_lens = np.asarray(split.src_lens), np.asarray(split.tgt_lens) + 1  # + BOS/EOS on the decoder
    batches = list(TokenBatchSampler(src_lens, tgt_lens, max_tokens, shuffle=True, seed=0))
    perm = np.random.default_rng(0).permutation(len(src_lens))
    random_batches = np.array_split(perm, len(batches))
    return padding_fraction(batches, src_lens, tgt_lens), padding_fraction(random_batches, src_lens, tgt_lens)


def bench_buckets(prefix: Path, max_tokens: int, buckets=(0, 8, 16)) -> dict[int, tuple[int, int, float]]:
    """Per train.length_bucket: (batches, distinct batch shapes (B, S, T), padding fraction) of one epoch."""
    split = EncodedSplit(prefix)
    src_lens, tgt_lens = np.asarray(split.src_lens), np.asarray(split.tgt_lens) + 1
    out = {}
    for bucket in buckets:
        batches = list(TokenBatchSampler(src_lens, tgt_lens, max_tokens, shuffle=True, seed=0, bucket=bucket))
        shapes = {(len(b), *(round_up(int(lens[b].max()), bucket) for lens in (src_lens, tgt_lens))) for b in batches}
        out[bucket] = (len(batches), len(shapes), padding_fraction(batches, src_lens, tgt_lens, bucket))
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=1_000_000)
    parser.add_argument("--vocab-size", type=int, default=8000)
    parser.add_argument("--max-tokens", type=int, default=25000, help="tokens per side per batch (section 5.1)")
    args = parser.parse_args(argv)
    sample = SHARED / "data" / "wmt14_sample"
    if not sample.is_dir():
        print(f"SKIP: {sample} is absent (set AIAYN_SHARED to the shared folder)")
        return 0
    with tempfile.TemporaryDirectory(prefix="aiayn-bench-") as tmp:
        work = Path(tmp)
        src, tgt = grow(sample, work, args.pairs)
        _, copy_s = timed(_copy_lines, src, tgt, work)
        clean, clean_s = timed(
            clean_parallel, iter_parallel(src, tgt), work / "train.src", work / "train.tgt", CleanOptions(), train=True
        )
        print(
            f"clean: {clean['kept']}/{clean['read']} kept in {clean_s:.1f}s "
            f"({clean_s / copy_s:.2f}x a plain copy, {copy_s:.1f}s)"
        )
        model, train_s = timed(
            train_tokenizer, [sample / "train.en", sample / "train.de"], work / "spm", args.vocab_size
        )
        print(f"tokenizer: vocab {args.vocab_size} trained in {train_s:.1f}s on the 10k-pair sample")
        rate, peak_mb, bare_rate = bench_encode(model, work / "train.src", work / "train.tgt", work / "train")
        print(
            f"encode_split: {rate:,.0f} pairs/s ({rate / bare_rate:.2f}x bare sentencepiece, "
            f"{bare_rate:,.0f} pairs/s); peak RSS {peak_mb:.0f} MB"
        )
        padding, random_padding = bench_padding(work / "train", args.max_tokens)
        verdict = "PASS" if padding <= 0.05 else "FAIL"
        print(
            f"padding: {padding:.4f} with token-count batches vs {random_padding:.4f} random "
            f"({padding / random_padding:.3f}x); target <= 0.05: {verdict}"
        )
        buckets = bench_buckets(work / "train", args.max_tokens)
        for bucket, (n, shapes, pad) in buckets.items():
            print(f"train.length_bucket={bucket}: {n} batches, {shapes} distinct (B, S, T) shapes, padding {pad:.4f}")
    print(f"RESULT clean_pairs_per_s {clean['read'] / clean_s:.0f}")
    print(f"RESULT peak_rss_mb {peak_mb:.0f}")
    for bucket, (_, shapes, pad) in buckets.items():
        print(f"RESULT shapes_bucket{bucket} {shapes}")
        print(f"RESULT padding_fraction_bucket{bucket} {pad:.4f}")
    print(f"RESULT padding_fraction {padding:.4f}")
    print(f"RESULT encode_sentences_per_s {2 * rate:.0f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
