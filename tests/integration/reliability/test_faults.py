"""Faults during a run: a non-finite loss, a checkpoint of another config, a second run of the same folder."""

from __future__ import annotations

import logging
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from aiayn.config.composition import compose
from aiayn.config.resolve import prepare
from aiayn.inference.trained import load_model
from aiayn.train.checkpointing import lock_run_dir
from aiayn.train.module import TranslationModule


def checkpoint_files(ckpt_dir: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(ckpt_dir.glob("*.ckpt"))}


def test_a_nan_loss_stops_the_run_naming_the_step_and_keeps_the_last_good_checkpoint(
    stage, overrides, tmp_path, monkeypatch
):
    losses = TranslationModule._losses

    def nan_at_step_5(self, batch, epsilon):
        loss_sum, nll_sum = losses(self, batch, epsilon)
        return (loss_sum * float("nan"), nll_sum) if self.training and self.global_step == 5 else (loss_sum, nll_sum)

    monkeypatch.setattr(TranslationModule, "_losses", nan_at_step_5)
    with pytest.raises(FloatingPointError, match="non-finite training loss or gradient at step 5"):
        stage("train").run(prepare(compose(overrides(tmp_path))))
    run_dir = tmp_path / "runs" / "base" / "seed1"
    # Averaging snapshots start at step 4: the last 5 of 12 steps at a cadence of 2.
    assert sorted(checkpoint_files(run_dir / "checkpoints")) == ["last.ckpt", "step-00000004.ckpt"]
    last = torch.load(run_dir / "checkpoints" / "last.ckpt", weights_only=True)
    assert last["global_step"] == 4 and all(torch.isfinite(v).all() for v in last["state_dict"].values())
    model, _ = load_model(run_dir / "checkpoints", 0, torch.device("cpu"))  # loadable by the evaluate stage
    assert all(torch.isfinite(p).all() for p in model.parameters())
    assert not (run_dir / "train.json").exists()


def test_a_diverging_run_writes_no_checkpoint_of_non_finite_weights(stage, overrides, tmp_path):
    """An absurd learning rate: the gradient turns infinite before the loss does; no checkpoint may hold NaNs."""
    with pytest.raises(FloatingPointError, match=r"at step \d+; stopping"):
        stage("train").run(prepare(compose(overrides(tmp_path, "train.lr_factor=1e6"))))
    for path in (tmp_path / "runs" / "base" / "seed1" / "checkpoints").glob("*.ckpt"):
        state = torch.load(path, weights_only=True)["state_dict"]
        assert all(torch.isfinite(v).all() for v in state.values()), path


def test_a_checkpoint_of_another_config_is_moved_aside_not_loaded(stage, overrides, reference, exact, tmp_path, caplog):
    run_dir = tmp_path / "runs" / "base" / "seed1"
    run_dir.parent.mkdir(parents=True)
    original = checkpoint_files(reference / "checkpoints")
    (run_dir / "checkpoints").mkdir(parents=True)
    for name, data in original.items():
        (run_dir / "checkpoints" / name).write_bytes(data)
    # An override would name a variant folder of its own (runs/base/d_ff=48,.../seed1); the same folder with another
    # config is what an edited conf file gives, forced here by composing without the variant.
    cfg = compose(overrides(tmp_path, "model.d_ff=48", "train.label_smoothing=0.2"))
    cfg.variant = {}
    with caplog.at_level(logging.WARNING, logger="aiayn.train.checkpointing"):
        summary = stage("train").run(prepare(cfg))
    assert "model.d_ff: checkpoint 64 != now 48" in caplog.text
    assert "train.label_smoothing: checkpoint 0.1 != now 0.2" in caplog.text
    (aside,) = run_dir.glob("stale-checkpoints-*")
    assert checkpoint_files(aside) == original  # nothing deleted, nothing rewritten
    new = torch.load(run_dir / "checkpoints" / "last.ckpt", weights_only=True)
    assert new["hyper_parameters"]["model"]["d_ff"] == 48 and summary["steps"] == 12  # trained from scratch


def test_a_second_run_of_the_same_folder_is_refused_naming_folder_and_pid(stage, overrides, tmp_path):
    run_dir = tmp_path / "runs" / "base" / "seed1"
    run_dir.mkdir(parents=True)
    holder = subprocess.Popen(  # another process holding the folder, as a concurrent run would
        [
            sys.executable,
            "-c",
            "import fcntl, os, sys, time; f = open(sys.argv[1], 'a+'); "
            "fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB); f.write(f'{os.getpid()}\\n'); f.flush(); "
            "print('locked', flush=True); time.sleep(60)",
            str(run_dir / ".lock"),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout.readline().strip() == "locked"
        with pytest.raises(RuntimeError, match=rf"{run_dir} is in use by another run \(pid {holder.pid}"):
            stage("train").run(prepare(compose(overrides(tmp_path))))
        assert sorted(p.name for p in run_dir.iterdir()) == [".lock"]  # the refused run wrote nothing
    finally:
        holder.kill()
        holder.wait()
    lock = lock_run_dir(run_dir)  # released when its holder dies, even by SIGKILL
    assert lock is not None
    lock.close()


def test_ddp_ranks_started_by_the_launcher_do_not_lock(tmp_path, monkeypatch):
    lock = lock_run_dir(tmp_path)
    try:
        monkeypatch.setenv("LOCAL_RANK", "1")
        assert lock_run_dir(tmp_path) is None
    finally:
        lock.close()


def test_a_code_change_retrains_instead_of_resuming(tmp_path) -> None:
    """dvc repro reruns train when its code changes; the kept checkpoints of the old code must not be resumed."""
    import torch

    from aiayn.train.checkpointing import resume_checkpoint
    from aiayn.train.fingerprint import TRAIN_ENTRY, code_digest

    assert code_digest(TRAIN_ENTRY) == code_digest(TRAIN_ENTRY)  # stable for unchanged code
    ckpt_dir = tmp_path / "checkpoints"
    ckpt_dir.mkdir()
    now = {"code_sha256": code_digest(TRAIN_ENTRY), "row": "base", "seed": 1}
    torch.save({"global_step": 600, "aiayn_fingerprint": {**now, "code_sha256": "0" * 64}}, ckpt_dir / "last.ckpt")
    assert resume_checkpoint(ckpt_dir, now, resume=True) is None
    (aside,) = tmp_path.glob("stale-checkpoints-*")
    assert (aside / "last.ckpt").exists()
