"""Statistics over seeds: Student-t confidence intervals and paired t-tests (scipy)."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

import numpy as np
from scipy import special


@dataclass(frozen=True)
class CI:
    """A mean with its confidence interval over `n` values; low/high are None when n < 2 (no interval exists)."""

    mean: float | None
    low: float | None
    high: float | None
    n: int

    @property
    def half_width(self) -> float | None:
        """Half the interval's width (t intervals are symmetric), or None without an interval."""
        return None if self.low is None or self.high is None else (self.high - self.low) / 2


@dataclass(frozen=True)
class PairedResult:
    """Mean of (a - b) over paired seeds, its confidence interval and the two-sided paired t-test p-value; the
    differences themselves (in seed order) and their standard deviation (None below two pairs)."""

    mean_diff: float | None
    low: float | None
    high: float | None
    p_value: float | None
    n: int
    sd: float | None = None
    diffs: tuple[float, ...] = ()


def exp_or_none(x: float | None) -> float | None:
    """exp(x), or None for an undefined x: a mean or bound on the log scale (log PPL) back on its own."""
    return None if x is None else math.exp(x)


def mean_ci(values: Iterable[float], level: float = 0.95) -> CI:
    """Mean and Student-t confidence interval over seeds (df = n - 1); n < 2 gives no interval, never a fake one.

    The t interval's formula with numpy and scipy.special's t quantile (the tests check it against scipy.stats'
    interval), which is a hundred times faster: Table 3 is built thousands of times in the tests' simulations.
    """
    if not 0.0 < level < 1.0:
        raise ValueError(f"level must be in (0, 1), got {level}")
    x = np.asarray([float(v) for v in values], dtype=float)
    n = int(x.size)
    if n == 0:
        return CI(None, None, None, 0)
    mean = float(x.mean())
    if n < 2:
        return CI(mean, None, None, n)
    sem = float(x.std(ddof=1)) / math.sqrt(n)
    if sem == 0.0:
        # Identical values: the interval is exactly the point.
        return CI(mean, mean, mean, n)
    half = float(special.stdtrit(n - 1, 0.5 + level / 2)) * sem
    return CI(mean, mean - half, mean + half, n)


def paired_test(a: Mapping[int, float], b: Mapping[int, float], level: float = 0.95) -> PairedResult:
    """Paired t-test of a against b over the seeds both have (the formulas of scipy.stats.ttest_rel, which the
    tests check it against).

    n = 0 gives all None; n = 1, or differences that are all equal, give the mean difference but no interval or
    p-value: there is no spread to test against.
    """
    seeds = sorted(set(a) & set(b))
    n = len(seeds)
    if n == 0:
        return PairedResult(None, None, None, None, 0)
    diff = np.asarray([float(a[s]) - float(b[s]) for s in seeds])
    mean_diff, diffs = float(diff.mean()), tuple(float(d) for d in diff)
    if n < 2:
        return PairedResult(mean_diff, None, None, None, n, diffs=diffs)
    if np.ptp(diff) == 0.0:
        # Zero spread: nothing to test a difference against (t is 0/0 or infinite). Identical differences over a
        # few seeds say more about the runs (a shared cache, one deterministic path) than about the noise.
        return PairedResult(mean_diff, None, None, None, n, 0.0, diffs)
    sd = float(diff.std(ddof=1))
    ci = mean_ci(diff, level)
    p = 2 * float(special.stdtr(n - 1, -abs(mean_diff) / (sd / math.sqrt(n))))
    return PairedResult(mean_diff, ci.low, ci.high, p, n, sd, diffs)


def score_columns(bleu: CI, log_ppl: CI) -> dict[str, float | None]:
    """The score columns Table 3 and the sweep share: dev BLEU's mean and 95% interval, and PPL's geometric mean and
    interval back from log PPL."""
    return dict(
        bleu_mean=bleu.mean,
        bleu_ci95_low=bleu.low,
        bleu_ci95_high=bleu.high,
        ppl_gmean=exp_or_none(log_ppl.mean),
        ppl_ci95_low=exp_or_none(log_ppl.low),
        ppl_ci95_high=exp_or_none(log_ppl.high),
    )
