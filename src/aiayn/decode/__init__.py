"""Greedy and beam search over the model's encode/decode: length limits and normalisation, forced decoding (6.1)."""
