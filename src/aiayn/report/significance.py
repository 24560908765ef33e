"""Significance with the training run as the unit: an exact sign-flip test over seeds, Holm's correction over the
rows of a table, the seeds a paired t-test needs to resolve a difference, and each row's verdict."""
from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
from scipy import stats

ALPHA = 0.05  # family-wise error rate of a table's verdicts
POWER = 0.8  # the power `seeds_needed` asks for
EXACT_SIGN_FLIPS = 16  # up to 2^16 sign patterns are enumerated; more seeds draw MONTE_CARLO_FLIPS of them
MONTE_CARLO_FLIPS = 100_000
NO_DIFFERENCE = "—"  # the verdict where the paper shows no difference to reproduce
VERDICTS = ("reproduced", "contradicted", "unresolved", NO_DIFFERENCE)


def sign_flip_p(diffs: Sequence[float]) -> float | None:
    """Two-sided exact permutation p of paired differences (row minus base, one per seed).

    With no effect each seed's difference is as likely negative as positive, so p is the share of the 2^n sign
    patterns whose |mean| reaches the observed one: no normality assumed, and n seeds can give no p below 2/2^n
    (0.25 with 3 seeds). None without differences.
    """
    d = np.asarray([float(x) for x in diffs], dtype=float)
    n = d.size
    if n == 0:
        return None
    if n <= EXACT_SIGN_FLIPS:
        signs = 1 - 2 * ((np.arange(2**n)[:, None] >> np.arange(n)) & 1)  # (2^n, n), every pattern once
    else:
        signs = np.random.default_rng(0).choice((-1, 1), size=(MONTE_CARLO_FLIPS, n))
    observed = abs(d.sum())
    # A relative tolerance, so float noise in sums that are equal in exact arithmetic counts as reaching.
    reached = int((np.abs(signs @ d) >= observed - 1e-9 * np.abs(d).sum()).sum())
    if n <= EXACT_SIGN_FLIPS:
        return reached / len(signs)
    return (reached + 1) / (len(signs) + 1)  # the observed pattern counted once more: never 0 from sampling


def holm(p_values: Sequence[float | None]) -> list[float | None]:
    """Holm's step-down adjusted p over the given tests: the i-th smallest of m is multiplied by m - i + 1, then
    made non-decreasing and capped at 1. None stays None and is not counted as a test.

    Written here rather than taken from statsmodels' multipletests, which the tests check it against: that calls
    gc.collect() on every call (15-30 ms), too slow for the tests' thousands of simulated tables.
    """
    tested = [i for i, p in enumerate(p_values) if p is not None]
    p = np.asarray([p_values[i] for i in tested], dtype=float)
    order = np.argsort(p, kind="stable")
    stepped = np.minimum(1.0, np.maximum.accumulate((len(p) - np.arange(len(p))) * p[order]))
    out: list[float | None] = [None] * len(p_values)
    for i, adjusted in zip(np.asarray(tested)[order], stepped):
        out[int(i)] = float(adjusted)
    return out


def paired_t_power(n: int, effect: float, alpha: float = ALPHA) -> float:
    """Power of a two-sided paired t-test over n seeds at standardized effect |Δ|/SD (noncentral t, df = n - 1)."""
    df, nc = n - 1, effect * math.sqrt(n)
    crit = stats.t.ppf(1 - alpha / 2, df)
    # The lower tail P(T < -crit) as P(T' > crit) at -nc: scipy's nct.cdf turns NaN far out in that tail.
    return float(stats.nct.sf(crit, df, nc) + stats.nct.sf(crit, df, -nc))


def seeds_needed(delta: float | None, sd: float | None, alpha: float = ALPHA, power: float = POWER) -> int | None:
    """The fewest seeds (at least 2) at which a two-sided paired t-test at `alpha` detects a true difference
    `delta` with probability `power`, when the paired differences spread with standard deviation `sd`.

    None when there is nothing to detect (delta None or 0) or no spread to plan with (sd None or 0). Power grows
    with n, so the answer is found by doubling then bisecting: exact, where solve_power's root finder is not.
    """
    if delta is None or sd is None or delta == 0 or not sd > 0:
        return None
    effect = abs(delta) / sd
    low, high = 1, 2  # power(low) < power <= power(high) once the loop ends; n = 1 has no test at all
    while paired_t_power(high, effect, alpha) < power:
        low, high = high, high * 2
    while high - low > 1:
        mid = (low + high) // 2
        low, high = (mid, high) if paired_t_power(mid, effect, alpha) < power else (low, mid)
    return high


def verdict(paper_delta: float | None, ours: float | None, p_adjusted: float | None, alpha: float = ALPHA) -> str:
    """`reproduced` / `contradicted` when our difference is resolved (adjusted p < alpha) with the paper's / the
    opposite sign; `unresolved` otherwise; NO_DIFFERENCE where the paper shows no difference (0). A row the paper
    does not have (paper_delta None, a user's ablation) is `higher` / `lower` than base when resolved."""
    if paper_delta == 0 or (paper_delta is None and ours is None):
        return NO_DIFFERENCE
    if ours is None or ours == 0 or p_adjusted is None or not p_adjusted < alpha:
        return "unresolved"
    if paper_delta is None:
        return "higher" if ours > 0 else "lower"
    return "reproduced" if (ours > 0) == (paper_delta > 0) else "contradicted"
