"""Learning-rate schedules, per update: Eq. 3 of section 5.3 (linear warmup, then inverse square root decay), and a
budgeted one (the same warmup to the same peak, then linear decay to zero at the run's last update: Li et al. 2020,
"Budgeted Training"; a departure, docs/departures.md#budgeted-schedule)."""

from __future__ import annotations

from aiayn.config.schema import LR_SCHEDULES


def inverse_sqrt_lr(step: int, d_model: int, warmup_steps: int, factor: float = 1.0) -> float:
    """lrate = factor * d_model^-0.5 * min(step^-0.5, step * warmup_steps^-1.5) (Eq. 3), step from 1.

    Step 0 (before any update) returns 0.0, the limit of Eq. 3 as step -> 0, so it never divides by zero.
    """
    if step < 0:
        raise ValueError(f"learning-rate step must be >= 0, got {step}")
    if d_model <= 0 or warmup_steps <= 0:
        raise ValueError(
            f"d_model and warmup_steps must be positive, got d_model={d_model}, warmup_steps={warmup_steps}"
        )
    if step == 0:
        return 0.0
    return factor * d_model**-0.5 * min(step**-0.5, step * warmup_steps**-1.5)


def linear_decay_lr(step: int, d_model: int, warmup_steps: int, total_steps: int, factor: float = 1.0) -> float:
    """Eq. 3's warmup to Eq. 3's peak (factor * d_model^-0.5 * warmup_steps^-0.5 at step warmup_steps), then a
    straight line towards 0: the budget's last update (step total_steps) is taken at its smallest rate, peak /
    (total_steps + 1 - warmup_steps). Step 0 returns 0.0, and so does every step past the budget."""
    if total_steps <= warmup_steps:
        raise ValueError(
            f"a linear decay needs more steps than its warmup, got total_steps={total_steps} <= "
            f"warmup_steps={warmup_steps} (train.max_steps, train.warmup_steps)"
        )
    if step <= warmup_steps:
        return inverse_sqrt_lr(step, d_model, warmup_steps, factor)
    peak = inverse_sqrt_lr(warmup_steps, d_model, warmup_steps, factor)
    return peak * max(0.0, (total_steps + 1 - step) / (total_steps + 1 - warmup_steps))


def learning_rate(
    schedule: str, step: int, d_model: int, warmup_steps: int, total_steps: int, factor: float = 1.0
) -> float:
    """The rate of update `step` (from 1) under train.lr_schedule `schedule`."""
    if schedule == "inverse_sqrt":
        return inverse_sqrt_lr(step, d_model, warmup_steps, factor)
    if schedule == "linear":
        return linear_decay_lr(step, d_model, warmup_steps, total_steps, factor)
    raise ValueError(f"train.lr_schedule={schedule!r}: expected one of {', '.join(LR_SCHEDULES)}")
