"""Scoring translations: BLEU in its variants, bootstrap intervals, perplexity, runaway hypotheses (section 6)."""
