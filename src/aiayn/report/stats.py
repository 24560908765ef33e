"""Statistics over seeds: Student-t confidence intervals and paired t-tests (scipy)."""
from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

import numpy as np
from scipy import stats


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


def _finite(x: float) -> float | None:
    """Plain float, or None for NaN (scipy's answer when a statistic is undefined)."""
    x = float(x)
    return None if math.isnan(x) else x


def mean_ci(values: Iterable[float], level: float = 0.95) -> CI:
    """Mean and Student-t confidence interval over seeds (df = n - 1); n < 2 gives no interval, never a fake one."""
    if not 0.0 < level < 1.0:
        raise ValueError(f"level must be in (0, 1), got {level}")
    x = np.asarray([float(v) for v in values], dtype=float)
    n = int(x.size)
    if n == 0:
        return CI(None, None, None, 0)
    mean = float(x.mean())
    if n < 2:
        return CI(mean, None, None, n)
    sem = float(stats.sem(x))
    if sem == 0.0:
        # Identical values: scipy's interval is NaN for a zero scale, but the interval is exactly the point.
        return CI(mean, mean, mean, n)
    low, high = stats.t.interval(level, df=n - 1, loc=mean, scale=sem)
    return CI(mean, float(low), float(high), n)


def paired_test(a: Mapping[int, float], b: Mapping[int, float], level: float = 0.95) -> PairedResult:
    """Paired t-test of a against b over the seeds both have (scipy.stats.ttest_rel).

    n = 0 gives all None; n = 1 gives the one difference but no interval or p-value.
    """
    seeds = sorted(set(a) & set(b))
    n = len(seeds)
    if n == 0:
        return PairedResult(None, None, None, None, 0)
    xa = np.asarray([float(a[s]) for s in seeds])
    xb = np.asarray([float(b[s]) for s in seeds])
    diff = xa - xb
    mean_diff, diffs = float(diff.mean()), tuple(float(d) for d in diff)
    if n < 2:
        return PairedResult(mean_diff, None, None, None, n, diffs=diffs)
    diff_ci, sd = mean_ci(diff, level), float(diff.std(ddof=1))
    if np.ptp(diff) == 0.0:
        # Zero spread: t is 0/0 (no difference: undefined, None) or infinite (a constant shift: p = 0);
        # answered here because scipy warns about the lost precision before giving the same answers.
        return PairedResult(mean_diff, diff_ci.low, diff_ci.high, None if mean_diff == 0.0 else 0.0, n, 0.0, diffs)
    result = stats.ttest_rel(xa, xb)
    return PairedResult(mean_diff, diff_ci.low, diff_ci.high, _finite(result.pvalue), n, sd, diffs)
