"""Bootstrap resampling over test sentences: a 95% interval of one system's BLEU, and the paired test of two.

Both resample sacreBLEU's sentence-level sufficient statistics (n-gram matches and totals, lengths), so a
resampled score is an exact corpus BLEU of the resampled sentences (Koehn 2004; sacreBLEU's --paired-bs).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from sacrebleu.metrics import BLEU
from sacrebleu.significance import PairedTest

from aiayn.eval.bleu import check_parallel


def _resample_counts(n_items: int, n_samples: int, seed: int) -> np.ndarray:
    """How often each sentence is drawn in each bootstrap sample, (n_samples, n_items)."""
    rng = np.random.default_rng(seed)
    draws = rng.choice(n_items, size=(n_samples, n_items), replace=True)  # as sacreBLEU draws them
    flat = draws + np.arange(n_samples)[:, None] * n_items
    return np.bincount(flat.ravel(), minlength=n_samples * n_items).reshape(n_samples, n_items)


def bleu_ci95(
    hyps: Sequence[str], refs: Sequence[str], *, n_bootstrap: int = 1000, seed: int = 0, tokenized: bool = False
) -> list[float]:
    """[low, high] 95% percentile bootstrap interval of sacreBLEU over the test sentences (`tokenized` as
    aiayn.eval.bleu.sacre_bleu's).

    Uses sacreBLEU's own bounds: the (n // 40)-th smallest and largest of the n resampled scores.
    """
    check_parallel(hyps, refs)
    if n_bootstrap < 2:
        raise ValueError(f"n_bootstrap must be >= 2, got {n_bootstrap}")
    metric = BLEU(force=tokenized)
    # sacreBLEU exposes sentence statistics only through these underscored methods (its significance
    # module uses the same two); pinned by tests/eval against corpus_score.
    stats = np.asarray(metric._extract_corpus_statistics(list(hyps), [list(refs)]), dtype=np.float64)  # (N, 10)
    totals = _resample_counts(len(stats), n_bootstrap, seed) @ stats  # (n_bootstrap, 10), exact integer sums
    scores = np.sort([metric._compute_score_from_stats(list(row)).score for row in totals])
    cut = n_bootstrap // 40
    return [float(scores[cut]), float(scores[n_bootstrap - cut - 1])]


def paired_delta_sd(
    hyps_base: Sequence[str], hyps_other: Sequence[str], refs: Sequence[str], *, n: int = 1000, seed: int = 0
) -> float:
    """The standard deviation of BLEU(other) - BLEU(base) over sentences resampled together for both systems: how
    much the paired difference would move on another dev set of the same size (the dev set's sampling noise)."""
    check_parallel(hyps_base, refs)
    check_parallel(hyps_other, refs)
    metric = BLEU()
    counts = _resample_counts(len(refs), n, seed)
    deltas = []
    totals = [
        counts @ np.asarray(metric._extract_corpus_statistics(list(h), [list(refs)]), dtype=np.float64)
        for h in (hyps_base, hyps_other)
    ]
    for base, other in zip(*totals):
        deltas.append(
            metric._compute_score_from_stats(list(other)).score - metric._compute_score_from_stats(list(base)).score
        )
    return float(np.std(deltas, ddof=1))


def paired_bootstrap(
    hyps_base: Sequence[str], hyps_other: Sequence[str], refs: Sequence[str], *, n: int = 1000, seed: int = 12345
) -> dict:
    """sacreBLEU's paired bootstrap test (PairedTest, test_type "bs") of BLEU(other) against BLEU(base).

    Returns p_value (two-sided: chance of a difference this large if the systems were equally good), both
    scores, their difference, and the signature. Identical outputs get p_value 1.0 (see below).
    """
    check_parallel(hyps_base, refs)
    check_parallel(hyps_other, refs)
    if seed < 1:
        # PairedTest treats a falsy seed as "unseeded", which would make p-values irreproducible.
        raise ValueError(f"seed must be >= 1 for a reproducible sacreBLEU paired test, got {seed}")
    systems: list[tuple[str, Sequence[str]]] = [("base", list(hyps_base)), ("other", list(hyps_other))]
    test = PairedTest(systems, {"BLEU": BLEU()}, references=[list(refs)], test_type="bs", n_samples=n)
    test._seed = seed  # PairedTest otherwise reads the seed from $SACREBLEU_SEED: no environment edits here
    signatures, results = test()
    name = next(key for key in results if key != "System")
    base: Any
    other: Any  # sacreBLEU's Result objects (its annotations allow a str)
    base, other = results[name]
    p_value = other.p_value
    if systems[0][1] == systems[1][1]:
        # Identical systems make every resampled difference 0, where sacreBLEU's count gives 1 / (n + 1).
        p_value = 1.0
    return {
        "p_value": float(p_value),
        "bleu_base": float(base.score),
        "bleu_other": float(other.score),
        "delta": float(other.score - base.score),
        "other_mean": float(other.mean),
        "other_ci_halfwidth": float(other.ci),
        "n": n,
        "seed": seed,
        "signature": str(signatures[name]),
    }
