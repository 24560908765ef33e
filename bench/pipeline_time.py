"""Where the time of a `dvc repro` goes: each stage of the pipeline run alone, in DAG order, in a fresh copy.

Copies the project (as git sees it) into a temporary folder, sets params.yaml (scale, rows, seeds), then runs
`dvc repro --single-item <stage>` for every stage in the order `dvc repro` would, timing each. Prints seconds per
stage and per kind (fetch, bpe, train, evaluate, aggregate) with their share of the total, then the total;
the headline is the whole pipeline's wall time.

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

from aiayn.project import copy_project


def stage_order(repo: Path, env: dict[str, str]) -> list[str]:
    """Stage names as dvc.yaml lists them, matrix entries expanded: a valid order, since each stage of dvc.yaml
    depends only on stages above it."""
    out = subprocess.run(
        [sys.executable, "-m", "dvc", "stage", "list", "--name-only"],
        cwd=repo,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return [line.strip() for line in out.splitlines() if line.strip()]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scale", help="override params.yaml scale")
    parser.add_argument("--rows", nargs="+", help="override params.yaml rows")
    parser.add_argument("--seeds", nargs="+", type=int, help="override params.yaml seeds")
    parser.add_argument("--keep", action="store_true", help="keep the temporary copy and print its path")
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
        seconds: dict[str, float] = {}
        for name in stage_order(tmp, env):
            start = time.perf_counter()
            subprocess.run(
                [sys.executable, "-m", "dvc", "repro", "--single-item", name],
                cwd=tmp,
                env=env,
                check=True,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
            seconds[name] = time.perf_counter() - start
            print(f"{name:30s} {seconds[name]:8.1f} s", flush=True)
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
        print(f"RESULT pipeline_noop_repro_s {noop:.1f}")
        print(f"RESULT pipeline_total_s {total:.1f}")
    finally:
        if args.keep:
            print(f"kept {tmp}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
