"""Eq. 3 (section 5.3): linear warmup to a peak at warmup_steps, then step^-0.5 decay."""

from __future__ import annotations

import pytest

from aiayn.train.schedule import inverse_sqrt_lr


def lr(step: int, factor: float = 1.0) -> float:
    return inverse_sqrt_lr(step, d_model=512, warmup_steps=4000, factor=factor)


def test_peak_at_warmup_has_the_paper_value():
    assert lr(4000) == pytest.approx(7.0e-4, rel=2e-3)  # 512^-0.5 * 4000^-0.5 = 6.988e-4
    assert lr(4000) == max(lr(s) for s in range(1, 20000))
    assert lr(3999) < lr(4000) > lr(4001)


def test_linear_rise_before_warmup():
    assert lr(2000) == pytest.approx(lr(1000) * 2)
    assert all(lr(s) < lr(s + 1) for s in range(1, 4000, 97))


def test_inverse_sqrt_decay_after_warmup():
    assert lr(16000) == pytest.approx(lr(4000) / 2)
    assert lr(64000) == pytest.approx(lr(16000) / 2)
    assert all(lr(s) > lr(s + 1) for s in range(4000, 100000, 997))


def test_step_zero_and_factor():
    assert lr(0) == 0.0
    assert lr(1) > 0.0
    assert lr(4000, factor=2.0) == pytest.approx(2 * lr(4000))


@pytest.mark.parametrize("kwargs", [dict(step=-1), dict(warmup_steps=0), dict(d_model=0)])
def test_bad_arguments_are_errors(kwargs):
    args = dict(step=1, d_model=512, warmup_steps=4000) | kwargs
    with pytest.raises(ValueError):
        inverse_sqrt_lr(**args)


def test_the_budgeted_schedule_warms_up_as_eq3_then_falls_in_a_line_to_zero_at_the_budget():
    from aiayn.train.schedule import learning_rate, linear_decay_lr

    def linear(step: int) -> float:
        return linear_decay_lr(step, d_model=128, warmup_steps=800, total_steps=1600, factor=1.6)

    assert [linear(s) for s in (0, 1, 400, 800)] == [inverse_sqrt_lr(s, 128, 800, 1.6) for s in (0, 1, 400, 800)]
    assert linear(800) == pytest.approx(0.005, rel=2e-3)  # m30k's peak
    assert linear(1200) == pytest.approx(linear(800) * 401 / 801)  # halfway down
    drops = [linear(s) - linear(s + 1) for s in range(800, 1600)]
    assert min(drops) == pytest.approx(max(drops)) and min(drops) > 0  # a straight line
    assert linear(1600) == pytest.approx(linear(800) / 801) and linear(1600) > 0  # the last update still moves
    assert linear(1601) == 0.0
    assert learning_rate("linear", 1000, 128, 800, 1600, 1.6) == linear(1000)
    assert learning_rate("inverse_sqrt", 1000, 128, 800, 1600, 1.6) == inverse_sqrt_lr(1000, 128, 800, 1.6)
    with pytest.raises(ValueError, match="more steps than its warmup"):
        linear_decay_lr(1, d_model=128, warmup_steps=800, total_steps=800)
    with pytest.raises(ValueError, match="train.lr_schedule='cosine'"):
        learning_rate("cosine", 1, 128, 800, 1600)


def test_the_optimizer_steps_at_the_configured_schedule_and_a_budget_shorter_than_warmup_is_refused():
    import dataclasses

    import torch

    from aiayn.config.schema import TrainConfig
    from aiayn.train.schedule import linear_decay_lr
    from aiayn.train.step import optimizer_and_schedule

    train = TrainConfig(max_steps=20, warmup_steps=5, lr_schedule="linear", fused_adam=False)
    weight = torch.nn.Parameter(torch.zeros(3))
    optimizer, schedule = optimizer_and_schedule([weight], train, 128, torch.device("cpu"))
    rates = []
    for _ in range(20):
        rates.append(optimizer.param_groups[0]["lr"])
        weight.grad = torch.ones(3)
        optimizer.step()
        schedule.step()
    assert rates == [pytest.approx(linear_decay_lr(k, 128, 5, 20)) for k in range(1, 21)]
    with pytest.raises(ValueError, match=r"train.lr_schedule=linear decays to zero at train.max_steps=5"):
        dataclasses.replace(train, max_steps=5)
