"""Figures: dev BLEU by Table 3 row against the paper, and learning curves (matplotlib, Agg, no pyplot state)."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from matplotlib.figure import Figure
from matplotlib.lines import Line2D

from aiayn.io import save_png
from aiayn.run.curve import read_curve


def _points(rows: Sequence[Mapping[str, Any]], key: str) -> tuple[np.ndarray, np.ndarray]:
    """Means (NaN where undefined) and asymmetric error bars (0 where there is no interval)."""
    mean = np.array([math.nan if r.get(key) is None else r[key] for r in rows], dtype=float)
    err = np.zeros((2, len(rows)))
    for i, r in enumerate(rows):
        low, high = r.get(f"{key.removesuffix('_mean')}_ci95_low"), r.get(f"{key.removesuffix('_mean')}_ci95_high")
        if low is not None and high is not None and not math.isnan(mean[i]):
            err[:, i] = (mean[i] - low, high - mean[i])
    return mean, err


VERDICT_COLOURS = {"reproduced": "tab:green", "contradicted": "tab:red", "unresolved": "0.55"}


def plot_claims(table3_rows: Sequence[Mapping[str, Any]], path: Path) -> Path:
    """Table 3's claims, one panel a column: each row's difference from base with the family interval that decides
    its verdict (coloured by the verdict), beside the paper's difference at this setting. Left: ΔBLEU; right: dev PPL
    over base's."""
    rows = [r for r in table3_rows if r["row"] != "base"]
    names, x = [r["row"] for r in rows], np.arange(len(rows))
    fig = Figure(figsize=(max(8.0, 0.55 * len(rows) + 4), 4.8))
    panels = fig.subplots(1, 2)
    columns = (
        ("delta_bleu", "verdict", "expected_delta_bleu", lambda v: v, 0.0, "ΔBLEU from base"),
        ("delta_log_ppl", "verdict_ppl", "expected_delta_log_ppl", math.exp, 1.0, "dev PPL ÷ base's"),
    )
    for ax, (key, verdict, paper_key, shown, zero, label) in zip(panels, columns):
        ax.axhline(zero, color="0.6", linewidth=0.8)
        for i, r in enumerate(rows):
            low, high, mean = r.get(f"{key}_family_low"), r.get(f"{key}_family_high"), r.get(key)
            colour = VERDICT_COLOURS.get(str(r.get(verdict)), "tab:blue")
            if mean is not None:
                err = None if low is None or high is None else [[shown(mean) - shown(low)], [shown(high) - shown(mean)]]
                ax.errorbar(i - 0.12, shown(mean), yerr=err, fmt="o", capsize=3, color=colour)
            if r.get(paper_key) is not None:
                ax.plot(i + 0.12, shown(r[paper_key]), "x", color="black", markersize=6)
        ax.set_ylabel(label)
        ax.set_xticks(x, names, rotation=45, fontsize=8)
        ax.grid(axis="y", alpha=0.3)
    handles = [
        Line2D([], [], marker="o", linestyle="", color=c, label=f"ours, {v} (family interval)")
        for v, c in VERDICT_COLOURS.items()
    ] + [Line2D([], [], marker="x", linestyle="", color="black", label="the paper's, at this setting")]
    panels[0].legend(handles=handles, fontsize=7, loc="best")
    fig.suptitle("Table 3: each row's difference from base, dev BLEU and dev PPL, against the paper's", fontsize=10)
    fig.tight_layout()
    return save_png(fig, path)


def _row_styles(rows: Sequence[str]) -> dict[str, dict[str, Any]]:
    """A colour per row from 20 distinct ones (tab20), a line style per further 20: no two rows look alike."""
    from matplotlib import colormaps

    palette, dashes = colormaps["tab20"].colors, ("-", "--", ":", "-.")  # type: ignore[attr-defined]  # ListedColormap
    return {row: {"color": palette[i % 20], "linestyle": dashes[(i // 20) % len(dashes)]} for i, row in enumerate(rows)}


def seed_band(curves: Sequence[dict[str, list[float]]], key: str) -> tuple[np.ndarray, ...]:
    """Steps, mean and min/max over seeds of one column, at the steps where every seed logged it."""
    per_seed = []
    for curve in curves:
        step, values = np.asarray(curve["step"]), np.asarray(curve.get(key, [math.nan] * len(curve["step"])))
        keep = ~np.isnan(values) & ~np.isnan(step)
        per_seed.append(dict(zip(step[keep].tolist(), values[keep].tolist())))
    steps = sorted(set.intersection(*(set(d) for d in per_seed))) if per_seed else []
    table = np.array([[d[s] for s in steps] for d in per_seed]).reshape(len(per_seed), len(steps))
    return np.asarray(steps), table.mean(axis=0), table.min(axis=0), table.max(axis=0)


def plot_learning_curves(
    curves: Mapping[tuple[str, int], Path], path: Path, paper_ppl: Mapping[str, float] | None = None
) -> Path:
    """Training loss and validation perplexity against step: each row as the mean over its seeds, with the range
    of its seeds as a band; `paper_ppl` (row -> the paper's dev PPL, given at the paper's scale) as dashed marks.

    Keys of `curves` are (row, seed).
    """
    by_row: dict[str, list[dict[str, list[float]]]] = {}
    for (row, _), csv_path in curves.items():
        by_row.setdefault(row, []).append(read_curve(csv_path))
    styles = _row_styles(list(by_row))
    fig = Figure(figsize=(13, 5))
    ax_loss, ax_ppl = fig.subplots(1, 2)
    for row, row_curves in by_row.items():
        n = len(row_curves)
        for ax, key in ((ax_loss, "train_loss"), (ax_ppl, "val_ppl")):
            steps, mean, low, high = seed_band(row_curves, key)
            if len(steps):
                ax.plot(
                    steps,
                    mean,
                    linewidth=1.2,
                    label=f"{row} ({n} seed{'s' * (n != 1)})" if ax is ax_loss else None,
                    **styles[row],
                )
                ax.fill_between(steps, low, high, color=styles[row]["color"], alpha=0.15, linewidth=0)
    for row, ppl in (paper_ppl or {}).items():
        colour = styles.get(row, {"color": "black"})["color"]
        ax_ppl.axhline(ppl, color=colour, linestyle=(0, (6, 3)), linewidth=1)
        ax_ppl.annotate(
            f"paper {row} {ppl:g}",
            (1.0, ppl),
            xycoords=("axes fraction", "data"),
            ha="right",
            va="bottom",
            fontsize=7,
            color=colour,
        )
    ax_loss.set(xlabel="step", ylabel="training loss (label-smoothed)", title="Training loss: mean over seeds")
    ax_ppl.set(xlabel="step", ylabel="validation perplexity", title="Validation perplexity (band: the seeds' range)")
    if ax_ppl.lines:
        ax_ppl.set_yscale("log")
    if not curves:
        fig.text(0.5, 0.5, "no curve.csv found", ha="center", va="center")
        fig.tight_layout()
    else:
        right = 0.83 if len(by_row) <= 26 else 0.70  # one legend column up to 26 rows, then two
        fig.tight_layout(rect=(0, 0, right, 1))
        fig.legend(
            *ax_loss.get_legend_handles_labels(),
            loc="center left",
            bbox_to_anchor=(right, 0.5),
            fontsize=8,
            ncols=1 + len(by_row) // 27,
            frameon=False,
        )
    return save_png(fig, path)
