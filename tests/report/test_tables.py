"""Tables 2 and 3 from fabricated run folders: missing runs, one-seed rows, CSV columns, sign agreement."""
from __future__ import annotations

import csv
import json

import pytest

from aiayn.report import aggregate, collect_runs
from aiayn.report.significance import seeds_needed
from aiayn.report.table2 import build_table2, table2_metrics
from aiayn.report.table3 import build_table3, sign_agreement, table3_metrics

T3_REQUIRED = ["row", "n_seeds", "bleu_mean", "bleu_ci95_low", "bleu_ci95_high", "ppl_mean", "ppl_ci95_low",
               "ppl_ci95_high", "params_m", "paper_bleu", "paper_ppl", "paper_params_m", "delta_bleu", "delta_bleu_sd",
               "delta_bleu_p_seeds", "delta_bleu_p_sign_flip", "delta_bleu_p_holm", "verdict", "seeds_needed",
               "sign_matches_paper"]


def test_sign_agreement():
    assert sign_agreement(-1.0, -0.9) == "yes"
    assert sign_agreement(0.4, -0.9) == "no"
    assert sign_agreement(0.4, 0.0) is None and sign_agreement(None, 1.0) is None and sign_agreement(0.0, 1.0) is None


def test_collect_reports_missing_and_failed_runs(fabricated, tmp_path):
    (fabricated["runs"] / "A1" / "seed3" / "eval.json").write_text('{"dev_bleu": "high"}')
    recs = {(r.row, r.seed): r for r in collect_runs(fabricated["runs"], ["A1", "D1"], [1, 2, 3])}
    assert recs[("A1", 1)].ok and recs[("D1", 1)].ok
    assert "eval.json is absent" in recs[("D1", 2)].reason
    assert "seed3 is missing" in recs[("D1", 3)].reason
    assert "eval.json: key 'dev_bleu'" in recs[("A1", 3)].reason and not recs[("A1", 3)].ok


def test_table3_rows(fabricated):
    recs = collect_runs(fabricated["runs"], fabricated["rows"], fabricated["seeds"])
    rows = {r["row"]: r for r in build_table3(recs)}
    base, a1, a3, c5, d1, custom = (rows[k] for k in ("base", "A1", "A3", "C5", "D1", "custom"))
    assert base["n_seeds"] == 3 and base["bleu_mean"] == pytest.approx(30.1667, abs=1e-4)
    assert base["bleu_ci95_low"] < 29.5 and base["bleu_ci95_high"] > 31.0
    assert base["delta_bleu"] is None and base["sign_matches_paper"] is None and base["verdict"] == "—"
    assert a1["delta_bleu"] == pytest.approx(-1.8) and a1["paper_delta_bleu"] == pytest.approx(-0.9)
    assert a1["sign_matches_paper"] == "yes" and a1["delta_bleu_p_seeds"] < 0.01
    assert a1["delta_bleu_sd"] == pytest.approx(0.1) and a1["delta_bleu_p_sign_flip"] == 0.25  # 3 seeds, one sign
    # Holm over the 3 rows with a p (A1, C5, custom: A3 has no spread, D1 one seed): custom's constant shift
    # (p 0) first, then A1 times 2, then C5 times 1.
    assert a1["delta_bleu_p_holm"] == pytest.approx(2 * a1["delta_bleu_p_seeds"]) and a1["verdict"] == "reproduced"
    assert a1["seeds_needed"] == seeds_needed(-0.9, 0.1, 0.05 / 3) == 3
    assert c5["sign_matches_paper"] == "no" and c5["paper_params_m"] == 168 and c5["verdict"] == "contradicted"
    assert c5["delta_bleu_p_holm"] == pytest.approx(c5["delta_bleu_p_seeds"])
    assert a3["paper_delta_bleu"] == 0 and a3["sign_matches_paper"] is None and a3["verdict"] == "—"
    assert a3["delta_bleu_p_seeds"] is None and a3["delta_bleu_p_holm"] is None and a3["seeds_needed"] is None
    assert d1["n_seeds"] == 1 and d1["bleu_mean"] == 28.0 and d1["verdict"] == "unresolved"
    assert d1["bleu_ci95_low"] is None and d1["delta_bleu_p_seeds"] is None and d1["delta_bleu"] == -2.0
    assert d1["delta_bleu_sd"] is None and d1["seeds_needed"] is None  # one seed: no spread to plan with
    assert "seed2" in d1["failed_runs"] and "seed3" in d1["failed_runs"]
    # A row the paper does not have: compared with base alone (a constant +0.5 over seeds: resolved, higher).
    assert custom["paper_bleu"] is None and custom["sign_matches_paper"] is None and custom["verdict"] == "higher"
    assert custom["delta_bleu_p_holm"] == 0.0 and custom["seeds_needed"] is None  # no spread to plan with
    assert custom["params_m"] == pytest.approx(0.123456)
    headline = table3_metrics(list(rows.values()))  # dvc exp show's columns: four numbers a row, no more
    assert headline["A1"] == {"dev_bleu": a1["bleu_mean"], "dev_bleu_ci95": pytest.approx(
        (a1["bleu_ci95_high"] - a1["bleu_ci95_low"]) / 2), "delta_bleu": a1["delta_bleu"], "verdict": "reproduced"}
    assert "delta_bleu" not in headline["base"] and set(headline["D1"]) == {"dev_bleu", "delta_bleu", "verdict"}


def test_table3_pairs_rows_with_their_own_seeds(fabricated):
    """A row given more seeds than another is compared with base on the seeds both have."""
    recs = collect_runs(fabricated["runs"], ["base", "A1", "C5"], {"base": [1, 2, 3], "A1": [1, 2, 3], "C5": [2, 3]})
    rows = {r["row"]: r for r in build_table3(recs)}
    assert rows["A1"]["delta_bleu_n_pairs"] == 3 and rows["C5"]["delta_bleu_n_pairs"] == 2
    assert rows["C5"]["seeds"] == "2 3" and rows["C5"]["delta_bleu"] == pytest.approx(-1.5)


def test_table2_rows(fabricated):
    recs = collect_runs(fabricated["runs"], ["base", "big"], fabricated["seeds"])
    rows = build_table2(recs, lengths=(10.0, 10.0), sustained_flops_per_device=1e9)
    ours = [r for r in rows if r["source"] == "ours"]
    assert [(r["system"], r["pair"], r["n_seeds"]) for r in ours] == [("Transformer (base model), ours", "en_de", 3)]
    assert ours[0]["paper_bleu"] == 27.3 and ours[0]["paper_train_flops"] == 3.3e18
    assert table2_metrics(rows) == {"base": {"test_bleu": ours[0]["bleu_mean"], "test_bleu_tok": ours[0]["bleu_tok_mean"]}}
    assert ours[0]["train_flops_estimated"] == 2.0 * 1 * 1e9  # wall time x devices x rate
    assert ours[0]["device_hours"] == pytest.approx(2.0 / 3600) and ours[0]["devices"] == "1x cpu"
    assert ours[0]["train_flops_counted"] > 0 and ours[0]["bleu_ci95_low"] is not None
    paper = {r["system"]: r for r in rows if r["source"] == "paper"}
    assert "Deep-Att + PosUnk" not in paper  # no EN-DE number in the paper
    assert paper["ConvS2S"]["paper_bleu"] == 25.16 and paper["ConvS2S"]["paper_train_flops"] == 9.6e18


def test_aggregate_writes_every_output(fabricated):
    out = fabricated["out"]
    summary = aggregate(fabricated["runs"], fabricated["rows"] + ["big"], fabricated["seeds"], fabricated["refs"],
                        out)
    names = sorted(p.name for p in out.iterdir())
    assert names == ["bleu_by_row.png", "curves.csv", "learning_curves.png", "sweep.csv", "sweep.md", "table2.csv",
                     "table2.md", "table2.tex", "table3.csv", "table3.md", "table3.tex"]
    assert summary["n_per_row"] == {"base": 3, "A1": 3, "A3": 3, "C5": 3, "D1": 1, "custom": 3, "big": 0}
    assert "big/seed1" in summary["failed"]
    json.dumps(summary)  # plain values, ready for logging
    with open(out / "table3.csv", newline="") as f:
        table = list(csv.DictReader(f))
    assert all(c in table[0] for c in T3_REQUIRED)
    d1 = next(r for r in table if r["row"] == "D1")
    assert d1["bleu_ci95_low"] == "" and d1["bleu_mean"] == "28.0"
    assert next(r for r in table if r["row"] == "big")["n_seeds"] == "0"
    md = (out / "table3.md").read_text()
    assert "| D1 | 1 | 28.00 |" in md and "tiny" in md and "not comparable" in md
    assert "| p (t) | p (sign-flip) | p (Holm) | verdict | seeds needed |" in md and "bootstrap" not in md
    assert "over the 3 rows compared with base" in md and "α = 0.05/3" in md
    assert "| -1.80 ± 0.25 | 0.001 | 0.250 | 0.002 | reproduced | 3 | 24.9 | -0.9 |" in md  # A1
    tex = (out / "table3.tex").read_text()
    assert r"\toprule" in tex and r"\bottomrule" in tex and r"$\pm$" in tex
    assert "3.3e+18" in (out / "table2.md").read_text()
    assert "| device-hours (measured) |" in (out / "table2.md").read_text()
    assert "| 0.000556 (1x cpu) |" in (out / "table2.md").read_text()  # 2 s of one CPU per run
    assert "sacreBLEU signature of dev BLEU: dev-sig." in md  # beside the scores it produced
    assert "sacreBLEU signature of test BLEU (sacre): sig." in (out / "table2.md").read_text()


def test_aggregate_without_any_run_or_reference(tmp_path):
    summary = aggregate(tmp_path / "runs", ["base", "A1"], [1, 2], {}, tmp_path / "results")
    assert summary["n_ok"] == 0 and summary["n_per_row"] == {"base": 0, "A1": 0}
    assert len(summary["outputs"]) == 11 and all((tmp_path / "results" / n).stat().st_size > 0
                                                 for n in ("table3.csv", "table2.md", "learning_curves.png"))
    assert (tmp_path / "results" / "curves.csv").read_text() == "row,seed,run,step,val_loss,val_ppl\n"
    assert "runs/A1/seed2 is missing" in (tmp_path / "results" / "table3.md").read_text()
