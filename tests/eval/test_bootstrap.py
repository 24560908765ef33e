"""Bootstrap 95% interval of one system's BLEU and sacreBLEU's paired bootstrap test between two systems."""

from __future__ import annotations

import random

import pytest

from aiayn.eval.bleu import sacre_bleu
from aiayn.eval.bootstrap import bleu_ci95, paired_bootstrap

WORDS = [f"w{i}" for i in range(300)]


def _corpus(n: int = 120, seed: int = 0) -> list[str]:
    rng = random.Random(seed)
    return [" ".join(rng.choices(WORDS, k=rng.randint(8, 16))) for _ in range(n)]


def _corrupt(line: str, fraction: float, rng: random.Random) -> str:
    return " ".join(rng.choice(WORDS) if rng.random() < fraction else w for w in line.split())


def test_ci_brackets_the_score_and_is_reproducible():
    refs = _corpus()
    rng = random.Random(1)
    hyps = [_corrupt(line, 0.3, rng) for line in refs]
    low, high = bleu_ci95(hyps, refs, n_bootstrap=300, seed=3)
    score = sacre_bleu(hyps, refs)[0]
    assert low < score < high
    assert high - low > 1.0  # 120 noisy sentences: a real interval, not a point
    assert bleu_ci95(hyps, refs, n_bootstrap=300, seed=3) == [low, high]


def test_resampling_identical_sentences_gives_the_corpus_score():
    # Every resample of one repeated pair is the same corpus: pins the sufficient statistics to corpus_score.
    hyps, refs = ["a b c d e f x"] * 20, ["a b c d e f g"] * 20
    low, high = bleu_ci95(hyps, refs, n_bootstrap=40, seed=0)
    assert low == pytest.approx(sacre_bleu(hyps, refs)[0]) and high == pytest.approx(low)


def test_paired_bootstrap_finds_a_real_difference():
    refs = _corpus()
    rng = random.Random(2)
    good = [_corrupt(line, 0.1, rng) for line in refs]
    bad = [_corrupt(line, 0.4, rng) for line in refs]
    result = paired_bootstrap(bad, good, refs, n=300, seed=7)
    assert result["delta"] > 0 and result["p_value"] < 0.01
    assert result["bleu_other"] == pytest.approx(sacre_bleu(good, refs)[0])


def test_paired_bootstrap_finds_no_difference_between_equally_good_systems():
    # Each system corrupts a different half of the sentences the same way: equal quality, different outputs.
    refs = _corpus()
    rng = random.Random(4)
    first = [_corrupt(line, 0.3, rng) if i % 2 else line for i, line in enumerate(refs)]
    second = [line if i % 2 else _corrupt(line, 0.3, rng) for i, line in enumerate(refs)]
    assert paired_bootstrap(first, second, refs, n=300, seed=7)["p_value"] > 0.05
    assert paired_bootstrap(first, first, refs, n=300, seed=7)["p_value"] == 1.0


def test_bad_arguments_are_rejected():
    refs = _corpus(10)
    with pytest.raises(ValueError, match="seed"):
        paired_bootstrap(refs, refs, refs, n=10, seed=0)
    with pytest.raises(ValueError, match="n_bootstrap"):
        bleu_ci95(refs, refs, n_bootstrap=1)
