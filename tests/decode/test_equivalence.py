"""Equivalences on a real tiny Transformer: cached = recomputed, beam 1 = greedy, batched = one at a time."""

from __future__ import annotations

import pytest
import torch

from aiayn.decode.beam import beam_search
from aiayn.decode.greedy import greedy_search

SPECIAL = dict(bos_id=2, eos_id=3, pad_id=0)
BEAM = dict(beam_size=4, alpha=0.6, max_len_b=6)


def _assert_same_hypotheses(got, expected):
    assert [[h.tokens for h in hyps] for hyps in got] == [[h.tokens for h in hyps] for hyps in expected]
    for hyps, ref in zip(got, expected):
        assert [h.score for h in hyps] == pytest.approx([h.score for h in ref], abs=1e-5)
        assert [h.logprob for h in hyps] == pytest.approx([h.logprob for h in ref], abs=1e-5)


@torch.inference_mode()
def test_cached_beam_search_equals_full_recomputation(tiny_transformer, sources):
    cached = beam_search(tiny_transformer, sources, **BEAM, incremental=True, **SPECIAL)
    full = beam_search(tiny_transformer, sources, **BEAM, incremental=False, **SPECIAL)
    _assert_same_hypotheses(cached, full)
    # The comparison means something only if the search did more than run every beam to the limit.
    assert len({len(h.tokens) for hyps in full for h in hyps}) > 1


@torch.inference_mode()
def test_cached_greedy_equals_full_recomputation(tiny_transformer, sources):
    cached = greedy_search(tiny_transformer, sources, max_len_b=6, incremental=True, **SPECIAL)
    full = greedy_search(tiny_transformer, sources, max_len_b=6, incremental=False, **SPECIAL)
    assert cached == full


@torch.inference_mode()
def test_beam_size_one_without_length_penalty_equals_greedy(tiny_transformer, sources):
    # With alpha > 0 a single beam may go on past a finished hypothesis (a longer one can still score
    # higher), so the equivalence holds for alpha = 0, where the stopping bound is the plain log-probability.
    beams = beam_search(tiny_transformer, sources, beam_size=1, alpha=0.0, max_len_b=6, **SPECIAL)
    greedy = greedy_search(tiny_transformer, sources, max_len_b=6, **SPECIAL)
    assert [hyps[0].tokens for hyps in beams] == greedy


@torch.inference_mode()
def test_batched_beam_search_equals_one_sentence_at_a_time(tiny_transformer, sources):
    batched = beam_search(tiny_transformer, sources, **BEAM, **SPECIAL)
    single = []
    for row in sources:
        src = row[row != 0][None]  # (1, S_i): the sentence without the batch's padding
        single += beam_search(tiny_transformer, src, **BEAM, **SPECIAL)
    _assert_same_hypotheses(batched, single)


@torch.inference_mode()
def test_batched_greedy_equals_one_sentence_at_a_time(tiny_transformer, sources):
    batched = greedy_search(tiny_transformer, sources, max_len_b=6, **SPECIAL)
    single = [greedy_search(tiny_transformer, row[row != 0][None], max_len_b=6, **SPECIAL)[0] for row in sources]
    assert batched == single


@torch.inference_mode()
def test_hypotheses_are_sorted_best_first_and_respect_the_limit(tiny_transformer, sources):
    hyps = beam_search(tiny_transformer, sources, **BEAM, **SPECIAL)
    limits = ((sources != 0).sum(dim=1) + BEAM["max_len_b"]).tolist()
    for sentence_hyps, limit in zip(hyps, limits):
        assert 1 <= len(sentence_hyps) <= BEAM["beam_size"]
        scores = [h.score for h in sentence_hyps]
        assert scores == sorted(scores, reverse=True)
        assert all(len(h.tokens) <= limit and 3 not in h.tokens for h in sentence_hyps)
