"""Seed-level significance: the sign-flip test, the powers and seeds needed, the verdicts and their claims, against
hand-computed values, scipy, statsmodels and simulation."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from scipy import stats
from statsmodels.stats.power import TTestPower

from aiayn.verdicts.significance import (
    DIFFERENCE,
    EQUIVALENCE,
    OWN,
    Design,
    Verdict,
    family_level,
    kind_of,
    planning_sd,
    pooled_sd,
    power_difference,
    power_equivalence,
    seeds_needed,
    sign_flip_p,
    t_quantile,
    verdict,
)


def test_sign_flip_p_hand_computed():
    # Sums of +-1 +-2 +-0.5: 3.5, 2.5, -0.5, -1.5, 1.5, 0.5, -2.5, -3.5; four reach |2.5|.
    assert sign_flip_p([1.0, 2.0, -0.5]) == 0.5
    assert sign_flip_p([0.3, 0.1, 0.2]) == 0.25  # three seeds, all one way: the smallest p there is
    assert sign_flip_p([0.0, 0.0, 0.0]) == 1.0 and sign_flip_p([]) is None


def test_sign_flip_p_equals_scipys_exact_permutation_test():
    rng = np.random.default_rng(0)
    for n in range(2, 11):
        d = rng.normal(0.5, 1.0, n)
        ref = stats.permutation_test((d,), np.mean, permutation_type="samples", n_resamples=np.inf)
        assert sign_flip_p(d) == pytest.approx(ref.pvalue, abs=1e-12), n


def test_sign_flip_p_by_sampling_beyond_sixteen_seeds_is_close_to_exact():
    d = np.random.default_rng(1).normal(0.3, 1.0, 18)
    patterns = np.array(list(itertools.product((-1, 1), repeat=18)), dtype=np.int8)  # (2^18, 18)
    exact = float(np.mean(np.abs(patterns @ d) >= abs(d.sum()) - 1e-9))
    assert sign_flip_p(d) == pytest.approx(exact, abs=0.01)
    assert 0 < sign_flip_p(np.full(20, 0.5)) < 1e-4  # sampled, yet never 0


@pytest.mark.parametrize("effect", [0.4, 0.8, 1.0, 1.5, 2.0, 3.0])
@pytest.mark.parametrize("alpha", [0.05, 0.05 / 19])
def test_seeds_needed_for_a_difference_is_the_first_n_with_the_power_and_matches_statsmodels(effect, alpha):
    """One-sided power of the two-sided interval (its sign resolved the right way): statsmodels' two-sided power
    less its wrong-way tail, which is negligible where the power is 0.8."""
    n = seeds_needed(DIFFERENCE, effect * 0.7, None, 0.7, 1 - alpha)
    assert power_difference(n, effect * 0.7, 0.7, 1 - alpha)[0] >= 0.8
    assert n == 2 or power_difference(n - 1, effect * 0.7, 0.7, 1 - alpha)[0] < 0.8
    assert n == math.ceil(TTestPower().solve_power(effect_size=effect, alpha=alpha, power=0.8) - 1e-9)
    reference = TTestPower().power(effect, n, alpha)  # NaN where it asks scipy's nct.cdf far into the lower tail
    assert math.isnan(reference) or power_difference(n, effect, 1.0, 1 - alpha)[0] == pytest.approx(reference, abs=1e-4)


@pytest.mark.parametrize(
    "n, delta, margin, sd, level",
    [(3, 0.0, 2.0, 0.3, 0.95), (5, 0.0, 1.0, 0.8, 0.9974), (10, 0.3, 1.0, 0.8, 0.9974), (20, -0.5, 1.0, 1.0, 0.99)],
)
def test_powers_hold_in_simulation(n, delta, margin, sd, level):
    """Brute force: simulated seeds' family intervals fall inside the margin (equivalence) and on the side of 0
    (difference) as often as the power says."""
    d = np.random.default_rng(3).normal(delta, sd, size=(100_000, n))
    mean, half = d.mean(axis=1), t_quantile(level, n) * d.std(axis=1, ddof=1) / math.sqrt(n)
    inside = np.mean((mean - half > -margin) & (mean + half < margin))
    assert power_equivalence(n, delta, margin, sd, level)[0] == pytest.approx(inside, abs=0.005)
    side = np.mean(mean - half > 0) if delta >= 0 else np.mean(mean + half < 0)
    if delta != 0:
        assert power_difference(n, delta, sd, level)[0] == pytest.approx(side, abs=0.005)


def test_seeds_needed_undefined_without_an_effect_a_spread_or_room_inside_the_margin():
    assert (
        seeds_needed(DIFFERENCE, None, 0.5, 1.0, 0.95) is None and seeds_needed(DIFFERENCE, 0.0, 0.5, 1.0, 0.95) is None
    )
    assert (
        seeds_needed(DIFFERENCE, 1.0, 0.5, None, 0.95) is None and seeds_needed(DIFFERENCE, 1.0, 0.5, 0.0, 0.95) is None
    )
    assert (
        seeds_needed(DIFFERENCE, 100.0, 0.5, 1.0, 0.95) == 2
    )  # a t interval needs two seeds, however large the effect
    assert seeds_needed(DIFFERENCE, 0.05, 0.5, 1.0, 0.95) is None  # 3142 seeds: beyond SEEDS_UP_TO
    assert seeds_needed(EQUIVALENCE, 0.5, 0.5, 0.3, 0.95) is None  # a true difference on the margin never fits
    assert seeds_needed(EQUIVALENCE, 0.0, None, 0.3, 0.95) is None  # no margin, nothing to fit inside
    n = seeds_needed(EQUIVALENCE, 0.0, 0.5, 0.3, 0.95)
    assert power_equivalence(n, 0.0, 0.5, 0.3, 0.95)[0] >= 0.8 > power_equivalence(n - 1, 0.0, 0.5, 0.3, 0.95)[0]


def test_pooled_sd_weights_by_degrees_of_freedom():
    assert pooled_sd([1.0, 2.0, None], [3, 5, 4]) == (pytest.approx(math.sqrt((2 * 1 + 4 * 4) / 6)), 6)
    assert pooled_sd([1.0], [1]) == (None, 0) and pooled_sd([], []) == (None, 0)


def test_kind_of_rows():
    assert kind_of(None, 0.5) == OWN and kind_of(-0.9, 0.5) == DIFFERENCE and kind_of(0.0, 0.5) == EQUIVALENCE
    assert kind_of(25.3 - 25.8, 0.5) == EQUIVALENCE  # -0.5000000000000036 is the paper's -0.5: within the margin


def test_each_verdict_and_the_claim_it_makes():
    """Intervals planted for every verdict of every kind of row; each verdict's claim holds of the interval."""
    m = 1.0
    cases = [
        # equivalence rows (paper: no difference)
        (EQUIVALENCE, (-0.5, 0.8), None, Verdict("reproduced", -1.0, 1.0)),
        (EQUIVALENCE, (1.2, 3.0), None, Verdict("contradicted", 1.0, math.inf)),
        (EQUIVALENCE, (-3.0, -1.5), None, Verdict("contradicted", -math.inf, -1.0)),
        (EQUIVALENCE, (0.5, 1.5), None, Verdict("unresolved")),  # above 0, but not beyond the margin
        # difference rows (paper -2.0)
        (DIFFERENCE, (-3.0, -0.1), -2.0, Verdict("reproduced", -math.inf, 0.0)),
        (DIFFERENCE, (0.2, 4.0), -2.0, Verdict("contradicted", 0.0, math.inf)),
        (DIFFERENCE, (-0.6, 0.7), -2.0, Verdict("contradicted", -1.0, 1.0)),  # shown within ±delta
        (DIFFERENCE, (-0.9, -0.2), -2.0, Verdict("reproduced", -math.inf, 0.0)),  # the sign, if not the size
        (DIFFERENCE, (-3.0, 0.5), -2.0, Verdict("unresolved")),
        # rows the paper does not have
        (OWN, (0.3, 2.0), 1.0, Verdict("higher", 0.0, math.inf)),
        (OWN, (-2.0, -0.3), 1.0, Verdict("lower", -math.inf, 0.0)),
        (OWN, (-0.4, 0.6), 1.0, Verdict("no difference", -1.0, 1.0)),
        (OWN, (-0.4, 1.6), 1.0, Verdict("unresolved")),
    ]
    for kind, (low, high), expected, wanted in cases:
        got = verdict(kind, low, high, expected, m)
        assert got == wanted, (kind, low, high)
        assert got.low is None or (got.low <= low and high <= got.high)  # the interval lies inside the claim
    assert verdict(DIFFERENCE, None, None, -2.0, m) == Verdict("unresolved")  # no interval: no verdict
    assert verdict(EQUIVALENCE, -0.5, 0.5, None, None) == Verdict("unresolved")  # no margin: no equivalence
    assert Verdict("reproduced", -1.0, 1.0).holds(0.3) and not Verdict("reproduced", -1.0, 1.0).holds(1.0)
    assert Verdict("unresolved").holds(123.0)  # claims nothing, never wrong


def test_design_refuses_values_that_cannot_decide():
    for bad, key in (
        (dict(alpha=0.0), "design.alpha"),
        (dict(power=1.0), "design.power"),
        (dict(margin_bleu=0.0), "design.margin_bleu"),
        (dict(bleu_scale=-1.0), "design.bleu_scale"),
        (dict(max_seeds=1), "design.max_seeds"),
    ):
        with pytest.raises(ValueError, match=key):
            Design(**bad)


def test_power_is_finite_where_scipys_nctdtr_returns_nan():
    """scipy.special.nctdtr gives NaN at noncentralities of about 40.3-41.5 (scipy 1.17): at an effect 4.05 times its
    spread the power over 2..100 seeds is finite and rising, and the plan is a number (it was None: "out of reach")."""
    level = family_level(0.05, 19)
    powers = power_difference(np.arange(2, 101), 2.1, 2.1 / 4.05, level)
    assert np.isfinite(powers).all() and (np.diff(powers) >= -1e-12).all()
    planned = seeds_needed(DIFFERENCE, -2.1, None, 2.1 / 4.05, level)
    assert planned is not None and planned <= 6


def test_the_median_planning_spread_ignores_a_few_wide_rows():
    """Rows alike at SD 1 over 4 seeds each, three at 4: the median of the variances (over the chi-square median)
    stays near 1, the pooled mean does not; rows with identical differences (SD 0) are left out."""
    rng = np.random.default_rng(0)
    sds = [float(np.std(rng.normal(0, 1, 4), ddof=1)) for _ in range(16)] + [4.0, 4.0, 4.0, 0.0]
    ns = [4] * len(sds)
    assert 0.7 < planning_sd(sds, ns, "median") < 1.3
    assert planning_sd(sds, ns, "pooled") > 1.7
    assert planning_sd([0.0, 0.0], [4, 4]) is None
    with pytest.raises(ValueError, match="planning_pool"):
        planning_sd(sds, ns, "mean")
