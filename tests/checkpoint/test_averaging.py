"""Checkpoint averaging and picking the last K checkpoints by step."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from aiayn.checkpoint.averaging import average_checkpoints, checkpoint_step, select_last
from aiayn.model.config import ModelConfig
from aiayn.model.transformer import Transformer


def _save(path: Path, weights: dict[str, torch.Tensor], step: int = 0, **extra) -> Path:
    state = {f"model.{k}": v for k, v in weights.items()} | extra
    torch.save({"state_dict": state, "global_step": step, "optimizer_states": []}, path)
    return path


def _weights(seed: int) -> dict[str, torch.Tensor]:
    gen = torch.Generator().manual_seed(seed)
    return {
        "w": torch.randn(3, 4, generator=gen),
        "half": torch.randn(5, generator=gen).half(),
        "count": torch.tensor([seed]),
    }


def test_averaging_copies_of_one_checkpoint_gives_it_back(tmp_path):
    weights = _weights(1)
    path = _save(tmp_path / "a.ckpt", weights)
    averaged = average_checkpoints([path] * 3)
    assert averaged.keys() == weights.keys()
    for key, value in weights.items():
        assert averaged[key].dtype == value.dtype
        assert torch.equal(averaged[key], value)


def test_averaging_two_gives_their_mean_and_the_last_integer_buffer(tmp_path):
    first, second = _weights(1), _weights(2)
    averaged = average_checkpoints([_save(tmp_path / "a.ckpt", first), _save(tmp_path / "b.ckpt", second)])
    assert torch.allclose(averaged["w"], (first["w"] + second["w"]) / 2, atol=1e-7)
    expected_half = ((first["half"].double() + second["half"].double()) / 2).half()
    assert torch.equal(averaged["half"], expected_half)
    assert torch.equal(averaged["count"], second["count"])


def test_entries_outside_the_prefix_are_left_out(tmp_path):
    path = _save(tmp_path / "a.ckpt", _weights(1), **{"loss_fn.weight": torch.ones(2)})
    assert "loss_fn.weight" not in average_checkpoints([path]) and "weight" not in average_checkpoints([path])


def test_averaged_real_model_weights_load_into_the_model(tmp_path):
    shape = ModelConfig(n_layers=1, d_model=8, d_ff=16, n_heads=2, d_k=4, d_v=4, dropout=0.0)
    models = [Transformer(shape, vocab_size=10) for _ in range(2)]
    paths = [_save(tmp_path / f"{i}.ckpt", m.state_dict()) for i, m in enumerate(models)]
    target = Transformer(shape, vocab_size=10)
    target.load_state_dict(average_checkpoints(paths))  # strict: every key present, none extra
    name, param = next(iter(models[0].named_parameters()))
    expected = (param + dict(models[1].named_parameters())[name]) / 2
    assert torch.allclose(dict(target.named_parameters())[name], expected, atol=1e-6)


def test_mismatched_checkpoints_are_named_in_the_error(tmp_path):
    good = _save(tmp_path / "good.ckpt", _weights(1))
    missing = _save(tmp_path / "missing.ckpt", {"w": torch.zeros(3, 4), "half": torch.zeros(5).half()})
    reshaped = _save(tmp_path / "reshaped.ckpt", {**_weights(1), "w": torch.zeros(4, 3)})
    with pytest.raises(KeyError, match="missing.ckpt.*count"):
        average_checkpoints([good, missing])
    with pytest.raises(ValueError, match="reshaped.ckpt.*'w'"):
        average_checkpoints([good, reshaped])
    torch.save({"weights": {}}, tmp_path / "plain.ckpt")
    with pytest.raises(KeyError, match="plain.ckpt.*state_dict"):
        average_checkpoints([tmp_path / "plain.ckpt"])


def test_select_last_orders_by_step_and_skips_a_duplicate_last_ckpt(tmp_path):
    for step in (100, 300, 200):
        _save(tmp_path / f"step-{step:08d}.ckpt", _weights(step), step=step)
    _save(tmp_path / "last.ckpt", _weights(300), step=300)
    assert checkpoint_step(tmp_path / "step-00000200.ckpt") == 200
    assert checkpoint_step(tmp_path / "last.ckpt") == 300
    assert [p.name for p in select_last(tmp_path, 2)] == ["step-00000200.ckpt", "step-00000300.ckpt"]
    assert [p.name for p in select_last(tmp_path, 0)] == ["step-00000300.ckpt"]
    assert [p.name for p in select_last(tmp_path, 1)] == ["step-00000300.ckpt"]
    assert len(select_last(tmp_path, 10)) == 3


def test_select_last_keeps_a_last_ckpt_newer_than_every_named_one(tmp_path):
    _save(tmp_path / "epoch=0-step=400.ckpt", _weights(1), step=400)
    _save(tmp_path / "last.ckpt", _weights(2), step=450)
    assert [p.name for p in select_last(tmp_path, 5)] == ["epoch=0-step=400.ckpt", "last.ckpt"]
    with pytest.raises(FileNotFoundError, match="no \\*.ckpt"):
        select_last(tmp_path / "empty", 1)


def test_a_run_with_fewer_checkpoints_than_asked_for_says_so(tmp_path, caplog):
    for step in (100, 200, 300):
        _save(tmp_path / f"step-{step:08d}.ckpt", _weights(step), step=step)
    with caplog.at_level("WARNING", logger="aiayn.checkpoint.averaging"):
        assert len(select_last(tmp_path, 3)) == 3
    assert not caplog.records
    with caplog.at_level("WARNING", logger="aiayn.checkpoint.averaging"):
        assert len(select_last(tmp_path, 10)) == 3
    (record,) = caplog.records
    assert str(tmp_path) in record.getMessage() and "10 checkpoints asked for, 3 there" in record.getMessage()
