"""Attention weights drawn in the manner of Figures 3-5 of the paper (matplotlib's Agg, no pyplot state), for
aiayn.inference.attention.

- `plot_attention_lines`: one self-attention layer over a sentence, its tokens in two columns, a line from each token
  (left) to every token it attends to (right), each head in its own colour, line width and opacity by weight.
- `plot_attention_grid`: one heat map per head (query rows x key columns), optionally led by their mean.
"""

from __future__ import annotations

import math
import textwrap
from collections.abc import Sequence
from pathlib import Path

import numpy as np
from matplotlib.collections import LineCollection
from matplotlib.colors import PowerNorm
from matplotlib.figure import Figure

from aiayn.io import save_png

TITLE_CHAR = 0.085  # inches: a character of a 9-point title, with room (measured: 0.066 on average, 0.079 for "en")
BAR_LABEL = "attention weight\n(square-root scale)"
BAR_HEIGHT = 1.3  # inches: the colour bar and its two-line label, which a short figure would cut off


def _title(title: str, width_in: float) -> str:
    """The title wrapped to a figure `width_in` inches wide, so that none of it falls off the figure's edges."""
    chars = max(20, int((width_in - 0.2) / TITLE_CHAR))
    return "\n".join(textwrap.fill(line, chars) for line in title.splitlines())


# A line is drawn for a weight of at least this much: below it the figure would be a grey fog of every pair.
MIN_WEIGHT = 0.1


def _head_colours(n_heads: int) -> list[tuple[float, float, float]]:
    """A distinct colour per head: tab10 up to 10 heads, tab20 up to 20, then hues round the circle."""
    from matplotlib import colormaps

    if n_heads <= 20:
        palette = colormaps["tab10" if n_heads <= 10 else "tab20"]
        rgba = [palette(h) for h in range(n_heads)]
    else:
        rgba = [colormaps["hsv"](h / n_heads) for h in range(n_heads)]
    return [(r, g, b) for r, g, b, _ in rgba]


def plot_attention_lines(weights: np.ndarray, tokens: Sequence[str], path: Path, title: str) -> Path:
    """`weights` (H, S, S): per head, row i is how token i's attention divides over the S `tokens`; lines of weight
    below MIN_WEIGHT are left out."""
    heads, length = weights.shape[0], len(tokens)
    if weights.shape != (heads, length, length):
        raise ValueError(f"self-attention weights of shape {weights.shape} do not fit {length} tokens")
    # Inches: a row a token, the title above, a line of head names (in their colours) below; no layout engine.
    key_rows = math.ceil(heads / 8)
    title = _title(title, 6.5)
    height = 0.24 * length + 0.5 + 0.2 * key_rows + 0.17 * title.count("\n")
    fig = Figure(figsize=(6.5, height))
    ax = fig.add_axes((0.0, (0.15 + 0.2 * key_rows) / height, 1.0, 0.24 * length / height))
    for side, x in (("right", -0.02), ("left", 1.02)):
        for i, token in enumerate(tokens):
            ax.text(x, -i, token, ha=side, va="center", fontsize=8)
    colours = _head_colours(heads)
    for colour, head in zip(colours, weights):
        query, key = np.nonzero(head >= MIN_WEIGHT)
        strength = head[query, key]
        ends = np.stack([np.zeros(len(query)), -query, np.ones(len(key)), -key], axis=1)
        segments = list(ends.astype(float).reshape(-1, 2, 2))  # per line: its two ends (x, y)
        rgba = [(*colour, float(w)) for w in strength]
        ax.add_collection(LineCollection(segments, colors=rgba, linewidths=0.3 + 3.0 * strength))
    ax.set_xlim(-0.45, 1.45)
    ax.set_ylim(-length + 0.5, 0.5)
    ax.axis("off")
    for h, colour in enumerate(colours):
        row, column = divmod(h, 8)
        x, y = (column + 0.5) / 8, (0.1 + 0.2 * (key_rows - 1 - row)) / height
        fig.text(x, y, f"\u2014 head {h + 1}", color=colour, ha="center", va="bottom", fontsize=7, weight="bold")
    fig.suptitle(title, fontsize=9, y=1 - 0.05 / height, va="top")
    return save_png(fig, path)


CELL, LABEL_CHAR = 0.14, 0.045  # inches: a token's cell in a heat map, a character of a token's name beside it
GAP_ROWS = 2  # blank rows above each heat map, for its name

# One colour scale for every panel, 0 to 1; its square root spreads the small weights of diffuse heads apart.
SCALE = PowerNorm(gamma=0.5, vmin=0.0, vmax=1.0)


def _grid(panels: int) -> tuple[int, int]:
    """Columns and rows for `panels` heat maps: 3 to 6 columns (fewer panels: one row), fewest empty cells, then
    closest to square, then wider."""
    if panels <= 3:
        return panels, 1
    options = [(cols, math.ceil(panels / cols)) for cols in range(3, min(panels, 6) + 1)]
    return min(options, key=lambda cr: (cr[0] * cr[1] - panels, abs(cr[0] - cr[1]), -cr[0]))


def plot_attention_grid(
    weights: np.ndarray,
    rows: Sequence[str],
    columns: Sequence[str],
    path: Path,
    title: str,
    with_mean: bool = False,
) -> Path:
    """`weights` (H, T, S): a heat map per head of the T query tokens (`rows`) over the S key tokens (`columns`),
    on one colour scale from 0 to 1; `with_mean` puts the mean over the heads first. The maps are tiles of one
    image, a blank cell between them, the tokens named beside the left column and under the bottom row."""
    heads, n_q, n_k = weights.shape
    if (n_q, n_k) != (len(rows), len(columns)):
        raise ValueError(f"attention weights of shape {weights.shape} do not fit {len(rows)} x {len(columns)} tokens")
    panels = [(f"head {h + 1}", weights[h]) for h in range(heads)]
    if with_mean:
        panels.insert(0, ("mean of the heads", weights.mean(axis=0)))
    n_cols, n_rows = _grid(len(panels))
    tile_h, tile_w = n_q + GAP_ROWS, n_k + 1  # a tile: its map, a blank column after it, blank rows above it
    mosaic = np.full((n_rows * tile_h, n_cols * tile_w - 1), np.nan)  # NaN: blank
    for index, (_, panel) in enumerate(panels):
        top, left = (index // n_cols) * tile_h + GAP_ROWS, (index % n_cols) * tile_w
        mosaic[top : top + n_q, left : left + n_k] = panel
    # Inches: the image at CELL per token, margins for the token names (LABEL_CHAR a character), title, colour bar.
    left, bottom = 0.15 + LABEL_CHAR * max(map(len, rows)), 0.15 + LABEL_CHAR * max(map(len, columns))
    right = 1.0
    width, height = CELL * mosaic.shape[1], CELL * mosaic.shape[0]
    # A narrow image (few tokens) widens its figure for the title, up to 8 inches, then the title wraps; a short one
    # grows its bottom margin for the colour bar's label.
    spare = max(0.0, min(8.0, TITLE_CHAR * max(map(len, title.splitlines())) + 0.3) - (left + width + right))
    left, right = left + spare / 2, right + spare / 2
    title = _title(title, left + width + right)
    top = 0.3 + 0.17 * title.count("\n")
    bottom += max(0.0, BAR_HEIGHT + 0.3 - (bottom + height))
    fig = Figure(figsize=(left + width + right, bottom + height + top))
    size = fig.get_size_inches()
    ax = fig.add_axes((left / size[0], bottom / size[1], width / size[0], height / size[1]))
    image = ax.imshow(mosaic, norm=SCALE, cmap="Blues", aspect="auto", interpolation="nearest")
    for index, (name, _) in enumerate(panels):
        top_row, left_col = (index // n_cols) * tile_h + GAP_ROWS, (index % n_cols) * tile_w
        ax.text(left_col + n_k / 2 - 0.5, top_row - 0.7, name, ha="center", va="bottom", fontsize=7)
    # Token names as plain text, not ticks: a tick is several artists, and a grid of 16 heads has hundreds.
    for r in range(n_rows):
        for t, token in enumerate(rows):
            ax.text(-0.8, r * tile_h + GAP_ROWS + t, token, ha="right", va="center", fontsize=5)
    for c in range(n_cols):
        for k, token in enumerate(columns):
            ax.text(c * tile_w + k, mosaic.shape[0] - 0.2, token, ha="center", va="top", rotation=90, fontsize=5)
    ax.axis("off")
    fig.suptitle(title, fontsize=9, y=1 - 0.05 / size[1], va="top")
    bar_height = max(BAR_HEIGHT, 0.5 * height)
    bar_bottom = bottom + height - bar_height
    bar = fig.add_axes(((left + width + 0.15) / size[0], bar_bottom / size[1], 0.12 / size[0], bar_height / size[1]))
    fig.colorbar(image, cax=bar).set_label(BAR_LABEL, fontsize=7)
    bar.tick_params(labelsize=6)
    return save_png(fig, path)
