"""Runaway hypotheses: those that run to the search's length limit, or repeat a run of words (aiayn.eval.runaways)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from tests.decode.conftest import BOS, EOS, PAD, ScriptedModel

from aiayn.decode.search import output_limits, search, source_ids
from aiayn.eval.bleu import sacre_bleu
from aiayn.eval.runaways import at_length_limit, repeats, runaway_summary


@pytest.mark.parametrize(
    "line, expected",
    [
        ("pfohzwulte, pfohzwulte, pfohzwulte, pfohzwulte", True),
        ("der Hund der Hund der Hund der Hund sah", True),  # a bigram four times
        ("a b c a b c a b c a b c", True),  # a trigram
        ("pfohzwulte, pfohzwulte, pfohzwulte", False),  # three times is not a run
        ("the dog saw the dog", False),
        ("a b a b a b c a b", False),  # three times, then broken
        ("", False),
    ],
)
def test_repeats_finds_an_ngram_said_four_times_in_a_row(line: str, expected: bool) -> None:
    assert repeats(line) is expected


def test_repeats_takes_its_run_length_and_longest_ngram() -> None:
    assert repeats("x x x", times=3) and not repeats("a b c d e a b c d e a b c d e a b c d e")
    assert repeats("a b c d e a b c d e", times=2, max_n=5)
    with pytest.raises(ValueError, match="times must be >= 2"):
        repeats("x", times=1)


def test_summary_counts_each_kind_names_the_lines_and_scores_the_rest() -> None:
    hyps = ["der Hund schläft im Garten", "er sagt sagt sagt sagt", "die Katze sitzt auf dem Dach", "ein Satz a b c d"]
    refs = ["der Hund schläft im Garten", "er sagt", "die Katze sitzt auf dem Dach", "ein Satz"]
    limited = [False, True, False, True]  # line 2 both repeats and hit its limit; line 4 only hit it
    got = runaway_summary(hyps, refs, limited)
    assert got["at_length_limit"] == 2 and got["repeating"] == 1 and got["count"] == 2 and got["lines"] == [2, 4]
    assert got["bleu_without"] == pytest.approx(sacre_bleu([hyps[0], hyps[2]], [refs[0], refs[2]])[0])
    assert got["bleu_without"] > sacre_bleu(hyps, refs)[0]
    clean = runaway_summary(hyps[:1], refs[:1], [False])
    assert clean["count"] == 0 and clean["bleu_without"] == pytest.approx(sacre_bleu(hyps[:1], refs[:1])[0])
    with pytest.raises(ValueError, match="length-limit flags"):
        runaway_summary(hyps, refs, limited[:2])


class _Letters:
    """Token 4 is 'a', 5 is 'b'; sentences are space-separated letters."""

    pad_id, bos_id, eos_id, vocab_size = PAD, BOS, EOS, 6

    def encode(self, lines: list[str]) -> list[list[int]]:
        return [[4 if w == "a" else 5 for w in line.split()] for line in lines]

    def decode(self, ids: list[list[int]]) -> list[str]:
        return [" ".join("a" if t == 4 else "b" for t in seq) for seq in ids]


@pytest.mark.parametrize("strategy", ["beam", "greedy"])
def test_a_model_that_never_stops_is_found_at_its_limit_and_one_that_stops_is_not(strategy: str) -> None:
    """A known runaway: after source 'a' the scripted model prefers 'a' to EOS forever, so the search forces EOS at
    input length + max_len_b; after source 'b' it says 'b' and stops."""
    model = ScriptedModel(
        {4: {(): {4: 0.9, EOS: 0.1}}, 5: {(): {5: 0.9, EOS: 0.1}, (5,): {EOS: 0.9, 5: 0.1}}},
        default={4: 0.9, EOS: 0.1},
    )
    model.cfg = SimpleNamespace(max_positions=64)
    tokenizer, sentences, max_len_b = _Letters(), ["a", "b", "a b"], 7
    outputs = search(
        model, tokenizer, sentences, strategy=strategy, beam_size=2, alpha=0.6, max_len_b=max_len_b, device="cpu"
    )
    limits = output_limits([len(ids) for ids in tokenizer.encode(sentences)], max_len_b, 64)
    assert limits == output_limits([len(ids) - 1 for ids in source_ids(tokenizer, sentences, 64)], max_len_b, 64)
    assert limits == [2 + 7, 2 + 7, 3 + 7]  # input tokens with EOS, plus max_len_b
    assert at_length_limit(outputs, limits) == [True, False, True]
    got = runaway_summary(tokenizer.decode(outputs), ["a", "b", "a b"], at_length_limit(outputs, limits))
    assert got["count"] == 2 and got["lines"] == [1, 3] and got["repeating"] == 2
    # The decoder's positions cap the limit below input + max_len_b.
    assert output_limits([1, 0, 40], 50, 16) == [15, 0, 15]  # a truncated source gets the same cap
    assert at_length_limit([[], [4] * 15], [0, 15]) == [False, True]  # an empty source is never a runaway
