"""wandb runs: only rank zero of a distributed job opens one."""

from __future__ import annotations

import pytest

from aiayn.config.composition import compose
from aiayn.config.resolve import prepare
from aiayn.run import tracking


@pytest.mark.parametrize("var", ["RANK", "LOCAL_RANK", "NODE_RANK", "SLURM_PROCID"])
def test_other_ranks_open_no_wandb_run(monkeypatch, tmp_path, var: str) -> None:
    monkeypatch.setenv(var, "1")
    assert not tracking.is_rank_zero()
    assert tracking.start_run(prepare(compose([f"logger.dir={tmp_path}"])), job_type="train") is None
    assert not (tmp_path / "wandb").exists()


def test_rank_zero_is_the_launching_process(monkeypatch) -> None:
    for var in ("RANK", "LOCAL_RANK", "NODE_RANK", "SLURM_PROCID"):
        monkeypatch.delenv(var, raising=False)
    assert tracking.is_rank_zero()
    monkeypatch.setenv("SLURM_PROCID", "0")
    assert tracking.is_rank_zero()
