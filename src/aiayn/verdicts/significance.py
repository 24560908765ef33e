"""Table 3's decisions, with the training run (a seed) as the unit. docs/verdicts.md explains the procedure.

- Each row's per-seed differences from base get a Student-t interval at level 1 - alpha/m (Bonferroni over the m
  rows compared with base): the *family interval*. With probability at least 1 - alpha every family interval of
  the table covers its row's true difference, and then every verdict of the table is true, because a verdict is
  a claim that the true difference lies in a range (Verdict.low, Verdict.high) that the interval lies inside.
- A row whose paper difference is within the margin delta (|paper Δ| <= delta) is an equivalence row: the paper
  shows no difference, so `reproduced` is an interval inside (-delta, delta) and `contradicted` one beyond it.
  Any other paper row is a difference row: `reproduced` is an interval on the paper's side of 0, `contradicted`
  one on the other side, or inside (-delta, delta). A row the paper does not have is `higher`, `lower` or
  `no difference` (within delta).
- The power of those decisions at n seeds, and the fewest seeds that reach a power, for planning.
- The exact sign-flip test, printed beside the t-test as a check that needs no normality; it decides nothing.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy import special, stats

from aiayn.config.schema import PLANNING_POOLS, VERDICT_COLUMNS, DesignConfig

SEEDS_UP_TO = 100  # seeds_needed searches n = 2 .. this; more is reported as None (out of reach)
EXACT_SIGN_FLIPS = 16  # up to 2^16 sign patterns are enumerated; more seeds draw MONTE_CARLO_FLIPS of them
MONTE_CARLO_FLIPS = 100_000

# What a row's test asks, from the paper's difference and the margin (kind_of).
EQUIVALENCE, DIFFERENCE, OWN = "equivalence", "difference", "own"  # OWN: a row the paper does not have
REPRODUCED, CONTRADICTED, UNRESOLVED = "reproduced", "contradicted", "unresolved"
HIGHER, LOWER, NO_DIFFERENCE = "higher", "lower", "no difference"
VERDICTS = (REPRODUCED, CONTRADICTED, UNRESOLVED, HIGHER, LOWER, NO_DIFFERENCE)


@dataclass(frozen=True)
class Verdict:
    """A verdict and the claim it makes: the true difference lies in (low, high) (None: no claim)."""

    name: str
    low: float | None = None
    high: float | None = None

    def holds(self, true_delta: float) -> bool:
        """Whether the claim is true of `true_delta` (a verdict without a claim is never false)."""
        return self.low is None or self.high is None or self.low < true_delta < self.high


def kind_of(paper_delta: float | None, margin: float) -> str:
    """EQUIVALENCE when the paper's difference is within the margin, DIFFERENCE beyond it, OWN for a row the paper
    does not have. Both in the paper's BLEU (rounded, so that 25.3 - 25.8 is -0.5, not -0.50000000000000355)."""
    if paper_delta is None:
        return OWN
    return EQUIVALENCE if abs(round(paper_delta, 6)) <= margin else DIFFERENCE


def verdict(kind: str, low: float | None, high: float | None, expected: float | None, margin: float | None) -> Verdict:
    """The verdict a family interval (low, high) supports for a row of `kind`.

    `expected` is the paper's difference at this setting (its sign is what a DIFFERENCE row reproduces), `margin`
    the delta at this setting (None: unknown, so no equivalence can be shown). No interval: unresolved.
    """
    if low is None or high is None:
        return Verdict(UNRESOLVED)
    inf = math.inf
    m = math.nan if margin is None else margin  # NaN: every comparison false, so no claim about the margin
    within = -m < low and high < m
    if kind == EQUIVALENCE:
        if within:
            return Verdict(REPRODUCED, -m, m)
        if low > m:
            return Verdict(CONTRADICTED, m, inf)
        if high < -m:
            return Verdict(CONTRADICTED, -inf, -m)
        return Verdict(UNRESOLVED)
    if low > 0:
        side = Verdict(HIGHER, 0.0, inf)
    elif high < 0:
        side = Verdict(LOWER, -inf, 0.0)
    else:
        side = None
    if kind == OWN:
        if side is not None:
            return side
        return Verdict(NO_DIFFERENCE, -m, m) if within else Verdict(UNRESOLVED)
    if expected is None or expected == 0:
        raise ValueError("a difference row needs the paper's nonzero difference")
    if side is not None:
        agrees = (side.name == HIGHER) == (expected > 0)
        return Verdict(REPRODUCED if agrees else CONTRADICTED, side.low, side.high)
    return Verdict(CONTRADICTED, -m, m) if within else Verdict(UNRESOLVED)


def family_level(alpha: float, family: int) -> float:
    """The confidence level of each row's family interval: 1 - alpha/m (Bonferroni)."""
    return 1.0 - alpha / max(family, 1)


def t_quantile(level: float, n: int | np.ndarray) -> float | np.ndarray:
    """The two-sided Student-t quantile of a `level` interval over n paired seeds (df = n - 1)."""
    if isinstance(n, (int, np.integer)):
        return float(special.stdtrit(int(n) - 1, 0.5 + level / 2))
    return special.stdtrit(np.asarray(n) - 1, 0.5 + level / 2)


def pooled_sd(sds: Sequence[float | None], ns: Sequence[int]) -> tuple[float | None, int]:
    """The pooled standard deviation of the rows' paired differences and its degrees of freedom, sum(n_i - 1)."""
    pairs = [(sd, n) for sd, n in zip(sds, ns) if sd is not None and n >= 2]
    df = sum(n - 1 for _, n in pairs)
    if df == 0:
        return None, 0
    return math.sqrt(sum((n - 1) * sd * sd for sd, n in pairs) / df), df


def planning_sd(sds: Sequence[float | None], ns: Sequence[int], pool: str = "median") -> float | None:
    """The spread a column's plans assume, from the rows' paired SDs (each over n seeds, n - 1 degrees of freedom).

    median: the median of the rows' variances, each divided by the median of chi^2_{n-1}/(n-1) (0.69 at 2 degrees
    of freedom), so that it estimates sigma^2 when rows spread alike; a few rows that spread widely do not move it,
    where they would drag the pooled mean up and starve every other row's plan. pooled: the mean of the variances
    weighted by degrees of freedom (more of them; right when rows spread alike).
    """
    # A row whose differences are identical (SD 0) says more about its runs (one deterministic path) than about
    # the noise: it is left out, as it gets no interval.
    pairs = [(sd, n) for sd, n in zip(sds, ns) if sd and n >= 2]
    if not pairs:
        return None
    if pool == "pooled":
        return pooled_sd([sd for sd, _ in pairs], [n for _, n in pairs])[0]
    if pool != "median":
        raise ValueError(f"design.planning_pool must be one of {PLANNING_POOLS}, got {pool!r}")
    return math.sqrt(float(np.median([sd * sd / _chi2_median_ratio(n - 1) for sd, n in pairs])))


@functools.cache
def _chi2_median_ratio(df: int) -> float:
    """The median of s^2 / sigma^2 over df degrees of freedom: chi^2_df's median over df."""
    return float(stats.chi2.median(df)) / df


def power_difference(n: int | np.ndarray, delta: float, sd: float, level: float) -> np.ndarray:
    """Probability that a family interval at `level` over n seeds lies on the side of 0 of a true difference
    `delta` (paired differences with standard deviation sd): the power to reproduce its sign. Noncentral t."""
    n = np.atleast_1d(np.asarray(n, dtype=float))
    crit, nc = t_quantile(level, n), abs(delta) / sd * np.sqrt(n)
    p = 1.0 - special.nctdtr(n - 1, nc, crit)
    # scipy.special.nctdtr returns NaN at some large noncentralities (~40.3-41.5, scipy 1.17): those few take
    # scipy.stats' survival function, slower per call but finite there.
    bad = ~np.isfinite(p)
    if bad.any():
        p[bad] = stats.nct.sf(np.broadcast_to(crit, p.shape)[bad], (n - 1)[bad], np.broadcast_to(nc, p.shape)[bad])
    return p


def power_equivalence(n: int | np.ndarray, delta: float, margin: float, sd: float, level: float) -> np.ndarray:
    """Probability that a family interval at `level` over n seeds lies inside (-margin, margin) when the true
    difference is `delta`: the mean is normal around delta, the sample SD an independent sd * chi_{n-1}/sqrt(n-1),
    so the power is an integral over the SD, taken by Gauss-Legendre over the SDs whose interval can fit."""
    n = np.atleast_1d(np.asarray(n, dtype=float))[:, None]
    df, se, q = n - 1, sd / np.sqrt(n), t_quantile(level, n)
    low, high = (np.array([_chi_range(int(d))[i] for d in df[:, 0]])[:, None] for i in (0, 1))
    high = np.minimum(high, margin / (q * se))  # wider intervals than the margin never fit inside it
    span = np.clip(high - low, 0.0, None) / 2
    w = low + span * (1 + _GAUSS_NODES[None, :])  # s / sd at the nodes, (n, nodes)
    x = w * np.sqrt(df)  # chi's density by its formula (scipy.stats' per-call overhead dominates the simulations)
    log_chi = (df - 1) * np.log(x) - x * x / 2 - (df / 2 - 1) * math.log(2) - special.gammaln(df / 2)
    density = np.exp(log_chi) * np.sqrt(df)
    half = q * w * se
    inside = special.ndtr((margin - half - delta) / se) - special.ndtr((-margin + half - delta) / se)
    return np.clip((_GAUSS_WEIGHTS[None, :] * density * inside).sum(axis=1) * span[:, 0], 0.0, 1.0)


_GAUSS_NODES, _GAUSS_WEIGHTS = np.polynomial.legendre.leggauss(96)


@functools.cache
def _chi_range(df: int) -> tuple[float, float]:
    """Where s / sd lies over df degrees of freedom but for 1e-12 in each tail."""
    low, high = stats.chi.ppf([1e-12, 1 - 1e-12], df) / math.sqrt(df)
    return float(low), float(high)


def power(kind: str, n: int | np.ndarray, effect: float, margin: float | None, sd: float, level: float) -> np.ndarray:
    """The power of a row's decision at n seeds: to show equivalence within the margin when the true difference is
    `effect` (EQUIVALENCE), or to resolve `effect`'s sign (DIFFERENCE, OWN)."""
    if kind == EQUIVALENCE:
        if margin is None:
            raise ValueError("an equivalence row's power needs a margin")
        return power_equivalence(n, effect, margin, sd, level)
    return power_difference(n, effect, sd, level)


@functools.lru_cache(maxsize=1024)  # a table's equivalence rows share one plan; the tests simulate many tables
def seeds_needed(
    kind: str,
    effect: float | None,
    margin: float | None,
    sd: float | None,
    level: float,
    target: float = DesignConfig.power,
    up_to: int = SEEDS_UP_TO,
) -> int | None:
    """The fewest seeds (2 .. up_to) at which a row's decision has power `target` at a true difference `effect`,
    when paired differences spread with standard deviation sd. None: nothing to plan (no effect, no spread, no
    margin for an equivalence) or more than up_to seeds."""
    if effect is None or sd is None or not sd > 0:
        return None
    if kind == EQUIVALENCE and (margin is None or abs(effect) >= margin):
        return None
    if kind != EQUIVALENCE and effect == 0:
        return None

    def enough(n: int) -> bool:
        return float(power(kind, n, effect, margin, sd, level)[0]) >= target

    if not enough(up_to):
        return None
    low, high = 1, 2  # enough(high) and not enough(low) once the loop ends (power grows with n)
    while not enough(high):
        low, high = high, min(2 * high, up_to)
    while high - low > 1:
        mid = (low + high) // 2
        low, high = (mid, high) if not enough(mid) else (low, mid)
    return high


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


@dataclass
class Design(DesignConfig):
    """How Table 3 decides: the keys declared before the runs (DesignConfig: params.yaml's design.*;
    docs/verdicts.md), checked, with what the run's setting and the design's stage add.

    Each row makes one claim per column of `columns`: dev BLEU (differences from base in BLEU) and dev PPL
    (differences of log PPL, the log of the ratio to base). Effects and margins are given at the paper's setting
    (EN-DE newstest2013: base BLEU 25.8, PPL 4.92) and converted to this setting's: BLEU by `bleu_scale`, log PPL by
    `ppl_scale`. None derives each, 1 at the paper's setting, else our base's pilot dev BLEU over 25.8 and our
    base's pilot mean log PPL (the mean token loss) over log 4.92: relative effects of the same size. The design
    has two stages: every row runs the pilot seeds; the pilot plans each row's seeds (`planning_pool` of the rows'
    spreads, at most max_seeds); one extension runs them; one test decides. Until the extension is made, the
    verdicts of a row the plan extends are interim.
    """

    paper_setting: bool = False  # the paper's scale and data: the paper's BLEU differences are ours as they are
    pilot_seeds: tuple[int, ...] | None = None  # the seeds every row runs first (None: all of base's)
    extended: bool = False  # the one extension was made: every verdict is the design's final test

    def __post_init__(self) -> None:
        self.columns = list(self.columns)  # any sequence (a ListConfig, a tuple) as the schema's list
        for name, value in (("alpha", self.alpha), ("power", self.power)):
            if not 0 < value < 1:
                raise ValueError(f"design.{name} must be in (0, 1), got {value}")
        if not self.margin_bleu > 0:
            raise ValueError(f"design.margin_bleu must be > 0 (BLEU at the paper's scale), got {self.margin_bleu}")
        for name, scale in (("bleu_scale", self.bleu_scale), ("ppl_scale", self.ppl_scale)):
            if scale is not None and not scale > 0:
                raise ValueError(f"design.{name} must be > 0 or null, got {scale}")
        if not 0 < self.margin_ppl < 1:
            raise ValueError(f"design.margin_ppl must be in (0, 1) (a relative change of PPL), got {self.margin_ppl}")
        if not self.columns or set(self.columns) - set(VERDICT_COLUMNS):
            raise ValueError(
                f"design.columns must be a non-empty subset of {list(VERDICT_COLUMNS)}, got {list(self.columns)}"
            )
        if self.planning_pool not in PLANNING_POOLS:
            raise ValueError(f"design.planning_pool must be one of {list(PLANNING_POOLS)}, got {self.planning_pool!r}")
        if self.max_seeds < 2:
            raise ValueError(f"design.max_seeds must be at least 2 (a paired t needs two seeds), got {self.max_seeds}")
