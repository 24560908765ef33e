"""hydra/launcher=parallel (hydra_plugins.aiayn_launcher): jobs forked from the launching process, with its imports;
no deadlock after the parent's own torch threads ran; joblib where forking is unsafe."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

# A Hydra app whose launching process runs torch on two intra-op threads (so the thread pool exists when it forks),
# then four jobs, two at a time: each job records the launcher's share of the cores, pins one thread as trainer=cpu
# does (a fork using more after its parent's OpenMP pool ran hangs), runs torch and records who ran it. With
# PENDING_SEEDS, the task function says which jobs have work (the rest would return at once), and the launching
# process runs no torch, so each job computes on its share.
APP = """
import json, os, sys
import hydra, torch
from hydra.core.hydra_config import HydraConfig
import wave  # only the launching process imports it: a job that has it inherited the parent's modules

def job(cfg):
    share = torch.get_num_threads()  # as the launcher made it
    if not os.environ.get("PENDING_SEEDS"):
        torch.set_num_threads(1)
    x = torch.randn(256, 256)
    y = (x @ x).sum().item()
    record = dict(seed=cfg.seed, pid=os.getpid(), ppid=os.getppid(), threads=share, num=HydraConfig.get().job.num,
                  inherited="wave" in sys.modules, finite=y == y)
    with open(f"{cfg.out}/job{cfg.seed}.json", "w") as f:
        json.dump(record, f)
    return cfg.seed * 10

if os.environ.get("PENDING_SEEDS"):  # the jobs with work to do; the rest would return at once (a kept seed)
    job.pending = lambda config, overrides: str(config.seed) in os.environ["PENDING_SEEDS"].split(",")

if __name__ == "__main__":
    if not os.environ.get("PENDING_SEEDS"):
        torch.set_num_threads(2)
        torch.randn(512, 512) @ torch.randn(512, 512)  # the parent's OpenMP pool now exists
    with open(sys.argv[-1].split("=", 1)[1] + "/parent.json", "w") as f:
        json.dump(dict(pid=os.getpid()), f)
    hydra.main(config_path="conf", config_name="config", version_base="1.3")(job)()
"""


def launch(tmp_path: Path, seeds: str, *args: str, n_jobs: int = 2, **env: str) -> subprocess.CompletedProcess:
    (tmp_path / "conf").mkdir()
    (tmp_path / "conf" / "config.yaml").write_text(
        "defaults:\n  - override hydra/launcher: fork\n  - _self_\nseed: 0\nout: .\n"
        f"hydra:\n  launcher:\n    n_jobs: {n_jobs}\n  sweep:\n    dir: sweep\n"
    )
    (tmp_path / "app.py").write_text(APP)
    proc = subprocess.run(
        [sys.executable, "app.py", "-m", f"seed={seeds}", *args, "hydra.verbose=true", f"out={tmp_path}"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,  # a deadlocked fork would hang here
        env=dict(os.environ, HYDRA_FULL_ERROR="1", **env),
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc


def test_jobs_run_in_forks_of_the_launching_process_without_deadlock(tmp_path: Path) -> None:
    proc = launch(tmp_path, "1,2,3,4")
    assert "Forking 4 job(s), 2 at a time" in proc.stdout + proc.stderr  # at DEBUG: hydra.verbose
    parent = json.loads((tmp_path / "parent.json").read_text())["pid"]
    jobs = [json.loads((tmp_path / f"job{seed}.json").read_text()) for seed in (1, 2, 3, 4)]
    assert all(j["finite"] and j["inherited"] for j in jobs)
    assert all(j["ppid"] == parent and j["pid"] != parent for j in jobs)  # forks of the launching process
    assert len({j["pid"] for j in jobs}) == 2  # two workers, each running two jobs in turn
    assert {j["threads"] for j in jobs} == {max(1, (os.cpu_count() or 1) // 2)}  # cores shared out, as joblib does


def test_jobs_with_nothing_to_do_take_no_share_of_the_cores(tmp_path: Path) -> None:
    """A task function's `pending` (the train stage's: seeds kept in the repository are not) decides how many jobs
    share the cores: one job left of three runs on all of them, alone. (The launching process runs no torch first:
    a fork using more than one OpenMP thread after its parent's pool ran hangs, so the stage scripts fork before
    any torch work.)"""
    proc = launch(tmp_path, "1,2,3", PENDING_SEEDS="3")
    assert "Forking 3 job(s), 1 at a time (2 with nothing to do)" in proc.stdout + proc.stderr
    jobs = [json.loads((tmp_path / f"job{seed}.json").read_text()) for seed in (1, 2, 3)]
    assert {j["threads"] for j in jobs} == {os.cpu_count() or 1}
    assert len({j["pid"] for j in jobs}) == 1  # one worker, running the three in turn
    assert [j["seed"] for j in jobs] == [1, 2, 3]  # each job's own config, composed by the launching process


def test_two_pending_jobs_of_many_share_the_cores_as_two(tmp_path: Path) -> None:
    """n_jobs 4, two jobs with work of four: two workers, each with half the cores (a quarter without `pending`)."""
    proc = launch(tmp_path, "1,2,3,4", n_jobs=4, PENDING_SEEDS="2,4")
    assert "Forking 4 job(s), 2 at a time (2 with nothing to do)" in proc.stdout + proc.stderr
    jobs = [json.loads((tmp_path / f"job{seed}.json").read_text()) for seed in (1, 2, 3, 4)]
    assert {j["threads"] for j in jobs} == {max(1, (os.cpu_count() or 1) // 2)}
    assert len({j["pid"] for j in jobs}) == 2


def test_jobs_keep_their_configs_and_numbers_across_the_sweepers_batches(tmp_path: Path) -> None:
    """Configs composed by the launching process go to their own jobs, numbered through the sweep, in every batch."""
    launch(tmp_path, "1,2,3,4,5", "hydra.sweeper.max_batch_size=2", PENDING_SEEDS="2,3,5")
    jobs = [json.loads((tmp_path / f"job{seed}.json").read_text()) for seed in (1, 2, 3, 4, 5)]
    assert [(j["seed"], j["num"]) for j in jobs] == [(1, 0), (2, 1), (3, 2), (4, 3), (5, 4)]


# In a fresh interpreter (a pytest worker runs threads of its own, e.g. from earlier tests' libraries): forking is
# allowed with the main thread alone, and refused once another thread runs.
REFUSAL = """
import sys, threading
from hydra_plugins.aiayn_launcher.fork_launcher import can_fork
assert can_fork() is None or sys.platform == "darwin", can_fork()
stop = threading.Event()
worker = threading.Thread(target=stop.wait)
worker.start()
why = can_fork() or ""
stop.set()
worker.join()
assert "thread" in why, why
print("refused:", why)
"""


def test_forking_is_refused_while_another_thread_runs() -> None:
    proc = subprocess.run([sys.executable, "-c", REFUSAL], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "refused: 1 thread(s) already run" in proc.stdout
