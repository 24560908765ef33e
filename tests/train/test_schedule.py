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
