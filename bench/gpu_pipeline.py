"""The real pipeline on one GPU: `dvc repro` (fetch -> bpe -> seeds -> train -> evaluate -> aggregate) in a fresh copy.

Multi30k at the `small` scale on `trainer=gpu` (bf16), rows base and D1 (no dropout, a large paper effect) x seeds
1 and 2, one seed after another (`launcher=basic`), for `--steps` updates. Two config files written into the copy
hold what params.yaml cannot: conf/data/multi30k_gpu.yaml (the data folder's absolute path) and
conf/scale/small_gpu.yaml (the step count; snapshots every steps/20 so base averages its last 5). Prints every
stage's time, each run's dev/test BLEU, dev PPL and tokens/s (source + target, from train.json and curve.csv),
the tables, then RESULT lines, the headline (base dev BLEU) last. With $OUT set, the log and tables land there.
bench/gpu_pipeline.sh is the entry point (it installs the carried wheels on the GPU machine first).

    python bench/gpu_pipeline.py run [--data DIR] [--steps 2000] [--workdir DIR] [--budget-s S] [--cpu-smoke]
    python bench/gpu_pipeline.py prepare     # here: .whl (what the GPU image lacks) and .gpu_data/multi30k

--cpu-smoke: the same flow on trainer=cpu, 40 steps of a tiny model on a 2000-pair slice of the data.
--workdir: a folder that is reused when it already holds a copy, so a run stopped at --budget-s resumes there.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import yaml

from aiayn import runspec  # run folders and file names, from the one place that names them
from aiayn.project import REPO, copy_project  # one copy of the project, shared with the DVC tests
from aiayn.runspec import RunSpec

# Packages the GPU image already holds (/work/.library/device/KINDS.md, read 2026-11-17) among those the wheels
# below need; everything else in the closure of ROOTS is carried, pinned to this environment's versions.
ON_DEVICE = {
    "aiohappyeyeballs",
    "aiohttp",
    "aiosignal",
    "attrs",
    "certifi",
    "charset-normalizer",
    "click",
    "cloudpickle",
    "colorama",
    "filelock",
    "frozenlist",
    "fsspec",
    "idna",
    "joblib",
    "markdown-it-py",
    "mdurl",
    "multidict",
    "networkx",
    "packaging",
    "pathspec",
    "propcache",
    "psutil",
    "pygments",
    "pyparsing",
    "python-dateutil",
    "pyyaml",
    "regex",
    "requests",
    "rich",
    "setuptools",
    "six",
    "tabulate",
    "tqdm",
    "typing-extensions",
    "urllib3",
    "yarl",
}
ROOTS = ("dvc", "hydra-core", "omegaconf", "sacremoses")  # torch, lightning, sacrebleu, sentencepiece: on the image
PLATFORMS = (
    "manylinux_2_28_x86_64",
    "manylinux_2_27_x86_64",
    "manylinux_2_17_x86_64",
    "manylinux2014_x86_64",
    "manylinux1_x86_64",
)
ROWS, SEEDS = ["base", "D1"], [1, 2]
OUT_FILES = ("table3.md", "table2.md", "table3.csv", "table2.csv", "metrics.json", "curves.csv")  # + log, runs.json


def scale_config(steps: int, smoke: bool) -> str:
    """conf/scale/small_gpu.yaml: `small` with `steps` updates; checkpoints every steps/4, averaging snapshots every
    steps/20 (base averages the last 5); no wandb (the run folders hold every number; the GPU image has none)."""
    cfg = {
        "defaults": ["small", "_self_"],
        "scale": {"name": "small_gpu_smoke" if smoke else "small_gpu"},
        "train": {
            "max_steps": steps,
            "val_every_steps": steps // 4,
            "ckpt_every_steps": steps // 4,
            "snapshot_every_steps": steps // 20,
            "log_every_steps": max(1, steps // 20),
        },
        "logger": {"backend": "none"},
    }
    if smoke:  # a tiny model and batch, a small vocabulary, a short test bootstrap: seconds a stage on a CPU
        cfg["model"] = {"n_layers": 3, "d_model": 64, "d_ff": 256, "n_heads": 4, "d_k": 16, "d_v": 16}
        cfg["train"] |= {"batch_tokens": 1024, "max_tokens": 1024, "warmup_steps": 10}
        cfg["data"] = {"vocab_size": 500, "holdout_size": 100}
        cfg["decode"] = {"bootstrap": 100}
    return "# @package _global_\n" + yaml.safe_dump(cfg, sort_keys=False)


def smoke_slice(data: Path, dst: Path, train_lines: int = 2000, val_lines: int = 100) -> Path:
    """The first lines of each file of `data` in `dst`: the CPU smoke's corpus."""
    dst.mkdir(parents=True, exist_ok=True)
    for f in data.iterdir():
        keep = train_lines if f.name.startswith("train.") else val_lines
        with f.open(encoding="utf-8") as src:
            (dst / f.name).write_text("".join(line for _, line in zip(range(keep), src)), encoding="utf-8")
    return dst


def git_shim(argv: list[str]) -> int:
    """`git init -q` and `git ls-files -co --exclude-standard` (all copy_project asks of git) through dulwich, a DVC
    dependency, for a machine without a git binary."""
    from dulwich.ignore import IgnoreFilterManager
    from dulwich.repo import Repo

    if argv[:1] == ["init"]:
        Repo.init(next((a for a in argv[1:] if not a.startswith("-")), "."))
        return 0
    if argv[:1] != ["ls-files"]:
        sys.exit(f"git shim: only init and ls-files, not {argv}")
    repo = Repo(".")
    ignore = IgnoreFilterManager.from_repo(repo)
    listed = {p.decode() for p in repo.open_index()}
    for top, dirs, files in os.walk("."):
        rel = "" if top == "." else os.path.relpath(top, ".") + "/"
        dirs[:] = [d for d in dirs if d != ".git" and not ignore.is_ignored(rel + d + "/")]
        listed |= {rel + f for f in files if not ignore.is_ignored(rel + f)}
    print("\n".join(sorted(listed)))
    return 0


def tool_dir(scratch: Path) -> Path:
    """`python` (this interpreter, for DVC's stage commands) and, where there is no git, the shim above."""
    bin_dir = scratch / "bin"
    bin_dir.mkdir()
    shims = {"python": f'"{sys.executable}"'}  # a script, not a link: a venv's python finds its venv only by path
    if shutil.which("git") is None:
        shims["git"] = f'"{sys.executable}" "{Path(__file__).resolve()}" git'
        print("no git binary: copy_project's git calls go through dulwich")
    for name, cmd in shims.items():
        (bin_dir / name).write_text(f'#!/bin/sh\nexec {cmd} "$@"\n')
        (bin_dir / name).chmod(0o755)
    return bin_dir


def repro(work: Path, env: dict, log, budget_s: float | None) -> tuple[int, dict[str, float]]:
    """`dvc repro` in `work`, its output timestamped to stdout and `log`; stopped (process group) after `budget_s`.
    Returns the exit status and each stage's seconds (from one 'Running stage' line to the next)."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "dvc", "repro"],
        cwd=work,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        bufsize=1,
        start_new_session=True,
    )

    def stop() -> None:
        msg = f"budget of {budget_s:.0f} s spent: stopping dvc repro (a rerun with the same --workdir resumes)\n"
        print(msg, end="", flush=True)
        log.write(msg)
        for sig, wait in ((signal.SIGTERM, 10), (signal.SIGKILL, None)):
            try:
                os.killpg(proc.pid, sig)
                proc.wait(wait)
                return
            except (ProcessLookupError, subprocess.TimeoutExpired):
                continue

    timer = threading.Timer(budget_s, stop) if budget_s else None
    if timer:
        timer.start()
    t0, starts = time.perf_counter(), []
    for line in proc.stdout:
        now = time.perf_counter() - t0
        if m := re.match(r"Running stage '(.+)'", line):
            starts.append((m.group(1), now))
        line = f"[{now:7.1f}s] {line}"
        print(line, end="", flush=True)
        log.write(line)
        log.flush()
    rc = proc.wait()
    rc = 124 if rc < 0 else rc  # stopped at the budget: what `timeout` returns
    if timer:
        timer.cancel()
    ends = [t for _, t in starts[1:]] + [time.perf_counter() - t0]
    return rc, {name: end - t for (name, t), end in zip(starts, ends)}


def collect(work: Path, rows: list[str], seeds: list[int]) -> dict[str, dict]:
    """Per run: steps, wall time, dev PPL and tokens/s (train.json, curve.csv), dev/test BLEU (eval.json)."""
    runs = {}
    for row in rows:
        for seed in seeds:
            spec, r = RunSpec.for_row(row, seed, runs=work / "runs", evals=work / "evals"), {}
            run_dir = spec.run_dir
            if (run_dir / runspec.TRAIN_SUMMARY).is_file():
                t = json.loads((run_dir / runspec.TRAIN_SUMMARY).read_text())
                r |= {
                    "steps": t["steps"],
                    "train_s": t["wall_time_s"],
                    "val_ppl": t["val_ppl"],
                    "tokens_per_s": sum(t["tokens_seen"].values()) / max(t["wall_time_s"], 1e-9),
                    "device": t["device"]["name"],
                    "precision": t["precision"],
                }
            if (run_dir / runspec.CURVE).is_file():
                with (run_dir / runspec.CURVE).open() as f:
                    rates = [float(x["train_tokens_per_s"]) for x in csv.DictReader(f) if x.get("train_tokens_per_s")]
                if rates:  # the median logging window, the first (start-up) left out
                    r["curve_tokens_per_s"] = statistics.median(rates[1:] or rates)
            eval_json = spec.eval_dir / runspec.EVAL
            if eval_json.is_file():
                e = json.loads(eval_json.read_text())
                test = e.get("test") or {}
                r |= {
                    "dev_bleu": e["dev"]["bleu"],
                    "test_bleu": test.get("bleu"),
                    "dev_ppl": e["dev"]["ppl"],
                    "averaged": test.get("checkpoints_averaged"),
                }
            runs[f"{row}/seed{seed}"] = r
    return runs


def mean(runs: dict[str, dict], row: str, key: str) -> float | None:
    values = [r[key] for name, r in runs.items() if name.split("/")[0] == row and r.get(key) is not None]
    return statistics.fmean(values) if values else None


def fmt(value, spec: str) -> str:
    return "-" if value is None else format(value, spec)


def make_copy(args: argparse.Namespace) -> tuple[Path, bool]:
    """The project copied into --workdir (or a temporary folder) with this run's params and two config files; a
    folder that already holds a copy is reused (True: resumed)."""
    if not (REPO / ".git").exists():  # the GPU machine's copy of the checkout: let git list its files
        subprocess.run(["git", "init", "-q"], cwd=REPO, check=True)
    work = Path(args.workdir).resolve() if args.workdir else Path(tempfile.mkdtemp(prefix="aiayn-gpu-pipeline-"))
    resumed = (work / "dvc.yaml").is_file()
    if not resumed:
        work.mkdir(parents=True, exist_ok=True)
        copy_project(
            work,
            scale="small_gpu",
            data="multi30k_gpu",
            trainer="cpu" if args.cpu_smoke else "gpu",
            launcher=args.launcher,
            rows=args.rows,
            seeds=args.seeds,
            extra_seeds={},
        )
    data = Path(args.data).resolve()
    if args.cpu_smoke:  # inside the copy, so a resumed smoke reads the same path
        data = smoke_slice(data, work / "smoke_data")
    (work / "conf/data/multi30k_gpu.yaml").write_text(
        f"# Multi30k from {data} (bench/gpu_pipeline.py)\ndefaults:\n  - multi30k\n  - _self_\npath: {data}\n"
    )
    (work / "conf/scale/small_gpu.yaml").write_text(scale_config(args.steps, args.cpu_smoke))
    print(
        f"{'resuming' if resumed else 'fresh copy'} in {work}; data {data}; {args.steps} steps; rows {args.rows} "
        f"x seeds {args.seeds}; trainer {'cpu (smoke)' if args.cpu_smoke else 'gpu'}",
        flush=True,
    )
    return work, resumed


def report(work: Path, args: argparse.Namespace, stages: dict[str, float], out: Path | None) -> dict[str, dict]:
    """Stage times, a line per run, the two tables; copies of the tables under `out`. Returns the runs."""
    for name, s in stages.items():
        print(f"stage {name:20s} {s:7.1f} s")
    runs = collect(work, args.rows, args.seeds)
    print(
        f"\n{'run':12s} {'steps':>6s} {'train s':>8s} {'tok/s':>9s} {'curve tok/s':>11s} {'dev PPL':>8s} "
        f"{'dev BLEU':>8s} {'test BLEU':>9s} {'avg':>4s}"
    )
    for name, r in runs.items():
        print(
            f"{name:12s} {fmt(r.get('steps'), '6d')} {fmt(r.get('train_s'), '8.1f')} "
            f"{fmt(r.get('tokens_per_s'), '9.0f')} {fmt(r.get('curve_tokens_per_s'), '11.0f')} "
            f"{fmt(r.get('dev_ppl'), '8.2f')} {fmt(r.get('dev_bleu'), '8.2f')} {fmt(r.get('test_bleu'), '9.2f')} "
            f"{fmt(r.get('averaged'), '4d')}"
        )
    devices = {r["device"] + " " + r["precision"] for r in runs.values() if "device" in r}
    print(
        f"tok/s: source + target tokens per second of training (train.json: all of it; curve.csv: the median "
        f"logging window); avg: checkpoints averaged. device: {', '.join(sorted(devices)) or '-'}"
    )
    for table in ("table3.md", "table2.md"):
        path = work / "results" / table
        print(f"\n== results/{table} ==\n{path.read_text() if path.is_file() else '(not written)'}")
    for name in OUT_FILES if out else ():
        if (work / "results" / name).is_file():
            shutil.copy2(work / "results" / name, out / name)
    return runs


def run(args: argparse.Namespace) -> int:
    start = time.perf_counter()
    out = Path(os.environ["OUT"]) if os.environ.get("OUT") else None
    scratch = Path(tempfile.mkdtemp(prefix="aiayn-gpu-pipeline-tools-"))
    os.environ["PATH"] = f"{tool_dir(scratch)}{os.pathsep}{os.environ['PATH']}"  # copy_project's git, DVC's python
    if "GIT_CONFIG_COUNT" not in os.environ:  # root in a checkout copied by another user: git would refuse it
        os.environ |= {"GIT_CONFIG_COUNT": "1", "GIT_CONFIG_KEY_0": "safe.directory", "GIT_CONFIG_VALUE_0": "*"}
    work, resumed = make_copy(args)
    env = dict(
        os.environ,
        PYTHONPATH=os.pathsep.join(filter(None, [str(work / "src"), os.environ.get("PYTHONPATH")])),
        HYDRA_FULL_ERROR="1",
        PYTHONUNBUFFERED="1",
        GIT_PYTHON_REFRESH="quiet",
        DVC_NO_ANALYTICS="1",
    )
    log_path = (out or REPO / "bench/out") / "gpu_pipeline.log"
    log_path.parent.mkdir(parents=True, exist_ok=True)
    print(f"log: {log_path}", flush=True)
    with log_path.open("w") as log:
        rc, stages = repro(work, env, log, args.budget_s - (time.perf_counter() - start) if args.budget_s else None)
    wall = time.perf_counter() - start
    runs = report(work, args, stages, out)
    if out:
        (out / "runs.json").write_text(
            json.dumps({"runs": runs, "stages_s": stages, "wall_s": wall, "rc": rc, "resumed": resumed}, indent=1)
        )
    if not args.keep and not args.workdir:
        shutil.rmtree(work, ignore_errors=True)
    shutil.rmtree(scratch, ignore_errors=True)

    print(f"\ndvc repro exit status {rc}{' (resumed run: times are this call only)' if resumed else ''}")
    kinds: dict[str, float] = {}
    for name, s in stages.items():
        kinds[name.split("@")[0]] = kinds.get(name.split("@")[0], 0.0) + s
    for kind, s in kinds.items():
        print(f"RESULT gpu_pipeline_{kind}_s {s:.1f}")
    for row in args.rows:
        for key in ("dev_bleu", "test_bleu", "dev_ppl", "tokens_per_s"):
            if (value := mean(runs, row, key)) is not None:
                print(f"RESULT {row}_{key} {value:.2f}")
    print(f"RESULT gpu_pipeline_wall_s {wall:.1f}")
    print(f"RESULT base_dev_bleu {fmt(mean(runs, 'base', 'dev_bleu'), '.2f')}")
    return rc


def needed_wheels() -> dict[str, str]:
    """The closure of ROOTS in this environment (Python 3.12 markers), less ON_DEVICE: name -> installed version."""
    import importlib.metadata as md

    from packaging.markers import default_environment
    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name

    marker_env = default_environment() | {"python_version": "3.12", "python_full_version": "3.12.3", "extra": ""}
    found: dict[str, str] = {}
    todo = list(ROOTS)
    while todo:
        name = canonicalize_name(todo.pop())
        if name in found or name in ON_DEVICE:
            continue
        dist = md.distribution(name)
        found[name] = dist.version
        todo += [r.name for r in map(Requirement, dist.requires or []) if not r.marker or r.marker.evaluate(marker_env)]
    return found


def canonical(wheel: Path) -> str:
    return re.sub(r"[-_.]+", "-", wheel.name.split("-")[0]).lower()


def prepare(args: argparse.Namespace) -> int:
    """Here, before a GPU run: .whl/ (cp312 wheels of what the GPU image lacks) and .gpu_data/multi30k, both ignored
    through .git/info/exclude, to travel with `carry`."""
    exclude = Path(
        subprocess.run(
            ["git", "rev-parse", "--git-path", "info/exclude"], cwd=REPO, capture_output=True, text=True, check=True
        ).stdout.strip()
    )
    exclude = exclude if exclude.is_absolute() else REPO / exclude
    exclude.parent.mkdir(parents=True, exist_ok=True)
    lines = exclude.read_text().splitlines() if exclude.is_file() else []
    exclude.write_text("\n".join(lines + [p for p in ("/.whl/", "/.gpu_data/") if p not in lines]) + "\n")
    shutil.copytree(Path(args.data).resolve(), REPO / ".gpu_data" / "multi30k", dirs_exist_ok=True)
    pins = needed_wheels()
    wheels = REPO / ".whl"
    for old in wheels.glob("*.whl"):  # one version of each: two would stop the install there
        if canonical(old) in pins:
            old.unlink()
    pip = [
        sys.executable,
        "-m",
        "pip",
        "download",
        "--quiet",
        "--no-deps",
        "--only-binary=:all:",
        "--python-version",
        "3.12",
        "--implementation",
        "cp",
        *[f"--platform={p}" for p in PLATFORMS],
        "-d",
        str(wheels),
    ]
    built = [f"{n}=={v}" for n, v in pins.items() if n == "antlr4-python3-runtime"]  # published as a source only
    subprocess.run(pip + [f"{n}=={v}" for n, v in pins.items() if f"{n}=={v}" not in built], check=True)
    if built:
        subprocess.run(
            [sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "-w", str(wheels), *built], check=True
        )
    have = {canonical(w) for w in wheels.glob("*.whl")}
    missing = sorted(set(pins) - have)
    size = sum(p.stat().st_size for p in [*wheels.glob("*.whl"), *(REPO / ".gpu_data").rglob("*")] if p.is_file())
    print(f"{len(have)} wheels in .whl, {len(missing)} missing {missing}; .whl + .gpu_data: {size / 2**20:.1f} MiB")
    return 1 if missing else 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command")
    default_data = REPO.parent / "shared/data/multi30k"
    default_data = default_data if default_data.is_dir() else REPO / ".gpu_data/multi30k"
    p_run = sub.add_parser("run", help="the pipeline in a fresh copy (the default)")
    p_run.add_argument("--data", default=str(default_data), help="Multi30k folder (train.{en,de}, val.{en,de})")
    p_run.add_argument("--steps", type=int, help="updates per run, a multiple of 20 (2000; 40 with --cpu-smoke)")
    p_run.add_argument("--rows", nargs="+", default=ROWS)
    p_run.add_argument("--seeds", nargs="+", type=int, default=SEEDS)
    p_run.add_argument("--launcher", default="basic", help="conf/hydra/launcher for a row's seeds")
    p_run.add_argument("--workdir", help="the copy's folder; reused (resumed) when it holds one; kept")
    p_run.add_argument("--budget-s", type=float, help="stop dvc repro this many seconds after the start")
    p_run.add_argument("--cpu-smoke", action="store_true", help="trainer=cpu, a tiny model, a 2000-pair slice")
    p_run.add_argument("--keep", action="store_true", help="keep the temporary copy")
    p_prep = sub.add_parser("prepare", help="fill .whl and .gpu_data for the GPU machine")
    p_prep.add_argument("--data", default=str(REPO.parent / "shared/data/multi30k"))
    if sys.argv[1:2] == ["git"]:
        return git_shim(sys.argv[2:])
    args = parser.parse_args(
        sys.argv[1:] if sys.argv[1:2] in (["run"], ["prepare"], ["-h"], ["--help"]) else ["run", *sys.argv[1:]]
    )
    if args.command == "prepare":
        return prepare(args)
    args.steps = args.steps or (40 if args.cpu_smoke else 2000)
    if args.steps % 20:
        parser.error(f"--steps {args.steps}: give a multiple of 20 (snapshots every steps/20, base averages 5)")
    return run(args)


if __name__ == "__main__":
    sys.exit(main())
