"""The project as git sees it, copied into a fresh folder, and `dvc repro` run there with each stage timed: what
bench/pipeline_time.py and gpu/gpu_pipeline.py time and the DVC tests run in, never the developer's own data or runs."""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import IO, Any

import yaml

from aiayn.io import CHECKOUT

REPO = CHECKOUT  # the checkout this package is installed from (pip install -e)


def project_files(root: Path = REPO) -> list[str]:
    """The files of the checkout at `root` as `git ls-files -co --exclude-standard` lists them (tracked, and untracked
    but not ignored), read with dulwich (a DVC dependency), so no git binary is needed."""
    from dulwich import porcelain
    from dulwich.repo import Repo

    with Repo(str(root)) as repo:
        tracked = {path.decode() for path in repo.open_index()}
    untracked = porcelain.status(str(root), untracked_files="all").untracked
    return sorted(tracked | {p.decode() if isinstance(p, bytes) else p for p in untracked})


def copy_project(dst: Path, **params: Any) -> Path:
    """The project's files as git sees them (project_files) copied into `dst`, a fresh git repository, with `params`
    written over params.yaml's values."""
    from dulwich.repo import Repo

    for rel in project_files():
        if (REPO / rel).is_file():
            (dst / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(REPO / rel, dst / rel)
    merged = yaml.safe_load((dst / "params.yaml").read_text()) | params
    (dst / "params.yaml").write_text(yaml.safe_dump(merged))
    Repo.init(str(dst)).close()
    return Path(dst)


def repro(work: Path, env: dict, log: IO[str], budget_s: float | None) -> tuple[int, dict[str, float]]:
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
    assert proc.stdout is not None  # stdout=PIPE
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
