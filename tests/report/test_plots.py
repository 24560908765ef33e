"""Figures are written as deterministic PNGs, including with gaps, missing rows and no curves at all."""
from __future__ import annotations

import pytest

from aiayn.curve import read_curve
from aiayn.report.plots import plot_bleu_by_row, plot_learning_curves

PNG = b"\x89PNG\r\n\x1a\n"
ROWS = [
    dict(row="base", bleu_mean=30.0, bleu_ci95_low=29.0, bleu_ci95_high=31.0, paper_delta_bleu=0.0),
    dict(row="A1", bleu_mean=28.0, bleu_ci95_low=27.5, bleu_ci95_high=28.5, delta_bleu=-2.0,
         delta_bleu_ci95_low=-2.5, delta_bleu_ci95_high=-1.5, paper_delta_bleu=-0.9),
    dict(row="D1", bleu_mean=27.0, bleu_ci95_low=None, bleu_ci95_high=None, delta_bleu=-3.0, paper_delta_bleu=-1.2),
    dict(row="big", bleu_mean=None, paper_delta_bleu=0.6),
    dict(row="custom", bleu_mean=31.0, bleu_ci95_low=30.0, bleu_ci95_high=32.0, delta_bleu=1.0),
]


def test_bleu_by_row_is_a_deterministic_png(tmp_path):
    first, second = tmp_path / "a" / "bleu.png", tmp_path / "b" / "bleu.png"
    plot_bleu_by_row(ROWS, first)
    plot_bleu_by_row(ROWS, second)
    assert first.read_bytes().startswith(PNG) and first.stat().st_size > 5000
    assert first.read_bytes() == second.read_bytes()
    assert [p.name for p in first.parent.iterdir()] == ["bleu.png"]  # no temporary file left behind


def test_learning_curves_with_gaps_and_without_curves(tmp_path):
    curve = tmp_path / "curve.csv"
    curve.write_text("step,train_loss,val_loss,val_ppl,lr\n1,5.0,,,0.1\n2,4.0,4.1,60.3,0.2\n3,3.5,,,0.3\n")
    plot_learning_curves({"base/seed1": curve, "base/seed2": curve}, tmp_path / "curves.png")
    plot_learning_curves({}, tmp_path / "empty.png")
    for name in ("curves.png", "empty.png"):
        assert (tmp_path / name).read_bytes().startswith(PNG)
    assert read_curve(curve)["val_ppl"][1] == 60.3


def test_bad_curve_cell_is_named(tmp_path):
    curve = tmp_path / "curve.csv"
    curve.write_text("step,train_loss\n1,5.0\n2,oops\n")
    with pytest.raises(ValueError, match=r"curve.csv:3: column 'train_loss'"):
        read_curve(curve)
