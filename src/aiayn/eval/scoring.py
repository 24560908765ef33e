"""All test-set scores of one system's translations in one dict (what the `evaluate` stage writes to eval.json)."""

from __future__ import annotations

from collections.abc import Sequence

from aiayn.eval.bleu import chrf, lc_tok_bleu, paper_bleu, sacre_bleu
from aiayn.eval.bootstrap import bleu_ci95


def score_translations(
    hyps: Sequence[str],
    refs: Sequence[str],
    *,
    tgt_lang: str,
    bootstrap: int = 1000,
    seed: int = 0,
    tokenized: bool = False,
) -> dict:
    """sacreBLEU (+ signature and bootstrap 95% interval), the paper's tokenized BLEU, the Multi30k literature's
    lowercased tokenised BLEU (+ signature), chrF, sentence count.

    `bootstrap` resamples for `bleu_ci95`; 0 skips the interval (`bleu_ci95` is then None). `tokenized`: hypotheses
    and references are already lowercased and tokenised (data.form=lc.norm.tok).
    """
    if bootstrap < 0:
        raise ValueError(f"bootstrap must be >= 0 (0: no interval), got {bootstrap}")
    bleu, signature = sacre_bleu(hyps, refs, tokenized)
    return {
        "bleu": bleu,
        "sacrebleu_signature": signature,
        "bleu_paper": paper_bleu(hyps, refs, tgt_lang),
        **dict(zip(("bleu_lc_tok", "bleu_lc_tok_signature"), lc_tok_bleu(hyps, refs, tgt_lang, tokenized))),
        "chrf": chrf(hyps, refs),
        "bleu_ci95": (
            bleu_ci95(hyps, refs, n_bootstrap=bootstrap, seed=seed, tokenized=tokenized) if bootstrap else None
        ),
        "n_sentences": len(refs),
    }
