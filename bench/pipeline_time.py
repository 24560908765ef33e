"""Where the time of a `dvc repro` goes: each stage of the pipeline, in a fresh copy.

Copies the project (as git sees it) into a temporary folder, sets params.yaml (scale, rows, seeds), then runs one
`dvc repro` there, timing each stage from DVC's "Running stage" line to the next. Prints seconds per
stage and per kind (fetch, bpe, train, evaluate, aggregate) with their share of the total, the lines the stages
wrote (stdout and stderr together, what a person reads of a `dvc repro`; `--log` keeps them), then the total; the
headline is the whole pipeline's wall time.

    python bench/pipeline_time.py                       # the default params.yaml
    python bench/pipeline_time.py --scale smoke --rows base --seeds 1 2
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

import yaml

from aiayn.run.checkout import copy_project, repro


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scale", help="override params.yaml scale")
    parser.add_argument("--rows", nargs="+", help="override params.yaml rows")
    parser.add_argument("--seeds", nargs="+", type=int, help="override params.yaml seeds")
    parser.add_argument("--keep", action="store_true", help="keep the temporary copy and print its path")
    parser.add_argument("--log", type=Path, help="write what the stages printed here (default: only counted)")
    args = parser.parse_args()
    env = dict(
        os.environ,
        WANDB_MODE=os.environ.get("WANDB_MODE", "offline"),
        WANDB_SILENT="true",
        PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
    )
    tmp = Path(tempfile.mkdtemp(prefix="aiayn-pipeline-time-"))
    try:
        given = {k: v for k, v in (("scale", args.scale), ("rows", args.rows), ("seeds", args.seeds)) if v}
        params = yaml.safe_load((copy_project(tmp, **given) / "params.yaml").read_text())
        print(f"params: scale={params['scale']} data={params['data']} rows={params['rows']} seeds={params['seeds']}")
        # One plain `dvc repro`, as a user runs it, its lines echoed with their time (aiayn.run.checkout.repro: a
        # stage's time runs from its "Running stage" line to the next, so DVC's hashing between stages counts with the
        # one before).
        log_file = args.log or tmp / "repro.log"
        with open(log_file, "w", encoding="utf-8") as log:
            rc, seconds = repro(tmp, env, log, None)
        if rc:
            sys.exit(f"error: dvc repro failed (exit {rc}); its log: {log_file}")
        log_lines = log_file.read_text(encoding="utf-8").splitlines()
        for name, s in seconds.items():
            print(f"{name:30s} {s:8.1f} s")
        start = time.perf_counter()
        subprocess.run(
            [sys.executable, "-m", "dvc", "repro"],
            cwd=tmp,
            env=env,
            check=True,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        noop = time.perf_counter() - start
        total = sum(seconds.values())
        kinds: dict[str, float] = defaultdict(float)
        for name, s in seconds.items():
            kinds[name.split("@")[0]] += s
        for kind, s in kinds.items():
            print(f"RESULT pipeline_{kind}_s {s:.1f}  ({s / total:.0%})")
        print(f"RESULT pipeline_log_lines {len(log_lines)}")
        print(f"RESULT pipeline_noop_repro_s {noop:.1f}")
        print(f"RESULT pipeline_total_s {total:.1f}")
    finally:
        if args.keep:
            print(f"kept {tmp}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
