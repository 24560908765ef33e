"""Greedy and beam search over the model's `encode`/`decode`, and text-to-text translation (section 6.1)."""

from aiayn.decode.beam import Hypothesis, beam_search, length_penalty
from aiayn.decode.greedy import greedy_search
from aiayn.decode.search import batch_by_length, search, translate

__all__ = ["Hypothesis", "batch_by_length", "beam_search", "greedy_search", "length_penalty", "search", "translate"]
