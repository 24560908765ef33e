"""Learning-rate schedule of Eq. 3, section 5.3: linear warmup, then inverse square root decay."""

from __future__ import annotations


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
