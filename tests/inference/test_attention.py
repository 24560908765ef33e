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


@pytest.mark.parametrize("tokens", [1, 3, 12])
@pytest.mark.parametrize("draw", ["grid", "lines"])
def test_every_text_of_a_figure_lies_inside_it(tmp_path, monkeypatch, tokens: int, draw: str):
    """The title (however long the run's path), the colour bar's label and the token names fit inside the figure,
    however few the tokens: a one-word sentence once cut its title off at both edges."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    from aiayn.inference import drawing

    drawn = []
    monkeypatch.setattr(drawing, "save_png", lambda fig, path: drawn.append(fig) or path)
    title = "/a/rather/long/path/to/runs/base/seed1: encoder-decoder attention, layer 3 of 3\n'" + "en" * 40 + "'"
    weights = np.random.default_rng(0).dirichlet(np.ones(tokens), size=(4, tokens))
    names = [f"▁tok{i}" for i in range(tokens)]
    if draw == "grid":
        plot_attention_grid(weights, names, names, tmp_path / "g.png", title, with_mean=True)
    else:
        plot_attention_lines(weights, names, tmp_path / "l.png", title)
    (fig,) = drawn
    renderer = FigureCanvasAgg(fig).get_renderer()
    width, height = fig.bbox.width, fig.bbox.height
    for text in fig.findobj(lambda a: hasattr(a, "get_text") and hasattr(a, "get_window_extent")):
        if not text.get_visible() or not text.get_text().strip():
            continue
        box = text.get_window_extent(renderer)
        assert box.x0 >= -1 and box.x1 <= width + 1 and box.y0 >= -1 and box.y1 <= height + 1, text.get_text()
