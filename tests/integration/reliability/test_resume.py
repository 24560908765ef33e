"""Killed or stopped runs resume from their last checkpoint to the same final metrics as an uninterrupted run."""

from __future__ import annotations

import csv
import json
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from aiayn.config.composition import compose
from aiayn.config.resolve import prepare
from aiayn.inference.trained import load_model
from aiayn.train.checkpointing import AtomicCheckpointIO, lock_run_dir, resume_checkpoint


def curve(run_dir: Path) -> list[dict]:
    """curve.csv without its throughput column (wall-clock, so it differs run to run)."""
    with open(run_dir / "curve.csv", encoding="utf-8") as f:
        return [{k: v for k, v in row.items() if k != "train_tokens_per_s"} for row in csv.DictReader(f)]


def step_files(run_dir: Path) -> dict[str, int]:
    return {p.name: p.stat().st_mtime_ns for p in (run_dir / "checkpoints").glob("step-*.ckpt")}


def test_a_stopped_run_resumes_to_the_same_metrics_and_curve(stage, overrides, reference, exact, tmp_path):
    """Stop at step 6, rerun to 12 in the same folder: identical results. (A resume may differ in max_steps, which
    a longer run continues; on the command line train.max_steps=6 would name a variant folder, so it is composed
    without the variant, as an edited conf file would keep the folder.)"""
    run_dir = tmp_path / "runs" / "base" / "seed1"
    shorter = compose(overrides(tmp_path, "train.max_steps=6"))
    shorter.variant = {}
    stage("train").run(prepare(shorter))
    before = step_files(run_dir)
    assert sorted(before) == [f"step-{s:08d}.ckpt" for s in (2, 4, 6)]
    stage("train").run(prepare(compose(overrides(tmp_path))))
    after = step_files(run_dir)
    # The last keep_last (5) snapshots are kept: step 2's is gone; 4 and 6 are the short run's, not written again.
    assert sorted(after) == [f"step-{s:08d}.ckpt" for s in (4, 6, 8, 10, 12)]
    assert {k: after[k] for k in before if k in after} == {k: before[k] for k in before if k in after}
    assert exact(run_dir) == exact(reference)
    assert curve(run_dir) == curve(reference)
    assert not list(run_dir.parent.glob("stale-checkpoints-*"))
    # train.json lists both processes' stretches, on this machine's one float path
    summary = json.loads((run_dir / "train.json").read_text())
    assert [s["from_step"] for s in summary["segments"]] == [0, 6]
    assert {s["float_path"] for s in summary["segments"]} == {summary["float_path"]}
    assert summary["mixed_float_paths"] is False


def test_a_sigkilled_run_resumes_to_the_same_metrics(cli, overrides, reference, exact, tmp_path):
    """SIGKILL a real `python pipeline/train.py` once a second checkpoint exists; the same command finishes it."""
    args = [*overrides(tmp_path), f"hydra.run.dir={tmp_path}/outputs"]
    run_dir = tmp_path / "runs" / "base" / "seed1"
    victim = cli("train", args, tmp_path)
    deadline = time.monotonic() + 300
    while not (run_dir / "checkpoints" / "step-00000004.ckpt").exists():
        assert victim.poll() is None, victim.communicate()[0][-3000:]
        assert time.monotonic() < deadline, "no second checkpoint within 300 s"
        time.sleep(0.02)
    victim.send_signal(signal.SIGKILL)
    victim.wait()
    assert not (run_dir / "train.json").exists()  # killed mid-way, not after the end
    killed_at = torch.load(run_dir / "checkpoints" / "last.ckpt", weights_only=True)["global_step"]
    assert 2 <= killed_at < 12
    again = cli("train", args, tmp_path)
    output = again.communicate(timeout=300)[0]
    assert again.returncode == 0, output[-3000:]
    assert f"{run_dir}: resuming from " in output or "/seed1: resuming from " in output
    assert "not resumable" not in output  # Lightning's false alarm: the datamodule resumes mid-epoch
    assert exact(run_dir) == exact(reference)
    assert not list((run_dir / "checkpoints").glob(".*.tmp"))


def test_a_killed_run_continues_its_wandb_run(cli, overrides, tmp_path):
    """SIGKILL a run that logs to wandb (offline) and rerun it: the second process continues the same run id, its
    history keyed by trainer/global_step from where the checkpoint left off. 200 steps, so that the killed process's
    wandb service has flushed part of its log to disk (it writes in blocks; an unflushed tail is lost to SIGKILL)."""
    args = [
        *overrides(tmp_path),
        f"hydra.run.dir={tmp_path}/outputs",
        "logger=wandb",
        f"logger.dir={tmp_path}",
        "train.log_every_steps=1",
        "train.max_steps=200",
        "train.val_every_steps=10",
    ]
    run_dir = tmp_path / "runs" / "base" / "max_steps=200" / "seed1"  # a variant of base: its own folder
    victim = cli("train", args, tmp_path)
    deadline = time.monotonic() + 300
    while not _validated_beyond(run_dir / "curve.csv", 140):
        assert victim.poll() is None, victim.communicate()[0][-3000:]
        assert time.monotonic() < deadline, "not at step 140 within 300 s"
        time.sleep(0.05)
    victim.send_signal(signal.SIGKILL)
    victim.wait()
    killed_at = torch.load(run_dir / "checkpoints" / "last.ckpt", weights_only=True)["global_step"]
    again = cli("train", args, tmp_path)
    output = again.communicate(timeout=300)[0]
    assert again.returncode == 0, output[-3000:]
    segments = [wandb_steps(folder) for folder in sorted((tmp_path / "wandb").glob("offline-run-*"))]
    assert len(segments) == 2 and segments[0][0] == segments[1][0] is not None, segments  # one run id
    before, after = segments[0][1], segments[1][1]
    assert before and max(before) <= 200 and min(before) < killed_at  # steps logged before the kill
    # and after it, from the checkpoint on (Lightning logs a step as global_step - 1, hence the slack) to the end
    assert min(after) >= killed_at - 2 and max(after) >= 199


def _validated_beyond(curve: Path, step: int) -> bool:
    if not curve.is_file():
        return False
    with open(curve, encoding="utf-8") as f:
        return any(int(row["step"]) >= step for row in csv.DictReader(f))


def wandb_steps(folder: Path) -> tuple[str | None, list[int]]:
    """An offline wandb run's id and the trainer/global_step values of its history, read with `wandb leet`."""
    text = subprocess.run(
        [sys.executable, "-m", "wandb", "leet", "inspect", "--json", str(folder)],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    run_id, steps = None, []
    for line in text.splitlines():
        record = json.loads(line)
        if record.get("type") == "run":
            run_id = record["run"]["run_id"]
        elif record.get("type") == "history":
            step = record["history"].get("item", {}).get("trainer/global_step")
            if step is not None:
                steps.append(int(step))
    return run_id, steps


class Unpicklable:
    """Stands for a crash half-way through writing a checkpoint."""

    def __reduce__(self):
        raise RuntimeError("simulated crash mid-write")


def test_a_checkpoint_write_that_fails_leaves_the_previous_file_whole(tmp_path):
    path = tmp_path / "checkpoints" / "last.ckpt"
    io = AtomicCheckpointIO()
    io.save_checkpoint({"global_step": 2, "w": torch.ones(1000)}, path)
    good = path.read_bytes()
    with pytest.raises(RuntimeError, match="simulated crash"):
        io.save_checkpoint({"global_step": 4, "w": torch.zeros(1000), "x": Unpicklable()}, path)
    assert path.read_bytes() == good and [p.name for p in path.parent.iterdir()] == ["last.ckpt"]
    assert io.load_checkpoint(path)["global_step"] == 2


def test_temporary_files_left_by_a_kill_are_removed_before_a_run_starts(tmp_path):
    (tmp_path / "checkpoints").mkdir()
    left = [tmp_path / "checkpoints" / ".last.ckpt.x1.tmp", tmp_path / ".train.json.x2.tmp"]
    for p in left:
        p.write_bytes(b"half")
    (tmp_path / "checkpoints" / "step-00000002.ckpt").write_bytes(b"kept")
    lock = lock_run_dir(tmp_path)
    try:
        assert not any(p.exists() for p in left)
        assert (tmp_path / "checkpoints" / "step-00000002.ckpt").read_bytes() == b"kept"
    finally:
        lock.close()


def test_an_unreadable_last_checkpoint_is_refused_naming_it(reference, tmp_path):
    ckpt_dir = tmp_path / "checkpoints"
    shutil.copytree(reference / "checkpoints", ckpt_dir)
    last = ckpt_dir / "last.ckpt"
    last.write_bytes(last.read_bytes()[: last.stat().st_size // 2])
    listing = sorted(p.name for p in ckpt_dir.iterdir())
    with pytest.raises(ValueError, match=f"{last}: unreadable checkpoint.*train.resume=false"):
        resume_checkpoint(ckpt_dir, {}, resume=True)
    assert sorted(p.name for p in ckpt_dir.iterdir()) == listing  # nothing moved or deleted


@pytest.mark.parametrize("name", ["last.ckpt", "step-00000012.ckpt"])
def test_evaluate_refuses_a_truncated_checkpoint_naming_it(reference, tmp_path, name):
    ckpt_dir = tmp_path / "checkpoints"
    shutil.copytree(reference / "checkpoints", ckpt_dir)
    broken = ckpt_dir / name
    broken.write_bytes(broken.read_bytes()[:4096])
    with pytest.raises(ValueError, match=f"{broken}: unreadable checkpoint"):
        load_model(ckpt_dir, 5, torch.device("cpu"))


def test_a_newer_slurm_checkpoint_is_preferred_to_last(tmp_path) -> None:
    """Lightning's SIGUSR1 requeue writes run_dir/hpc_ckpt_N.ckpt; resume takes it when it is newer than last.ckpt."""
    import torch

    ckpt_dir = tmp_path / "checkpoints"
    ckpt_dir.mkdir()
    ident = {"row": "base", "seed": 1}
    torch.save({"global_step": 10, "aiayn_fingerprint": ident}, ckpt_dir / "last.ckpt")
    torch.save({"global_step": 17, "aiayn_fingerprint": ident}, tmp_path / "hpc_ckpt_1.ckpt")
    assert resume_checkpoint(ckpt_dir, ident, resume=True) == tmp_path / "hpc_ckpt_1.ckpt"
    torch.save({"global_step": 5, "aiayn_fingerprint": ident}, tmp_path / "hpc_ckpt_1.ckpt")
    assert resume_checkpoint(ckpt_dir, ident, resume=True) == ckpt_dir / "last.ckpt"
    assert resume_checkpoint(ckpt_dir, {"row": "A1", "seed": 1}, resume=True) is None  # another config: aside
    (aside,) = tmp_path.glob("stale-checkpoints-*")
    assert sorted(p.name for p in aside.iterdir()) == ["hpc_ckpt_1.ckpt", "last.ckpt"]


def test_a_time_cadence_writes_the_final_step_so_a_rerun_finds_the_run_finished(stage, overrides, tmp_path):
    """The paper's 10-minute cadence: a short run never reaches the interval, yet its final weights are written
    (last.ckpt and, for base, which averages, a snapshot), so evaluation reads them and a rerun skips."""
    from aiayn.run.folders import RunSpec

    cfg = compose(overrides(tmp_path, "train.ckpt_every_steps=0", "train.ckpt_every_minutes=600"))
    spec = RunSpec.of(cfg)
    stage("train").run(prepare(cfg))
    assert torch.load(spec.checkpoints / "last.ckpt", weights_only=True)["global_step"] == 12
    assert sorted(p.name for p in spec.checkpoints.glob("step-*.ckpt")) == ["step-00000012.ckpt"]
    stamp = (spec.checkpoints / "last.ckpt").stat().st_mtime_ns
    stage("train").run(
        prepare(compose(overrides(tmp_path, "train.ckpt_every_steps=0", "train.ckpt_every_minutes=600")))
    )
    assert (spec.checkpoints / "last.ckpt").stat().st_mtime_ns == stamp  # skipped: already trained
