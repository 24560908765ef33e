"""Evaluation: checkpoint averaging, BLEU variants and their bootstrap statistics, perplexity (section 6)."""

from aiayn.eval.averaging import average_checkpoints, checkpoint_step, select_last
from aiayn.eval.bleu import chrf, lc_tok, lc_tok_bleu, paper_bleu, paper_tokenize, sacre_bleu, split_compounds
from aiayn.eval.bootstrap import bleu_ci95, paired_bootstrap
from aiayn.eval.evaluate import score_translations
from aiayn.eval.perplexity import dev_perplexity

__all__ = [
    "average_checkpoints",
    "bleu_ci95",
    "checkpoint_step",
    "chrf",
    "dev_perplexity",
    "lc_tok",
    "lc_tok_bleu",
    "paired_bootstrap",
    "paper_bleu",
    "paper_tokenize",
    "sacre_bleu",
    "score_translations",
    "select_last",
    "split_compounds",
]
