"""Figures are written as deterministic PNGs, including with gaps, missing rows and no curves at all."""

from __future__ import annotations

import math

import pytest

from aiayn.report.plots import plot_claims, plot_learning_curves
from aiayn.run.curve import read_curve

PNG = b"\x89PNG\r\n\x1a\n"
ROWS = [
    dict(row="base", bleu_mean=30.0, bleu_ci95_low=29.0, bleu_ci95_high=31.0, paper_delta_bleu=0.0),
    dict(
        row="A1",
        bleu_mean=28.0,
        bleu_ci95_low=27.5,
        bleu_ci95_high=28.5,
        delta_bleu=-2.0,
        delta_bleu_ci95_low=-2.5,
        delta_bleu_ci95_high=-1.5,
        delta_bleu_family_low=-3.0,
        delta_bleu_family_high=-1.0,
        verdict="reproduced",
        expected_delta_bleu=-1.05,
        delta_log_ppl=0.05,
        delta_log_ppl_family_low=0.01,
        delta_log_ppl_family_high=0.09,
        verdict_ppl="reproduced",
        expected_delta_log_ppl=0.07,
        paper_delta_bleu=-0.9,
    ),
    dict(row="D1", bleu_mean=27.0, delta_bleu=-3.0, verdict="unresolved", delta_log_ppl=-0.1, verdict_ppl="unresolved"),
    dict(row="big", bleu_mean=None, paper_delta_bleu=0.6),
    dict(row="custom", bleu_mean=31.0, bleu_ci95_low=30.0, bleu_ci95_high=32.0, delta_bleu=1.0),
]


def test_the_claims_figure_is_a_deterministic_png(tmp_path):
    """Both columns' claims, with missing intervals, a row without runs and a row the paper does not have."""
    first, second = tmp_path / "a" / "claims.png", tmp_path / "b" / "claims.png"
    plot_claims(ROWS, first)
    plot_claims(ROWS, second)
    assert first.read_bytes().startswith(PNG) and first.stat().st_size > 5000
    assert first.read_bytes() == second.read_bytes()
    assert [p.name for p in first.parent.iterdir()] == ["claims.png"]  # no temporary file left behind


def test_learning_curves_with_gaps_and_without_curves(tmp_path):
    curve = tmp_path / "curve.csv"
    curve.write_text("step,train_loss,val_loss,val_ppl,lr\n1,5.0,,,0.1\n2,4.0,4.1,60.3,0.2\n3,3.5,,,0.3\n")
    plot_learning_curves({("base", 1): curve, ("base", 2): curve}, tmp_path / "curves.png")
    plot_learning_curves({}, tmp_path / "empty.png")
    for name in ("curves.png", "empty.png"):
        assert (tmp_path / name).read_bytes().startswith(PNG)
    assert read_curve(curve)["val_ppl"][1] == 60.3


def test_bad_curve_cell_is_named(tmp_path):
    curve = tmp_path / "curve.csv"
    curve.write_text("step,train_loss\n1,5.0\n2,oops\n")
    with pytest.raises(ValueError, match=r"curve.csv:3: column 'train_loss'"):
        read_curve(curve)


def test_a_row_is_its_seed_mean_with_the_seeds_range_as_a_band(tmp_path):
    from aiayn.report.plots import seed_band

    curves = [
        {"step": [10.0, 20.0, 30.0], "val_ppl": [50.0, math.nan, 30.0]},
        {"step": [10.0, 20.0, 30.0], "val_ppl": [70.0, 45.0, 20.0]},
        {"step": [10.0, 30.0], "val_ppl": [60.0, 25.0]},
    ]
    steps, mean, low, high = seed_band(curves, "val_ppl")
    assert steps.tolist() == [10.0, 30.0]  # only where every seed has a point
    assert mean.tolist() == [60.0, 25.0] and low.tolist() == [50.0, 20.0] and high.tolist() == [70.0, 30.0]


def test_learning_curves_mark_the_papers_perplexities_at_paper_scale(tmp_path, fabricated):
    from aiayn.report.collect import collect_runs
    from aiayn.report.summary import paper_perplexities

    recs = collect_runs(fabricated["runs"], ["base", "A1"], [1, 2, 3])
    assert paper_perplexities(recs, {"scale": "tiny"}) == {}  # absolute levels are not comparable
    assert paper_perplexities(recs, {"scale": "paper"}) == {"base": 4.92}  # A1 is not marked
    curves = {(r.row, r.seed): r.path / "curve.csv" for r in recs}
    plain, marked = tmp_path / "plain.png", tmp_path / "marked.png"
    plot_learning_curves(curves, plain)
    plot_learning_curves(curves, marked, {"base": 4.92})
    assert plain.read_bytes().startswith(PNG) and plain.read_bytes() != marked.read_bytes()
