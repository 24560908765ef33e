"""Table 3's verdicts as the tables decide them: planted effects give every verdict (the whole design's promise,
simulated: tests/verdicts/test_simulation.py)."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from aiayn.paper import paper_table3
from aiayn.report.collect import RunRecord
from aiayn.report.table3 import build_table3
from aiayn.verdicts.decide import BASE
from aiayn.verdicts.significance import Design, Verdict, t_quantile

PAPER = paper_table3()
ROWS = [name for name in PAPER if name != BASE]  # the paper's 19 rows compared with base
PAPER_DELTA = {name: round(PAPER[name]["bleu_dev"] - PAPER[BASE]["bleu_dev"], 4) for name in ROWS}
PILOT = (1, 2, 3)
BLEU_ONLY = dict(columns=("bleu",))  # the tests of BLEU's claims alone (the records' PPL is constant)


def records(scores: dict[str, list[float]], interest: dict[str, float] | None = None) -> list[RunRecord]:
    """In-memory runs: one dev BLEU per seed (1, 2, ...) and a constant dev PPL; a row named as one of the paper's
    reproduces it (row.paper.table3)."""
    return [
        RunRecord(
            row,
            seed,
            Path(row),
            ok=True,
            eval={"dev": {"bleu": bleu, "ppl": 5.0, "checkpoints_averaged": 1}},
            config={
                "row": {
                    "name": row,
                    "tables": ["table3"],
                    "effect_of_interest": (interest or {}).get(row),
                    "paper": {"table3": row if row in PAPER else None},
                }
            },
        )
        for row, values in scores.items()
        for seed, bleu in enumerate(values, start=1)
    ]


def test_planted_effects_give_every_verdict():
    """Ten seeds, base at the paper's 25.8 (so the paper's differences are ours as they are, margin 0.5), and
    per-seed differences planted with a small spread: each kind of row reaches each of its verdicts."""
    rng = np.random.default_rng(0)
    base = 25.8 + rng.normal(0.0, 3.0, 10)  # seeds disagree a lot; paired differences cancel it
    plant = {
        "A3": 0.0,  # paper 0: shown within ±0.5 -> reproduced
        "A2": 3.0,  # paper -0.3: beyond +0.5 -> contradicted
        "A1": -2.0,  # paper -0.9: the paper's side -> reproduced
        "C1": 2.0,  # paper -2.1: the other side -> contradicted
        "B1": 0.0,  # paper -0.7: shown within ±0.5 -> contradicted
        "custom": 1.5,
        "mine": 0.0,
    }  # rows the paper does not have: higher, no difference
    scores = {
        BASE: list(base),
        **{row: list(base + d + rng.normal(0, 0.05, 10)) for row, d in plant.items()},
        "B2": list(base + rng.normal(0.0, 3.0, 10)),
    }  # paper -0.4, a wide spread: unresolved
    rows = {r["row"]: r for r in build_table3(records(scores), Design(pilot_seeds=PILOT, **BLEU_ONLY))}
    assert {name: (r["test"], r["verdict"]) for name, r in rows.items()} == {
        BASE: (None, None),
        "A3": ("equivalence", "reproduced"),
        "A2": ("equivalence", "contradicted"),
        "A1": ("difference", "reproduced"),
        "C1": ("difference", "contradicted"),
        "B1": ("difference", "contradicted"),
        "custom": ("own", "higher"),
        "mine": ("own", "no difference"),
        "B2": ("equivalence", "unresolved"),
    }
    family = 8
    for name, r in rows.items():
        if name == BASE:
            continue
        assert r["family_level"] == pytest.approx(1 - 0.05 / family)
        half = t_quantile(1 - 0.05 / family, 10) * r["delta_bleu_sd"] / math.sqrt(10)
        assert (r["delta_bleu_family_low"], r["delta_bleu_family_high"]) == pytest.approx(
            (r["delta_bleu"] - half, r["delta_bleu"] + half)
        )
        claim = Verdict(r["verdict"], r["claim_low"], r["claim_high"])
        assert claim.holds(plant.get(name, 0.0))  # every verdict here is true of what was planted
        assert r["verdict_final"]  # ten seeds: no plan asks for more
    assert rows["A1"]["paper_delta_in_interval"] == "no"  # -2 +- 0.05 does not hold the paper's -0.9
    assert rows["C1"]["paper_delta_in_interval"] == "no" and rows["custom"]["paper_delta_in_interval"] is None
    assert rows["A1"]["checkpoints_averaged"] == "1"


def test_a_reduced_scale_converts_the_papers_differences_and_the_margin_by_base_pilot_bleu():
    """Base scores 51.6 over the pilot seeds (twice the paper's 25.8): the margin is 1.0 and A1's paper -0.9 is
    -1.8 here. Seeds beyond the pilot do not move the scale; a declared bleu_scale replaces it."""
    base = [51.0, 52.2, 51.6, 70.0]  # seed 4 is an extension's: not the pilot's
    scores = {BASE: base, "A1": [b - 1.8 + e for b, e in zip(base, (0.1, -0.1, 0.05, 0.0))]}
    rows = {r["row"]: r for r in build_table3(records(scores), Design(pilot_seeds=PILOT, extended=True, **BLEU_ONLY))}
    assert rows["A1"]["bleu_scale"] == pytest.approx(2.0) and rows["A1"]["margin_bleu"] == pytest.approx(1.0)
    assert rows["A1"]["expected_delta_bleu"] == pytest.approx(-1.8) and rows["A1"]["paper_delta_in_interval"] == "yes"
    declared = build_table3(records(scores), Design(pilot_seeds=PILOT, bleu_scale=0.5))
    assert declared[1]["margin_bleu"] == pytest.approx(0.25) and declared[1]["expected_delta_bleu"] == -0.45
    paper = build_table3(records(scores), Design(pilot_seeds=PILOT, paper_setting=True))
    assert paper[1]["margin_bleu"] == 0.5 and paper[1]["expected_delta_bleu"] == -0.9


def test_a_row_the_paper_does_not_have_plans_for_the_effect_its_user_states():
    rng = np.random.default_rng(1)
    base = 25.8 + rng.normal(0.0, 1.0, 3)
    scores = {BASE: list(base), "X1": list(base + rng.normal(0.4, 0.3, 3)), "X2": list(base + rng.normal(0.4, 0.3, 3))}
    rows = {
        r["row"]: r for r in build_table3(records(scores, interest={"X1": 2.0}), Design(pilot_seeds=PILOT, **BLEU_ONLY))
    }
    assert rows["X1"]["expected_delta_bleu"] == pytest.approx(2.0 * rows["X1"]["bleu_scale"])
    assert rows["X2"]["expected_delta_bleu"] == pytest.approx(0.5 * rows["X2"]["bleu_scale"])  # default: the margin
    assert rows["X1"]["seeds_planned"] < rows["X2"]["seeds_planned"]  # a larger effect needs fewer seeds
    # Planned from the effect stated, never from the row's own observed difference: the plan ignores it.
    moved = {**scores, "X1": list(np.array(scores["X1"]) + 5.0)}
    again = {
        r["row"]: r for r in build_table3(records(moved, interest={"X1": 2.0}), Design(pilot_seeds=PILOT, **BLEU_ONLY))
    }
    assert again["X2"]["planning_sd"] == rows["X2"]["planning_sd"]  # a shift leaves the spread as it was
    assert again["X1"]["seeds_planned"] == rows["X1"]["seeds_planned"]


def test_pilot_verdicts_of_rows_the_plan_extends_are_interim():
    rng = np.random.default_rng(2)
    base = 25.8 + rng.normal(0.0, 2.0, 3)
    scores = {BASE: list(base), **{row: list(base + PAPER_DELTA[row] + rng.normal(0, 0.5, 3)) for row in ROWS}}
    pilot = {r["row"]: r for r in build_table3(records(scores), Design(pilot_seeds=PILOT, **BLEU_ONLY))}
    for name in ROWS:
        planned = pilot[name]["seeds_planned"]
        assert pilot[name]["verdict_final"] == (planned is None or not 3 < planned <= 10), name
    assert not all(pilot[name]["verdict_final"] for name in ROWS)  # something to extend at this spread
    extended = build_table3(records(scores), Design(pilot_seeds=PILOT, extended=True, **BLEU_ONLY))
    assert all(r["verdict_final"] for r in extended if r["row"] != BASE)


def test_identical_differences_give_no_verdict():
    """Two seeds whose differences from base are identical: no spread, no interval, no verdict (p 0 once said
    `reproduced` from two seeds)."""
    rows = {r["row"]: r for r in build_table3(records({BASE: [25.0, 27.0], "A1": [23.0, 25.0]}))}
    assert rows["A1"]["delta_bleu"] == -2.0 and rows["A1"]["delta_bleu_p_seeds"] is None
    assert rows["A1"]["delta_bleu_family_low"] is None and rows["A1"]["verdict"] == "unresolved"
