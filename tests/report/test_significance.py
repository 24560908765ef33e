"""Seed-level significance: the sign-flip test, Holm's correction, seeds needed and verdicts, against hand-computed
values, scipy, statsmodels and simulation."""
from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from scipy import stats
from statsmodels.stats.multitest import multipletests
from statsmodels.stats.power import TTestPower

from aiayn.report.significance import holm, paired_t_power, seeds_needed, sign_flip_p, verdict


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


def test_holm_hand_computed_and_against_statsmodels():
    # Sorted 0.005, 0.01, 0.03, 0.04 times 4, 3, 2, 1: 0.02, 0.03, 0.06, 0.04 -> 0.06 (monotone).
    assert holm([0.01, 0.04, 0.03, 0.005]) == pytest.approx([0.03, 0.06, 0.06, 0.02])
    assert holm([0.01, None, 0.04]) == [pytest.approx(0.02), None, pytest.approx(0.04)]  # None is not a test
    p = np.random.default_rng(2).uniform(0, 0.2, 19)
    assert holm(list(p)) == pytest.approx(list(multipletests(p, method="holm")[1]))
    assert holm([None, None]) == [None, None] and holm([]) == []


@pytest.mark.parametrize("effect", [0.4, 0.8, 1.0, 1.5, 2.0, 3.0])
@pytest.mark.parametrize("alpha", [0.05, 0.05 / 19])
def test_seeds_needed_is_the_first_n_with_the_power_and_matches_statsmodels(effect, alpha):
    n = seeds_needed(effect * 0.7, 0.7, alpha)
    assert paired_t_power(n, effect, alpha) >= 0.8 and (n == 2 or paired_t_power(n - 1, effect, alpha) < 0.8)
    assert n == math.ceil(TTestPower().solve_power(effect_size=effect, alpha=alpha, power=0.8) - 1e-9)
    reference = TTestPower().power(effect, n, alpha)  # NaN where it asks scipy's nct.cdf far into the lower tail
    assert math.isnan(reference) or paired_t_power(n, effect, alpha) == pytest.approx(reference, abs=1e-9)


def test_seeds_needed_power_holds_in_simulation():
    """Brute force: paired t-tests on simulated seeds reject at the computed power (10 seeds at effect 1)."""
    n, sims = seeds_needed(-0.9, 0.9), 20_000
    assert n == 10
    rng = np.random.default_rng(3)
    for seeds, expected in ((n, paired_t_power(n, 1.0)), (n - 1, paired_t_power(n - 1, 1.0))):
        d = rng.normal(-0.9, 0.9, size=(sims, seeds))
        rejected = stats.ttest_1samp(d, 0.0, axis=1).pvalue < 0.05
        assert rejected.mean() == pytest.approx(expected, abs=0.015)
    assert paired_t_power(n, 1.0) >= 0.8 > paired_t_power(n - 1, 1.0)


def test_seeds_needed_undefined_without_a_difference_or_a_spread():
    assert seeds_needed(None, 1.0) is None and seeds_needed(0.0, 1.0) is None
    assert seeds_needed(1.0, None) is None and seeds_needed(1.0, 0.0) is None
    assert seeds_needed(100.0, 1.0) == 2  # a t-test needs two seeds, however large the effect
    assert seeds_needed(0.05, 1.0) == 3142  # statsmodels: 3141.47


def test_verdict():
    assert verdict(-0.9, -1.2, 0.01) == "reproduced" and verdict(0.6, 5.3, 0.049) == "reproduced"
    assert verdict(-0.9, 1.2, 0.01) == "contradicted"
    assert verdict(-0.9, -1.2, 0.05) == "unresolved" and verdict(-0.9, -1.2, None) == "unresolved"
    assert verdict(-0.9, None, None) == "unresolved" and verdict(-0.9, 0.0, 0.0) == "unresolved"
    assert verdict(0.0, -1.2, 0.001) == "—"  # the paper shows no difference: nothing to reproduce
    # A row the paper does not have: compared with base alone.
    assert verdict(None, -1.2, 0.001) == "lower" and verdict(None, 0.4, 0.01) == "higher"
    assert verdict(None, 0.4, 0.2) == "unresolved" and verdict(None, None, None) == "—"
