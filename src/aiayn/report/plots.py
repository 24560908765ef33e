"""Figures: dev BLEU by Table 3 row against the paper, and learning curves (matplotlib, Agg, no pyplot state)."""
from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from aiayn.curve import read_curve
from aiayn.report.formats import atomic_write


def _save(fig: Figure, path: Path) -> Path:
    """Render with Agg and write atomically; no Software metadata, so the bytes depend only on the data."""
    FigureCanvasAgg(fig)
    return atomic_write(path, lambda tmp: fig.savefig(tmp, format="png", dpi=100, metadata={"Software": None}))


def _points(rows: Sequence[Mapping[str, Any]], key: str) -> tuple[np.ndarray, np.ndarray]:
    """Means (NaN where undefined) and asymmetric error bars (0 where there is no interval)."""
    mean = np.array([math.nan if r.get(key) is None else r[key] for r in rows], dtype=float)
    err = np.zeros((2, len(rows)))
    for i, r in enumerate(rows):
        low, high = r.get(f"{key.removesuffix('_mean')}_ci95_low"), r.get(f"{key.removesuffix('_mean')}_ci95_high")
        if low is not None and high is not None and not math.isnan(mean[i]):
            err[:, i] = (mean[i] - low, high - mean[i])
    return mean, err


def plot_bleu_by_row(table3_rows: Sequence[Mapping[str, Any]], path: Path) -> Path:
    """Left: our dev BLEU per row (95% CI over seeds). Right: difference from base, ours against the paper's."""
    rows = list(table3_rows)
    names = [r["row"] for r in rows]
    x = np.arange(len(rows))
    fig = Figure(figsize=(max(8.0, 0.55 * len(rows) + 4), 4.5))
    ax_abs, ax_diff = fig.subplots(1, 2)
    mean, err = _points(rows, "bleu_mean")
    ax_abs.errorbar(x, mean, yerr=err, fmt="o", capsize=3, label="ours (dev sacreBLEU)")
    ax_abs.set_ylabel("dev BLEU (ours)")
    ax_abs.set_title("Our dev BLEU, mean and 95% CI over seeds", fontsize=9)

    # The base row is the reference of both differences: 0 by definition.
    ours = [dict(r, delta_bleu=0.0) if r["row"] == "base" else r for r in rows]
    d_mean, d_err = _points(ours, "delta_bleu")
    paper = np.array([math.nan if r.get("paper_delta_bleu") is None else r["paper_delta_bleu"] for r in rows])
    ax_diff.axhline(0.0, color="0.6", linewidth=0.8)
    ax_diff.errorbar(x - 0.12, d_mean, yerr=d_err, fmt="o", capsize=3, label="ours: row − base (paired 95% CI)")
    ax_diff.plot(x + 0.12, paper, "x", color="tab:red", markersize=7, label="paper: row − base (Table 3)")
    ax_diff.set_ylabel("BLEU difference from base")
    ax_diff.set_title("Row − base, ours vs the paper", fontsize=9)
    ax_diff.legend(fontsize=8)
    for ax in (ax_abs, ax_diff):
        ax.set_xticks(x, names, rotation=45, fontsize=8)
        ax.grid(axis="y", alpha=0.3)
    fig.suptitle("Table 3 rows, dev BLEU. Our scale and the paper's differ in absolute level,\n"
                 "so the right panel compares differences from base", fontsize=10)
    fig.tight_layout()
    return _save(fig, path)


def plot_learning_curves(curves: Mapping[str, Path], path: Path) -> Path:
    """Training loss and validation perplexity against step, one line per run.

    Keys are "row/seedN" labels: the seeds of one row share a colour and one legend entry.
    """
    fig = Figure(figsize=(10, 4.5))
    ax_loss, ax_ppl = fig.subplots(1, 2)
    colours: dict[str, str] = {}
    for label, csv_path in curves.items():
        group = label.split("/")[0]
        first = group not in colours
        colour = colours.setdefault(group, f"C{len(colours) % 10}")
        curve = read_curve(csv_path)
        step = np.asarray(curve["step"])
        for ax, key in ((ax_loss, "train_loss"), (ax_ppl, "val_ppl")):
            values = np.asarray(curve.get(key, [math.nan] * len(step)))
            keep = ~np.isnan(values) & ~np.isnan(step)  # logged at different steps: draw only the filled cells
            if keep.any():
                ax.plot(step[keep], values[keep], color=colour, label=group if first else None, linewidth=1)
    ax_loss.set(xlabel="step", ylabel="training loss (label-smoothed)", title="Training loss")
    ax_ppl.set(xlabel="step", ylabel="validation perplexity", title="Validation perplexity")
    if ax_ppl.lines:
        ax_ppl.set_yscale("log")
    if not curves:
        fig.text(0.5, 0.5, "no curve.csv found", ha="center", va="center")
    elif ax_loss.lines:
        ax_loss.legend(fontsize=7, ncols=1 + len(colours) // 12)
    fig.tight_layout()
    return _save(fig, path)
