"""The attention figures are deterministic PNGs of any head count, refuse weights that do not fit their tokens, and
the dev sentences they show are picked by the stated rule."""

from __future__ import annotations

import numpy as np
import pytest

from aiayn.inference.attention import MAX_WORDS, pick_sentences
from aiayn.inference.drawing import plot_attention_grid, plot_attention_lines

PNG = b"\x89PNG\r\n\x1a\n"


def _weights(heads: int, rows: int, columns: int, seed: int = 0) -> np.ndarray:
    logits = np.random.default_rng(seed).normal(size=(heads, rows, columns)) * 3
    return np.exp(logits) / np.exp(logits).sum(-1, keepdims=True)


@pytest.mark.parametrize("heads", [1, 8, 16, 24])
def test_figures_are_deterministic_pngs_for_any_head_count(tmp_path, heads):
    tokens = ["▁The", "▁dog", "▁sleep", "s", ".", "</s>"]
    weights = _weights(heads, 6, 6)
    for draw in (
        lambda path: plot_attention_lines(weights, tokens, path, "lines"),
        lambda path: plot_attention_grid(weights[:, :4], tokens[:4], tokens, path, "grid", with_mean=True),
    ):
        first, second = draw(tmp_path / "a.png"), draw(tmp_path / "b.png")
        assert first.read_bytes().startswith(PNG) and first.read_bytes() == second.read_bytes()


def test_weights_that_do_not_fit_the_tokens_are_refused(tmp_path):
    with pytest.raises(ValueError, match="do not fit 5 tokens"):
        plot_attention_lines(_weights(2, 6, 6), ["a"] * 5, tmp_path / "x.png", "")
    with pytest.raises(ValueError, match="do not fit 3 x 6 tokens"):
        plot_attention_grid(_weights(2, 4, 6), ["a"] * 3, ["b"] * 6, tmp_path / "x.png", "")


SOURCES = [
    "The dog sleeps.",
    "The dog that runs sleeps.",
    "The cat says that the dog sleeps.",
    "If it runs, it sleeps.",
]
REFERENCES = [
    "Der Hund schläft.",
    "Der Hund, der läuft, schläft.",
    "Die Katze sagt, dass der Hund schläft.",
    "Wenn es läuft, schläft es.",
]


def test_the_rule_picks_the_first_relative_and_the_first_subordinate_clause():
    assert pick_sentences(SOURCES, REFERENCES) == [(1, "relative clause"), (2, "subordinate clause")]
    assert pick_sentences(SOURCES[3:], REFERENCES[3:]) == [(0, "subordinate clause")]  # fronted: Wenn ..., schläft
    # a sentence is drawn once, for the first feature it shows; long ones are passed over
    both = ["Die Katze sagt, dass der Hund, der läuft, schläft."]
    assert pick_sentences(["x"], both) == [(0, "relative clause")]
    assert pick_sentences([" ".join(["w"] * (MAX_WORDS + 1))], both) == [(0, "first dev sentence")]
    assert pick_sentences(SOURCES[:1], REFERENCES[:1]) == [(0, "first dev sentence")]
    assert pick_sentences([], []) == []
