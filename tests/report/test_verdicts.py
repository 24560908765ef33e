"""Table 3's verdicts on planted effects: known per-seed means and spreads give the expected verdicts, Holm p and
seeds needed; with no effect at all, the table calls a row reproduced no more often than its 5% family-wise rate."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from scipy import stats
from statsmodels.stats.multitest import multipletests

from aiayn.report.collect import RunRecord
from aiayn.report.paper import paper_table3
from aiayn.report.significance import paired_t_power
from aiayn.report.table3 import add_verdicts, build_table3

SEEDS = range(1, 6)


def records(scores: dict[str, list[float]]) -> list[RunRecord]:
    """In-memory runs: one dev BLEU per seed (and a constant dev PPL); a row named as one of the paper's
    reproduces it (row.paper.table3)."""
    paper = paper_table3()
    return [RunRecord(row, seed, Path(row), ok=True, eval={"dev_bleu": bleu, "dev_ppl": 5.0},
                      config={"row": {"name": row, "tables": ["table3"],
                                      "paper": {"table3": row if row in paper else None}}})
            for row, values in scores.items() for seed, bleu in zip(SEEDS, values)]


def planted(rng: np.random.Generator) -> dict[str, list[float]]:
    """Base with a large seed-to-seed spread, and rows whose difference from base is planted per seed:
    A1 (paper -0.9) 3 below base +- 0.1, C7 (paper +0.8) 3 below +- 0.1, B2 (paper -0.4) no effect +- 2,
    A3 (paper 0) 3 below, custom (no paper number) 3 above."""
    base = rng.normal(25.0, 3.0, len(SEEDS))  # seeds disagree a lot; paired differences cancel it
    return {"base": list(base), "A1": list(base - 3 + rng.normal(0, 0.1, 5)),
            "C7": list(base - 3 + rng.normal(0, 0.1, 5)), "B2": list(base + rng.normal(0, 2.0, 5)),
            "A3": list(base - 3 + rng.normal(0, 0.1, 5)), "custom": list(base + 3 + rng.normal(0, 0.1, 5))}


def brute_force_seeds(delta: float, sd: float, alpha: float) -> int:
    """The first n from 2 up whose paired t-test power reaches 0.8."""
    n = 2
    while paired_t_power(n, abs(delta) / sd, alpha) < 0.8:
        n += 1
    return n


def test_planted_effects_give_the_expected_verdicts_p_and_seeds():
    scores = planted(np.random.default_rng(0))
    rows = {r["row"]: r for r in build_table3(records(scores))}
    assert {name: r["verdict"] for name, r in rows.items()} == {
        "base": "—", "A1": "reproduced", "C7": "contradicted", "B2": "unresolved", "A3": "—", "custom": "higher"}
    others = ["A1", "C7", "B2", "A3", "custom"]
    p_t = [stats.ttest_rel(scores[name], scores["base"]).pvalue for name in others]
    assert [rows[name]["delta_bleu_p_seeds"] for name in others] == pytest.approx(p_t)
    assert [rows[name]["delta_bleu_p_holm"] for name in others] == pytest.approx(multipletests(p_t, method="holm")[1])
    assert all(rows[name]["delta_bleu_p_sign_flip"] == 2 / 32 for name in ("A1", "C7", "A3", "custom"))  # 5 seeds
    paper = paper_table3()
    for name in ("A1", "C7", "B2"):
        sd = np.std(np.subtract(scores[name], scores["base"]), ddof=1)
        paper_delta = paper[name]["bleu_dev"] - paper["base"]["bleu_dev"]
        assert rows[name]["delta_bleu_sd"] == pytest.approx(sd)
        assert rows[name]["seeds_needed"] == brute_force_seeds(paper_delta, sd, 0.05 / len(others))
    assert rows["B2"]["seeds_needed"] > 50  # paper -0.4 against a spread of 2: out of reach
    assert rows["A3"]["seeds_needed"] is None  # the paper shows no difference: nothing to detect
    custom_sd = np.std(np.subtract(scores["custom"], scores["base"]), ddof=1)  # planned against our own +3
    assert rows["custom"]["seeds_needed"] == brute_force_seeds(rows["custom"]["delta_bleu"], custom_sd,
                                                                0.05 / len(others))


def test_with_no_true_effect_the_table_rarely_calls_any_row_reproduced():
    """19 rows, 3 seeds, every row and base drawn alike (rows share base, as in the table): over 4000 tables the
    share with at least one `reproduced` (or `contradicted`) row stays within Holm's 5%; without the correction
    it would be several times that."""
    paper = paper_table3()
    names = [n for n in paper if n != "base"]
    deltas = {n: round(paper[n]["bleu_dev"] - paper["base"]["bleu_dev"], 4) for n in names}
    rng, sims = np.random.default_rng(7), 4000
    base = rng.normal(0.0, 1.0, size=(sims, 1, 3))
    rows_scores = rng.normal(0.0, 1.0, size=(sims, len(names), 3))
    diffs = rows_scores - base  # (sims, rows, seeds)
    p = stats.ttest_1samp(diffs, 0.0, axis=2).pvalue
    mean = diffs.mean(axis=2)
    any_reproduced = any_resolved = any_unadjusted = 0
    for s in range(sims):
        table = [dict(row=n, delta_bleu=float(mean[s, i]), delta_bleu_p_seeds=float(p[s, i]), delta_bleu_sd=None,
                      paper_delta_bleu=deltas[n]) for i, n in enumerate(names)]
        verdicts = [r["verdict"] for r in add_verdicts(table)]
        any_reproduced += "reproduced" in verdicts
        any_resolved += "reproduced" in verdicts or "contradicted" in verdicts
        any_unadjusted += any(r["delta_bleu_p_seeds"] < 0.05 and r["paper_delta_bleu"] != 0
                              and (r["delta_bleu"] > 0) == (r["paper_delta_bleu"] > 0) for r in table)
    assert len(names) == 19
    assert any_resolved / sims <= 0.05 + 0.015  # 3.4 standard errors of a 5% rate over 4000 tables
    assert any_reproduced / sims <= any_resolved / sims
    assert any_unadjusted / sims > 0.25  # what the table said before Holm
