"""How much of Table 3's paired spread across seeds is the dev set's sampling: for every row, seed and base, the
standard deviation of ΔBLEU (row minus base, same seed) over dev sentences resampled together for both
(aiayn.eval.bootstrap.paired_delta_sd), against the spread of the paired differences across seeds that the family
intervals use. It reads a finished pipeline (evals/, data/raw/valid.tgt); nothing is trained or decoded.

A dev set of n sentences adds to every seed's paired difference at most the bootstrap variance (the part of it that
is the same for every seed, sentences both systems of every seed get differently right, shifts the mean and does not
spread the seeds); so the share var(bootstrap) / var(across seeds) bounds what a dev set of infinite size would remove
from the spread, and a dev set k times larger removes (1 - 1/k) of it. Target: a share at most 0.25, so that
the dev set's size costs at most an eighth of the intervals' width (sqrt(1 - 0.25) = 0.87).

    python studies/dev_noise.py [--repo PATH] [--samples 1000]
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
from pathlib import Path

from aiayn.eval.bootstrap import paired_delta_sd
from aiayn.io import read_lines
from aiayn.run.folders import RunSpec


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repo", type=Path, default=Path("."), help="a project whose pipeline ran (default: here)")
    parser.add_argument("--samples", type=int, default=1000, help="bootstrap resamples per paired difference")
    args = parser.parse_args()
    import json

    refs = read_lines(args.repo / "data" / "raw" / "valid.tgt")
    evals = args.repo / "evals"
    rows = sorted(p.name for p in evals.iterdir() if (p / "seed1").is_dir()) if evals.is_dir() else []
    if "base" not in rows:
        sys.exit(f"error: {evals}/base not found: run `dvc repro` in {args.repo} first")

    def run(row: str, seed: int) -> tuple[list[str], float] | None:
        folder = RunSpec.for_row(row, seed, {}, args.repo / "runs", evals).eval_dir
        hyps, result = folder / "hyps.valid.txt", folder / "eval.json"
        if not hyps.is_file() or not result.is_file():
            return None
        return read_lines(hyps), float(json.loads(result.read_text())["dev"]["bleu"])

    shares, boot_sds, seed_sds = [], [], []
    print(f"dev set: {len(refs)} sentences; {args.samples} resamples per paired difference")
    print(f"{'row':6s} {'seeds':>5s} {'SD across seeds':>16s} {'bootstrap SD':>13s} {'share':>6s}")
    for row in rows:
        if row == "base":
            continue
        pairs = []
        for seed in range(1, 101):
            ours, base = run(row, seed), run("base", seed)
            if ours is None or base is None:
                continue
            sd = paired_delta_sd(base[0], ours[0], refs, n=args.samples, seed=seed)
            pairs.append((ours[1] - base[1], sd))
        if len(pairs) < 2:
            continue
        across = statistics.stdev(d for d, _ in pairs)
        boot = math.sqrt(statistics.fmean(sd * sd for _, sd in pairs))
        share = boot**2 / across**2 if across > 0 else math.nan
        shares.append(share)
        boot_sds.append(boot)
        seed_sds.append(across)
        print(f"{row:6s} {len(pairs):5d} {across:16.3f} {boot:13.3f} {share:6.2f}")
    if not shares:
        sys.exit("error: no row with two evaluated seeds paired with base")
    print(f"RESULT dev_noise_sentences {len(refs)}")
    print(f"RESULT dev_noise_bootstrap_sd_median {statistics.median(boot_sds):.3f}")
    print(f"RESULT dev_noise_seed_sd_median {statistics.median(seed_sds):.3f}")
    print(f"RESULT dev_noise_share_median {statistics.median(shares):.3f}")


if __name__ == "__main__":
    main()
