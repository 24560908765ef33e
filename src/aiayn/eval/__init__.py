"""Evaluation: checkpoint averaging, BLEU variants and their bootstrap statistics, perplexity (section 6).

Import the modules themselves (aiayn.eval.bleu, ...): importing the package loads none of them.
"""
