"""Tables 2 and 3 from fabricated run folders: missing runs, one-seed rows, CSV columns, each table's protocol."""

from __future__ import annotations

import csv
import json
import math

import pytest
import yaml
from scipy import stats
from tests.report.conftest import write_run

from aiayn.report.collect import collect_runs
from aiayn.report.summary import write_tables
from aiayn.report.table2 import build_table2, table2_metrics, write_table2
from aiayn.report.table3 import build_table3, table3_metrics, write_table3
from aiayn.verdicts.significance import DIFFERENCE, Design, seeds_needed, t_quantile

T3_REQUIRED = [
    "row",
    "n_seeds",
    "checkpoints_averaged",
    "bleu_mean",
    "bleu_ci95_low",
    "bleu_ci95_high",
    "ppl_gmean",
    "ppl_ci95_low",
    "ppl_ci95_high",
    "params_m",
    "paper_bleu",
    "paper_ppl",
    "paper_params_m",
    "delta_bleu",
    "delta_bleu_sd",
    "delta_bleu_n_pairs",
    "delta_bleu_family_low",
    "delta_bleu_family_high",
    "family_level",
    "delta_bleu_p_seeds",
    "delta_bleu_p_sign_flip",
    "verdict",
    "verdict_final",
    "test",
    "claim_low",
    "claim_high",
    "expected_delta_bleu",
    "margin_bleu",
    "bleu_scale",
    "paper_delta_in_interval",
    "seeds_planned",
    "planning_sd",
    "ppl_ratio",
    "delta_log_ppl",
    "paper_ppl_ratio",
    "delta_log_ppl_sd",
    "delta_log_ppl_family_low",
    "delta_log_ppl_family_high",
    "verdict_ppl",
    "test_ppl",
    "claim_ppl_low",
    "claim_ppl_high",
    "expected_delta_log_ppl",
    "margin_log_ppl",
    "ppl_scale",
    "paper_ppl_in_interval",
    "seeds_planned_bleu",
    "seeds_planned_ppl",
    "planning_sd_ppl",
]


def test_collect_reports_missing_and_failed_runs(fabricated, tmp_path):
    (fabricated["runs"] / "A1" / "seed3" / "eval.json").write_text('{"dev": {"bleu": "high"}}')
    (fabricated["runs"] / "A1" / "seed2" / "eval.json").write_text('{"dev_bleu": 20.0}')  # an older stage's layout
    recs = {(r.row, r.seed): r for r in collect_runs(fabricated["runs"], ["A1", "D1"], [1, 2, 3])}
    assert recs[("A1", 1)].ok and recs[("D1", 1)].ok
    assert "eval.json is absent" in recs[("D1", 2)].reason
    assert "D1/seed3/eval.json is absent (not trained or not evaluated)" in recs[("D1", 3)].reason
    assert "eval.json: key 'dev.bleu' is 'high'" in recs[("A1", 3)].reason and not recs[("A1", 3)].ok
    assert "no 'dev' section" in recs[("A1", 2)].reason and "rerun the evaluate stage" in recs[("A1", 2)].reason


def test_table3_rows(fabricated):
    """The fabricated runs at base BLEU ~30 (scale 30.17/25.8, margin 0.58): A1 -1.8 (paper -0.9), C5 -1.4 growing
    with the seed (paper +0.2: an equivalence row), A3 identical to base, D1 one seed, custom a constant +0.5."""
    recs = collect_runs(fabricated["runs"], fabricated["rows"], fabricated["seeds"])
    rows = {r["row"]: r for r in build_table3(recs, Design(pilot_seeds=(1, 2, 3)))}
    base, a1, a3, c5, d1, custom = (rows[k] for k in ("base", "A1", "A3", "C5", "D1", "custom"))
    assert base["n_seeds"] == 3 and base["bleu_mean"] == pytest.approx(30.1667, abs=1e-4)
    assert base["bleu_ci95_low"] < 29.5 and base["bleu_ci95_high"] > 31.0 and base["checkpoints_averaged"] == "1"
    assert base["delta_bleu"] is None and base["verdict"] is None and base["seeds_planned"] is None
    assert base["ppl_gmean"] == pytest.approx((5.0 * 4.9 * 5.1) ** (1 / 3))  # the geometric mean
    scale = base["bleu_mean"] / 25.8
    assert base["bleu_scale"] == pytest.approx(scale) and base["margin_bleu"] == pytest.approx(0.5 * scale)
    assert a1["delta_bleu"] == pytest.approx(-1.8) and a1["paper_delta_bleu"] == pytest.approx(-0.9)
    assert a1["expected_delta_bleu"] == pytest.approx(-0.9 * scale) and a1["test"] == "difference"
    assert a1["delta_bleu_sd"] == pytest.approx(0.1) and a1["delta_bleu_p_sign_flip"] == 0.25  # 3 seeds, one sign
    # The family: every claim over two or more pairs, BLEU and PPL (A1, C5, A3, custom; D1 has one): Bonferroni's m
    # is 8. A3's differences are all 0 and custom's all +0.5: counted, with no interval (no spread to test against).
    assert a1["family_level"] == pytest.approx(1 - 0.05 / 8)
    half = t_quantile(1 - 0.05 / 8, 3) * 0.1 / math.sqrt(3)
    assert (a1["delta_bleu_family_low"], a1["delta_bleu_family_high"]) == pytest.approx((-1.8 - half, -1.8 + half))
    assert a1["verdict"] == "reproduced" and (a1["claim_low"], a1["claim_high"]) == (-math.inf, 0.0)
    assert a1["paper_delta_in_interval"] == "no"  # -1.8 ± 0.56 does not hold -0.9 x 1.17
    assert c5["test"] == "equivalence" and c5["paper_params_m"] == 168 and c5["verdict"] == "unresolved"
    assert a3["paper_delta_bleu"] == 0 and a3["test"] == "equivalence" and a3["verdict"] == "unresolved"
    assert a3["delta_bleu_p_seeds"] is None and a3["delta_bleu_family_low"] is None  # identical: no interval
    assert d1["n_seeds"] == 1 and d1["bleu_mean"] == 28.0 and d1["verdict"] == "unresolved"
    assert d1["bleu_ci95_low"] is None and d1["delta_bleu_p_seeds"] is None and d1["delta_bleu"] == -2.0
    assert d1["delta_bleu_sd"] is None and d1["family_level"] == pytest.approx(1 - 0.05 / 8)
    assert "seed2" in d1["failed_runs"] and "seed3" in d1["failed_runs"]
    # A row the paper does not have, planned for the margin (its user stated no effect of interest).
    assert custom["paper_bleu"] is None and custom["test"] == "own" and custom["verdict"] == "unresolved"
    assert custom["expected_delta_bleu"] == pytest.approx(0.5 * scale) and custom["paper_delta_in_interval"] is None
    assert custom["params_m"] == pytest.approx(0.123456)
    # PPL's claims, on log PPL: A1's PPL is about 8% above base's (the paper's 5.29 / 4.92 = 1.075, a difference
    # beyond the 2% margin), so reproduced; C5's is 4% above, where the paper's falls (4.66): contradicted.
    log_scale = math.log(base["ppl_gmean"]) / math.log(4.92)
    assert base["ppl_scale"] == pytest.approx(log_scale) and base["margin_log_ppl"] == pytest.approx(
        math.log(1.02) * log_scale
    )
    assert a1["test_ppl"] == "difference" and a1["verdict_ppl"] == "reproduced" and a1["claim_ppl_low"] == 0.0
    assert a1["ppl_ratio"] == pytest.approx(math.exp(a1["delta_log_ppl"])) and 1.07 < a1["ppl_ratio"] < 1.09
    assert a1["expected_delta_log_ppl"] == pytest.approx(math.log(5.29 / 4.92) * log_scale, abs=1e-5)
    assert c5["test_ppl"] == "difference" and c5["verdict_ppl"] == "contradicted"
    assert a3["test_ppl"] == "equivalence" and a3["verdict_ppl"] == "unresolved"  # identical PPLs: no interval
    assert custom["test_ppl"] == "own" and d1["verdict_ppl"] == "unresolved"
    # Planned from the median of the rows' variances over the chi-square median (A1's 0.1 and C5's 0.2 SD, 2 df
    # each; A3's and custom's identical differences say nothing of the noise and are left out).
    assert a1["planning_sd"] == pytest.approx(math.sqrt((0.01 + 0.04) / 2 / (stats.chi2.median(2) / 2)))
    assert a1["seeds_planned_bleu"] == seeds_needed(
        DIFFERENCE, a1["expected_delta_bleu"], a1["margin_bleu"], a1["planning_sd"], 1 - 0.05 / 8
    )
    assert a1["seeds_planned"] == max(p for p in (a1["seeds_planned_bleu"], a1["seeds_planned_ppl"]) if p <= 10)
    assert a1["seeds_planned"] == 4 and not a1["verdict_final"]  # BLEU's claim plans a fourth seed: interim
    headline = table3_metrics(list(rows.values()))  # dvc exp show's columns: six numbers a row, no more
    assert headline["A1"] == {
        "dev_bleu": a1["bleu_mean"],
        "dev_bleu_ci95": pytest.approx((a1["bleu_ci95_high"] - a1["bleu_ci95_low"]) / 2),
        "delta_bleu": a1["delta_bleu"],
        "verdict": "reproduced (interim)",
        "ppl_ratio": a1["ppl_ratio"],
        "verdict_ppl": "reproduced (interim)",
    }
    assert set(headline["base"]) == {"dev_bleu", "dev_bleu_ci95"}
    assert set(headline["D1"]) == {"dev_bleu", "delta_bleu", "verdict", "ppl_ratio", "verdict_ppl"}


def test_table3_pairs_rows_with_their_own_seeds(fabricated, tmp_path):
    """A row given more seeds than another is compared with base on the seeds both have."""
    recs = collect_runs(fabricated["runs"], ["base", "A1", "C5"], {"base": [1, 2, 3], "A1": [1, 2, 3], "C5": [2, 3]})
    rows = {r["row"]: r for r in build_table3(recs)}
    assert rows["A1"]["delta_bleu_n_pairs"] == 3 and rows["C5"]["delta_bleu_n_pairs"] == 2
    assert rows["C5"]["seeds"] == "2 3" and rows["C5"]["delta_bleu"] == pytest.approx(-1.5)
    # Base's mean is over 3 seeds, C5's difference over 2 pairs: the ΔBLEU cell says so.
    write_table3(list(rows.values()), tmp_path, {})
    shown = {
        line.split(" | ")[0][2:]: line
        for line in (tmp_path / "table3.md").read_text().splitlines()
        if line.startswith("| ")
    }
    assert "-1.50 ± 1.27 (2 pairs)" in shown["C5"] and "pairs" not in shown["A1"]


def test_table2_rows(fabricated):
    recs = collect_runs(fabricated["runs"], ["base", "big"], fabricated["seeds"])
    rows = build_table2(recs, lengths=(10.0, 10.0), sustained_flops_per_device=1e9)
    ours = [r for r in rows if r["source"] == "ours"]
    assert [(r["system"], r["pair"], r["n_seeds"]) for r in ours] == [("Transformer (base model), ours", "en_de", 3)]
    assert ours[0]["bleu_mean"] == pytest.approx(29.1667, abs=1e-4)  # the test section's, not dev's 30.17
    assert ours[0]["checkpoints_averaged"] == "5"  # Table 2's protocol, recorded apart from Table 3's
    assert ours[0]["paper_bleu"] == 27.3 and ours[0]["paper_train_flops"] == 3.3e18
    assert table2_metrics(rows) == {
        "base": {"test_bleu": ours[0]["bleu_mean"], "test_bleu_tok": ours[0]["bleu_tok_mean"]}
    }
    assert ours[0]["train_flops_estimated"] == 2.0 * 1 * 1e9  # wall time x devices x rate
    assert ours[0]["device_hours"] == pytest.approx(2.0 / 3600) and ours[0]["devices"] == "1x cpu"
    assert ours[0]["train_flops_counted"] > 0 and ours[0]["bleu_ci95_low"] is not None
    paper = {r["system"]: r for r in rows if r["source"] == "paper"}
    assert "Deep-Att + PosUnk" not in paper  # no EN-DE number in the paper
    assert paper["ConvS2S"]["paper_bleu"] == 25.16 and paper["ConvS2S"]["paper_train_flops"] == 9.6e18


def test_table2_on_multi30k_lists_its_published_results(tmp_path):
    """Runs on Multi30k sit beside Multi30k's published systems (their BLEU in the lc-tok column, cited in the
    legend), not beside the paper's newstest2014 numbers, and claim no paper BLEU of their own."""
    runs = tmp_path / "runs"
    for seed, bleu in ((1, 40.0), (2, 41.0)):
        path = write_run(runs, "base", seed, dev_bleu=bleu, dev_ppl=5.0)
        config = yaml.safe_load((path / "config.yaml").read_text())
        config["data"] = dict(name="multi30k", form="lc.norm.tok", src_lang="en", tgt_lang="de")
        (path / "config.yaml").write_text(yaml.safe_dump(config))
        ev = json.loads((path / "eval.json").read_text())
        ev["test"]["bleu_lc_tok"] = bleu + 0.5
        (path / "eval.json").write_text(json.dumps(ev))
    rows = build_table2(collect_runs(runs, ["base"], [1, 2]), lengths=(10.0, 10.0))
    assert {r["source"] for r in rows} == {"ours", "published"}
    ours = next(r for r in rows if r["source"] == "ours")
    assert ours["bleu_lc_tok_mean"] == pytest.approx(41.0) and ours["paper_bleu"] is None
    wu = next(r for r in rows if r["system"].startswith("Transformer-tiny"))
    assert wu["bleu_lc_tok_mean"] == 41.02 and "Revisit-MMT" in wu["reference"] and wu["bleu_mean"] is None
    lh = next(r for r in rows if "Libovický" in r["system"])
    assert (lh["bleu_lc_tok_ci95_low"], lh["bleu_lc_tok_ci95_high"]) == pytest.approx((37.5, 39.1))
    write_table2(rows, tmp_path, {})
    md = (tmp_path / "table2.md").read_text()
    assert "| Transformer-tiny (Wu et al. 2021) |" in md and "41.02" in md and "ConvS2S" not in md
    assert "- Transformer-tiny (Wu et al. 2021): Wu et al. 2021" in md
    # The aggregate's footer names the data's form (data=multi30k_tok), not only its name.
    summary = write_tables(runs, ["base"], [1, 2], {}, tmp_path / "out")
    assert summary["context"]["data"] == "multi30k (lc.norm.tok)"
    table2_md = (tmp_path / "out" / "table2.md").read_text()
    assert "data: multi30k (lc.norm.tok); float path: AVX2 kernels, MKL_CBWR=AVX2, 1 thread." in table2_md


def test_aggregate_writes_every_output(fabricated):
    out = fabricated["out"]
    summary = write_tables(
        fabricated["runs"], fabricated["rows"] + ["big"], fabricated["seeds"], fabricated["refs"], out
    )
    names = sorted(p.name for p in out.iterdir())
    assert names == [
        "claims.png",
        "curves.csv",
        "learning_curves.png",
        "plan.json",
        "sweep.csv",
        "sweep.md",
        "table2.csv",
        "table2.md",
        "table2.tex",
        "table3.csv",
        "table3.md",
        "table3.tex",
    ]
    assert summary["n_per_row"] == {"base": 3, "A1": 3, "A3": 3, "C5": 3, "D1": 1, "custom": 3, "big": 0}
    assert "big-s1" in summary["failed"]
    json.dumps(summary)  # plain values, ready for logging
    with open(out / "table3.csv", newline="") as f:
        table = list(csv.DictReader(f))
    assert all(c in table[0] for c in T3_REQUIRED)
    d1 = next(r for r in table if r["row"] == "D1")
    assert d1["bleu_ci95_low"] == "" and d1["bleu_mean"] == "28.0"
    assert next(r for r in table if r["row"] == "big")["n_seeds"] == "0"
    md = (out / "table3.md").read_text()
    assert "| D1 | 1 | 28.00 |" in md and "tiny" in md and "not the paper's setting" in md
    assert "| p (t) | family interval | paper Δ (here) | BLEU verdict | dev PPL | PPL ÷ base |" in md
    assert "| family interval (÷) | paper ÷ (here) | PPL verdict | seeds planned |" in md
    assert "Bonferroni over the 8 claims of the table" in md and "bootstrap" not in md
    assert "direction at this scale, against the paper's" in md and "no averaging" in md
    a1 = next(line for line in md.splitlines() if line.startswith("| A1 |"))
    assert "| -1.80 ± 0.25 | 0.001 | [-2.53, -1.07] | -0.9 (-1.05) | reproduced (interim) |" in a1
    assert "| 1.080 [1.076, 1.084] | [1.068, 1.092] | 1.075 (1.076) | reproduced (interim) | 4 |" in a1
    tex = (out / "table3.tex").read_text()
    assert r"\toprule" in tex and r"\bottomrule" in tex and r"$\pm$" in tex
    assert "3.3e+18" in (out / "table2.md").read_text()
    assert "| device-hours (measured) |" in (out / "table2.md").read_text()
    assert "| 0.000556 (1x cpu) |" in (out / "table2.md").read_text()  # 2 s of one CPU per run
    assert "sacreBLEU signature of dev BLEU: dev-sig." in md  # beside the scores it produced
    assert "sacreBLEU signature of test BLEU (sacre): sig." in (out / "table2.md").read_text()


def test_aggregate_without_any_run_or_reference(tmp_path):
    summary = write_tables(tmp_path / "runs", ["base", "A1"], [1, 2], {}, tmp_path / "results")
    assert summary["n_ok"] == 0 and summary["n_per_row"] == {"base": 0, "A1": 0}
    assert len(summary["outputs"]) == 12 and all(
        (tmp_path / "results" / n).stat().st_size > 0 for n in ("table3.csv", "table2.md", "learning_curves.png")
    )
    assert (tmp_path / "results" / "curves.csv").read_text() == "row,seed,run,step,val_loss,val_ppl\n"
    assert "runs/A1/seed2/eval.json is absent" in (tmp_path / "results" / "table3.md").read_text()


def test_table3_shows_each_rows_runaways_and_how_its_dev_checkpoints_were_averaged(fabricated):
    """eval.json's runaway counts (aiayn.eval.runaways) appear beside each row's BLEU, summed over seeds with the
    seeds that have any; a run evaluated before they were counted shows a dash, not a zero. The legend says which
    checkpoints the dev numbers come from."""
    for seed, count in ((1, 0), (2, 3), (3, 1)):
        path = fabricated["runs"] / "A1" / f"seed{seed}" / "eval.json"
        record = json.loads(path.read_text())
        record["dev"]["runaways"] = {"count": count, "at_length_limit": count, "repeating": 0, "lines": []}
        record["dev"]["checkpoints_averaged"] = 5
        path.write_text(json.dumps(record))
    for seed in (1, 2, 3):
        path = fabricated["runs"] / "base" / f"seed{seed}" / "eval.json"
        record = json.loads(path.read_text())
        record["dev"]["runaways"] = {"count": 0, "at_length_limit": 0, "repeating": 0, "lines": []}
        path.write_text(json.dumps(record))
    recs = collect_runs(fabricated["runs"], fabricated["rows"], fabricated["seeds"])
    rows = {r["row"]: r for r in build_table3(recs, Design(pilot_seeds=(1, 2, 3)))}
    assert (rows["A1"]["runaways"], rows["A1"]["runaways_by_seed"]) == (4, "1:0 2:3 3:1")
    assert rows["base"]["runaways"] == 0 and rows["A3"]["runaways"] is None  # A3's runs never counted them
    write_table3(list(rows.values()), fabricated["out"], {"scale": "tiny"})
    md = (fabricated["out"] / "table3.md").read_text()
    header = next(line for line in md.splitlines() if line.startswith("| Row"))
    column = [c.strip() for c in header.split("|")].index("runaways")
    cells = {
        line.split("|")[1].strip(): line.split("|")[column].strip()
        for line in md.splitlines()
        if line.startswith("| ") and not line.startswith("| Row")
    }
    assert cells["A1"] == "4 (s2: 3, s3: 1)" and cells["base"] == "0" and cells["A3"] == "—"
    assert "from the average of its last 1 or 5 checkpoints (row.dev_average_last)" in md
    assert json.loads(json.dumps(table3_metrics(list(rows.values()))))["A1"]["dev_runaways"] == 4


def test_the_plan_is_handed_over_typed_as_table3_decided_it(fabricated):
    """results/plan.json holds, for every row but base, the plan Table 3's columns show (seeds planned, each claim's
    test, difference of interest, margin, planning spread and verdict), read back into the same objects."""
    from aiayn.verdicts.decide import PlanRecord

    out = fabricated["out"]
    summary = write_tables(fabricated["runs"], fabricated["rows"], fabricated["seeds"], fabricated["refs"], out)
    plan = PlanRecord.from_json(json.loads((out / "plan.json").read_text()))
    assert plan == PlanRecord.of(summary["table3"]) and "base" not in plan.rows
    rows = {r["row"]: r for r in summary["table3"]}
    for row, entry in plan.rows.items():
        assert entry.seeds_planned == rows[row].get("seeds_planned")
        bleu = entry.claims["bleu"]
        shown = (rows[row]["test"], rows[row]["verdict"], rows[row]["margin_bleu"])
        assert (bleu.test, bleu.verdict, bleu.margin) == shown
    with pytest.raises(ValueError, match="not a plan record"):
        PlanRecord.from_json({"rows": {}}, "x.json")


def test_a_row_planned_beyond_max_seeds_says_it_stays_where_it_is():
    from aiayn.report.table3 import _planned_cell

    row = {"row": "A1", "planning_sd": 0.5, "seeds_planned": 11, "seeds_max": 10, "n_seeds": 4}
    assert _planned_cell(row) == "11 (> 10: stays at 4)"
    assert _planned_cell(row | {"seeds_planned": 8}) == "8"
    assert _planned_cell(row | {"seeds_planned": None}).startswith("> ")
