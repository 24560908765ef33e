"""Confidence intervals and paired tests over seeds, against hand-computed values and scipy."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from aiayn.verdicts.stats import mean_ci, paired_test

T_975_DF2 = 4.302652729911275  # Student t, 97.5th percentile, 2 degrees of freedom (tables)


def test_mean_ci_hand_computed():
    ci = mean_ci([1.0, 2.0, 3.0])
    # sd = 1, sem = 1/sqrt(3); half-width = t * sem
    half = T_975_DF2 / math.sqrt(3)
    assert (ci.mean, ci.n) == (2.0, 3)
    assert ci.low == pytest.approx(2.0 - half) and ci.high == pytest.approx(2.0 + half)
    assert ci.half_width == pytest.approx(half)


def test_mean_ci_matches_scipy_and_narrows_with_level():
    x = np.random.default_rng(0).normal(25.0, 0.7, size=7)
    ci95, ci80 = mean_ci(x), mean_ci(x, level=0.8)
    low, high = stats.t.interval(0.95, df=6, loc=x.mean(), scale=stats.sem(x))
    assert (ci95.low, ci95.high) == pytest.approx((low, high))
    assert ci95.low < ci80.low < ci80.mean < ci80.high < ci95.high


def test_mean_ci_refuses_an_interval_below_two_values():
    assert mean_ci([25.3]) == type(mean_ci([25.3]))(25.3, None, None, 1)
    empty = mean_ci([])
    assert (empty.mean, empty.low, empty.high, empty.n) == (None, None, None, 0)
    assert mean_ci([25.3]).half_width is None


def test_mean_ci_of_identical_values_is_the_point():
    ci = mean_ci([4.0, 4.0, 4.0])
    assert (ci.low, ci.mean, ci.high) == (4.0, 4.0, 4.0)


def test_mean_ci_rejects_a_bad_level():
    with pytest.raises(ValueError, match="level"):
        mean_ci([1.0, 2.0], level=95)


def test_paired_test_hand_computed():
    # differences 1, 1, 1.5: mean 7/6, sd = sqrt(1/12), sem = 1/6, t = 7
    res = paired_test({1: 1.0, 2: 2.0, 3: 3.5}, {1: 0.0, 2: 1.0, 3: 2.0})
    assert res.n == 3 and res.mean_diff == pytest.approx(7 / 6)
    assert res.p_value == pytest.approx(2 * stats.t.sf(7.0, df=2))
    assert (res.low, res.high) == pytest.approx((7 / 6 - T_975_DF2 / 6, 7 / 6 + T_975_DF2 / 6))


def test_paired_test_uses_only_common_seeds_and_matches_scipy():
    rng = np.random.default_rng(1)
    a = {s: float(v) for s, v in enumerate(rng.normal(25, 1, 6))}
    b = {s: float(v) for s, v in enumerate(rng.normal(24, 1, 5), start=1)}  # seeds 1..5; a has 0..5
    res = paired_test(a, b)
    common = [1, 2, 3, 4, 5]
    expected = stats.ttest_rel([a[s] for s in common], [b[s] for s in common])
    assert res.n == 5 and res.p_value == pytest.approx(expected.pvalue)
    ci = expected.confidence_interval(0.95)
    assert (res.low, res.high) == pytest.approx((ci.low, ci.high))


def test_paired_test_with_too_few_pairs():
    one = paired_test({1: 3.0, 2: 5.0}, {1: 1.0})
    assert (one.mean_diff, one.low, one.high, one.p_value, one.n) == (2.0, None, None, None, 1)
    none = paired_test({1: 3.0}, {2: 1.0})
    assert (none.mean_diff, none.p_value, none.n) == (None, None, 0)


def test_paired_test_without_any_difference_has_no_p_value():
    res = paired_test({1: 2.0, 2: 3.0}, {1: 2.0, 2: 3.0})
    assert res.mean_diff == 0.0 and res.p_value is None


def test_paired_test_with_a_constant_shift_has_nothing_to_test_against():
    """Identical differences are no evidence of certainty: no interval, no p (so no verdict), spread 0."""
    res = paired_test({1: 3.0, 2: 4.0, 3: 5.0}, {1: 2.0, 2: 3.0, 3: 4.0})
    assert (res.mean_diff, res.low, res.high, res.p_value, res.sd, res.n) == (1.0, None, None, None, 0.0, 3)
