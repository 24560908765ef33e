"""Golden tests: beam and greedy search against a scripted model with hand-written probabilities (section 6.1)."""

from __future__ import annotations

import math

import pytest
import torch

from aiayn.decode.beam import beam_search, length_penalty
from aiayn.decode.greedy import greedy_search

PAD, BOS, EOS, A, B = 0, 2, 3, 4, 5
SPECIAL = dict(bos_id=BOS, eos_id=EOS, pad_id=PAD)

# Sentence key 10. [A] is the most probable translation, [B, B] wins once its length is rewarded.
TABLE = {
    10: {
        (): {A: 0.55, B: 0.45},
        (A,): {EOS: 0.4, A: 0.35, B: 0.25},
        (B,): {B: 0.68, EOS: 0.32},
        (B, B): {EOS: 0.68, B: 0.32},
    }
}
DEFAULT = {EOS: 0.5, A: 0.3, B: 0.2}
LOGP_A = math.log(0.55 * 0.4)
LOGP_BB = math.log(0.45 * 0.68 * 0.68)


def _src(*rows: list[int]) -> torch.Tensor:
    src = torch.full((len(rows), max(map(len, rows))), PAD, dtype=torch.long)
    for i, row in enumerate(rows):
        src[i, : len(row)] = torch.tensor(row)
    return src


def test_length_penalty_is_one_for_a_single_token_and_grows_with_alpha():
    assert length_penalty(1, 0.6) == pytest.approx(1.0)
    assert length_penalty(7, 0.0) == pytest.approx(1.0)
    assert length_penalty(3, 0.6) == pytest.approx((8 / 6) ** 0.6)
    assert length_penalty(3, 0.6, "power") == pytest.approx(3**0.6)
    assert length_penalty(1, 0.6, "power") == pytest.approx(1.0)
    with pytest.raises(ValueError, match="length_norm.*'fairseq'"):
        length_penalty(3, 0.6, "fairseq")


@pytest.mark.parametrize("incremental", [True, False])
def test_the_power_norm_rewards_length_more_than_gnmts_at_the_same_alpha(scripted, incremental):
    # alpha 0.1: GNMT's ((5 + |Y|) / 6)^0.1 keeps [A] first; |Y|^0.1 (fairseq's --lenpen) puts [B, B] first.
    src = _src([10, EOS])
    gnmt, power = (
        beam_search(
            scripted(TABLE, DEFAULT),
            src,
            beam_size=2,
            alpha=0.1,
            max_len_b=10,
            incremental=incremental,
            length_norm=norm,
            **SPECIAL,
        )[0]
        for norm in ("gnmt", "power")
    )
    assert [h.tokens for h in gnmt] == [[A], [B, B]]
    assert [h.score for h in gnmt] == pytest.approx([LOGP_A / (7 / 6) ** 0.1, LOGP_BB / (8 / 6) ** 0.1])
    assert [h.tokens for h in power] == [[B, B], [A]]
    assert [h.score for h in power] == pytest.approx([LOGP_BB / 3**0.1, LOGP_A / 2**0.1])
    assert [h.logprob for h in power] == pytest.approx([LOGP_BB, LOGP_A])


@pytest.mark.parametrize("incremental", [True, False])
def test_length_penalty_changes_the_winner(scripted, incremental):
    src = _src([10, EOS])
    plain = beam_search(
        scripted(TABLE, DEFAULT), src, beam_size=2, alpha=0.0, max_len_b=10, incremental=incremental, **SPECIAL
    )[0]
    assert [h.tokens for h in plain] == [[A], [B, B]]
    assert [h.score for h in plain] == pytest.approx([LOGP_A, LOGP_BB])
    assert [h.logprob for h in plain] == pytest.approx([LOGP_A, LOGP_BB])

    rewarded = beam_search(
        scripted(TABLE, DEFAULT), src, beam_size=2, alpha=0.6, max_len_b=10, incremental=incremental, **SPECIAL
    )[0]
    assert [h.tokens for h in rewarded] == [[B, B], [A]]
    # |Y| counts EOS: [B, B] + EOS has length 3, [A] + EOS length 2.
    assert [h.score for h in rewarded] == pytest.approx([LOGP_BB / (8 / 6) ** 0.6, LOGP_A / (7 / 6) ** 0.6])
    assert [h.logprob for h in rewarded] == pytest.approx([LOGP_BB, LOGP_A])


@pytest.mark.parametrize("incremental", [True, False])
def test_search_goes_on_past_k_finished_while_a_live_hypothesis_can_win_then_stops(scripted, incremental):
    # After step 1 the pool already holds K=2 finished ([A] and [B]), but live [B, B] can still beat [B]
    # once length-rewarded, so the search goes on and finds the winner [B, B]; stopping at K finished would
    # have returned [A] first. After step 3 no live hypothesis can enter the pool, far before the limit (12).
    model = scripted(TABLE, DEFAULT)
    hyps = beam_search(
        model, _src([10, EOS]), beam_size=2, alpha=0.6, max_len_b=10, incremental=incremental, **SPECIAL
    )[0]
    assert [h.tokens for h in hyps] == [[B, B], [A]]
    assert model.calls == 4
    plain = scripted(TABLE, DEFAULT)
    beam_search(plain, _src([10, EOS]), beam_size=2, alpha=0.0, max_len_b=10, incremental=incremental, **SPECIAL)
    assert plain.calls == 3  # without length reward, the pool is settled one step earlier


def test_a_live_hypothesis_that_cannot_win_is_never_extended(scripted):
    # alpha 0: once [A] and [B, B] are finished, the best live log-probability (B, B, B) is below both.
    model = scripted(TABLE, DEFAULT)
    beam_search(model, _src([10, EOS]), beam_size=2, alpha=0.0, max_len_b=10, incremental=False, **SPECIAL)
    assert (B, B, B) not in model.queried


@pytest.mark.parametrize("incremental", [True, False])
def test_max_length_is_input_length_plus_b_and_ends_with_forced_eos(scripted, incremental):
    # EOS is unlikely everywhere: every sentence runs to its own limit, non-pad source length + max_len_b.
    src = _src([10, 11, EOS], [10, EOS])
    limits = [3 + 2, 2 + 2]
    never_stop = {A: 0.9, EOS: 0.1}
    beams = beam_search(
        scripted({}, never_stop), src, beam_size=2, alpha=0.6, max_len_b=2, incremental=incremental, **SPECIAL
    )
    greedy = greedy_search(scripted({}, never_stop), src, max_len_b=2, incremental=incremental, **SPECIAL)
    for hyps, out, limit in zip(beams, greedy, limits):
        assert all(len(h.tokens) <= limit for h in hyps)
        assert hyps[0].tokens == [A] * limit
        # The forced EOS keeps the model's EOS log-probability.
        assert hyps[0].logprob == pytest.approx(limit * math.log(0.9) + math.log(0.1))
        assert out == [A] * limit


def test_greedy_follows_the_most_probable_token(scripted):
    out = greedy_search(scripted(TABLE, DEFAULT), _src([10, EOS]), max_len_b=10, **SPECIAL)
    assert out == [[A]]


def test_batched_sentences_are_searched_independently(scripted):
    table = {**TABLE, 20: {(): {B: 0.7, A: 0.3}, (B,): {EOS: 0.9, A: 0.1}}}
    src = _src([10, EOS], [20, 20, 20, EOS], [10, EOS])
    batched = beam_search(scripted(table, DEFAULT), src, beam_size=2, alpha=0.6, max_len_b=10, **SPECIAL)
    single = [
        beam_search(scripted(table, DEFAULT), src[i : i + 1], beam_size=2, alpha=0.6, max_len_b=10, **SPECIAL)[0]
        for i in range(3)
    ]
    assert batched == single
    assert batched[1][0].tokens == [B]


def test_pad_and_bos_are_never_emitted(scripted):
    hyps = beam_search(
        scripted({}, {PAD: 0.5, BOS: 0.3, A: 0.1, EOS: 0.1}),
        _src([10, EOS]),
        beam_size=2,
        alpha=0.6,
        max_len_b=3,
        **SPECIAL,
    )[0]
    assert all(PAD not in h.tokens and BOS not in h.tokens for h in hyps)


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(beam_size=0, alpha=0.6), "beam_size"),
        (dict(beam_size=2, alpha=-1.0), "alpha"),
        (dict(beam_size=2, alpha=0.6, length_norm="fairseq"), "length_norm must be one of"),
    ],
)
def test_bad_arguments_are_rejected(scripted, kwargs, match):
    with pytest.raises(ValueError, match=match):
        beam_search(scripted(TABLE, DEFAULT), _src([10, EOS]), max_len_b=10, **kwargs, **SPECIAL)
