"""All test-set scores of one system's translations in one dict (what the `evaluate` stage writes to eval.json)."""

from __future__ import annotations

from collections.abc import Sequence

from aiayn.eval.bleu import chrf, paper_bleu, sacre_bleu
from aiayn.eval.bootstrap import bleu_ci95


def score_translations(
    hyps: Sequence[str], refs: Sequence[str], *, tgt_lang: str, bootstrap: int = 1000, seed: int = 0
) -> dict:
    """sacreBLEU (+ signature and bootstrap 95% interval), the paper's tokenized BLEU, chrF, sentence count.

    `bootstrap` resamples for `bleu_ci95`; 0 skips the interval (`bleu_ci95` is then None).
    """
    if bootstrap < 0:
        raise ValueError(f"bootstrap must be >= 0 (0: no interval), got {bootstrap}")
    bleu, signature = sacre_bleu(hyps, refs)
    return {
        "bleu": bleu,
        "sacrebleu_signature": signature,
        "bleu_paper": paper_bleu(hyps, refs, tgt_lang),
        "chrf": chrf(hyps, refs),
        "bleu_ci95": bleu_ci95(hyps, refs, n_bootstrap=bootstrap, seed=seed) if bootstrap else None,
        "n_sentences": len(refs),
    }
