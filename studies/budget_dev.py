"""The dev-set side of a budgeted recipe's study (docs/results.md#multi30k-a-seed-in-a-sitting): decode the dev split
of finished run folders with the mean of their last k checkpoints for each k asked (1: the last alone, Table 3's
protocol; base's 5, Table 2's; 10, Wu et al.'s), by each run's own decode settings, and score it. The test split is
never read, so a recipe can be chosen on these numbers before any test score of it is seen.

    python studies/budget_dev.py runs/base/seed1 [more run folders] [--average 1 5 10] [--out dev.json]

Prints a line per run and k, then `RESULT dev_bleu_lc_tok_<run>_avg<k> <value>` lines, the mean over the runs of the
first k's BLEU last.
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

from aiayn.eval.scoring import score_translations
from aiayn.inference.trained import open_run
from aiayn.io import atomic_write_json, read_lines
from aiayn.run import folders


def dev_scores(run_dir: Path, average: int) -> dict:
    """The dev split's scores of one run folder with the mean of its last `average` checkpoints."""
    run = open_run(run_dir, average=average)
    raw = Path(run.cfg.paths.raw)
    sources = read_lines(raw / folders.raw_file("valid", "src"))
    refs = read_lines(raw / folders.raw_file("valid", "tgt"))
    start = time.perf_counter()
    hyps = run.decoding.translate(run.model, run.tokenizer, sources, f"decode dev, last {average}")
    seconds = time.perf_counter() - start
    tokenized = run.cfg.data.form == "lc.norm.tok"
    scores = score_translations(hyps, refs, tgt_lang=run.cfg.data.tgt_lang, bootstrap=0, tokenized=tokenized)
    return {
        "run": str(run_dir),
        "average": average,
        "checkpoints": [p.name for p in run.checkpoints],
        "bleu_lc_tok": scores["bleu_lc_tok"],
        "bleu": scores["bleu"],
        "decode_s": round(seconds, 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", nargs="+", type=Path, help="finished run folders (runs/base/seed1)")
    parser.add_argument("--average", nargs="+", type=int, default=[1, 5, 10], help="how many last checkpoints")
    parser.add_argument("--out", type=Path, help="write every score to this JSON file")
    args = parser.parse_args()
    rows = []
    for run_dir in args.runs:
        for k in args.average:
            row = dev_scores(run_dir, k)
            rows.append(row)
            print(
                f"{run_dir} last {k}: dev BLEU (lc tok) {row['bleu_lc_tok']:.2f}, sacreBLEU {row['bleu']:.2f}, "
                f"{row['decode_s']:.0f} s",
                flush=True,
            )
    if args.out:
        atomic_write_json(args.out, rows)
    for row in rows:
        name = Path(row["run"]).name
        print(f"RESULT dev_bleu_lc_tok_{name}_avg{row['average']} {row['bleu_lc_tok']:.2f}")
    first = [row["bleu_lc_tok"] for row in rows if row["average"] == args.average[0]]
    print(f"RESULT dev_bleu_lc_tok_mean_avg{args.average[0]} {statistics.fmean(first):.2f}")


if __name__ == "__main__":
    main()
