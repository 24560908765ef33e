"""Table 3 (model variations, dev set): our rows over seeds beside the paper's, with differences from base."""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from aiayn.report.collect import RunRecord
from aiayn.report.formats import (DASH, atomic_write_text, csv_text, latex_tabular, markdown_table, mean_pm, num,
                                  pvalue, signed)
from aiayn.report.paper import paper_table3
from aiayn.report.significance import Bootstrap, seed_paired_bootstrap
from aiayn.report.stats import mean_ci, paired_test

BASE = "base"
COLUMNS = (
    "row", "n_seeds", "seeds", "bleu_mean", "bleu_ci95_low", "bleu_ci95_high",
    "ppl_mean", "ppl_ci95_low", "ppl_ci95_high", "params_m",
    "delta_bleu", "delta_bleu_ci95_low", "delta_bleu_ci95_high", "delta_bleu_p_seeds", "delta_bleu_n_pairs",
    "delta_bleu_p_bootstrap", "bootstrap_seeds",
    "delta_ppl", "delta_ppl_ci95_low", "delta_ppl_ci95_high", "delta_ppl_p_seeds",
    "paper_bleu", "paper_ppl", "paper_params_m", "paper_delta_bleu", "paper_delta_ppl",
    "sign_matches_paper", "ppl_sign_matches_paper", "failed_runs",
)


def sign_agreement(ours: float | None, paper: float | None) -> str | None:
    """"yes"/"no" when our difference from base has the paper's sign; None when either is 0 or undefined."""
    if ours is None or paper is None or ours == 0 or paper == 0:
        return None
    return "yes" if (ours > 0) == (paper > 0) else "no"


def _by_seed(records: Sequence[RunRecord], key: str) -> dict[int, float]:
    return {r.seed: v for r in records if (v := r.metric(key)) is not None}


def _paper_columns(row: str, paper: Mapping[str, dict[str, Any]]) -> dict[str, float | None]:
    """The paper's dev BLEU/PPL/params for a row, and its differences from the paper's base."""
    if row not in paper:
        return dict(paper_bleu=None, paper_ppl=None, paper_params_m=None, paper_delta_bleu=None, paper_delta_ppl=None)
    ref, base = paper[row], paper[BASE]
    # Rounded so that float noise (25.8 - 25.8 = 1e-15) never turns "no change" into a sign.
    return dict(paper_bleu=ref["bleu_dev"], paper_ppl=ref["ppl_dev"], paper_params_m=ref.get("params_m"),
                paper_delta_bleu=round(ref["bleu_dev"] - base["bleu_dev"], 4),
                paper_delta_ppl=round(ref["ppl_dev"] - base["ppl_dev"], 4))


def _bootstraps(by_row: Mapping[str, Sequence[RunRecord]], ref_file: Path | None, samples: int
                ) -> dict[str, Bootstrap]:
    """Seed-concatenated paired bootstrap of dev sacreBLEU against base for every other row."""
    others = [name for name in by_row if name != BASE]
    if ref_file is None or not Path(ref_file).is_file():
        return {name: Bootstrap(None, 0, f"dev references {ref_file} absent" if ref_file else "") for name in others}

    def files(name: str) -> dict[int, Path]:
        return {r.seed: f for r in by_row.get(name, []) if (f := r.hyps_file("valid")) is not None}

    return seed_paired_bootstrap(files(BASE), {name: files(name) for name in others}, Path(ref_file), samples)


def build_table3(records: Sequence[RunRecord], ref_file: Path | None, bootstrap_samples: int = 1000
                 ) -> list[dict[str, Any]]:
    """One flat row (the CSV's columns) per row name, in the order the records come."""
    by_row: dict[str, list[RunRecord]] = {}
    for rec in records:
        by_row.setdefault(rec.row, []).append(rec)
    paper = paper_table3()
    base_recs = [r for r in by_row.get(BASE, []) if r.ok]
    base_bleu, base_ppl = _by_seed(base_recs, "dev_bleu"), _by_seed(base_recs, "dev_ppl")
    boot = _bootstraps(by_row, ref_file, bootstrap_samples)
    rows = []
    for name, recs in by_row.items():
        ok = [r for r in recs if r.ok]
        # Departure: see docs/departures.md#table3-dev-sacrebleu (the paper's Table 3 BLEU is tokenized).
        bleu, ppl = _by_seed(ok, "dev_bleu"), _by_seed(ok, "dev_ppl")
        bleu_ci, ppl_ci = mean_ci(bleu.values()), mean_ci(ppl.values())
        params = mean_ci([r.train["params"] / 1e6 for r in ok if r.train.get("params") is not None])
        notes = [f"seed{r.seed}: {r.reason}" for r in recs if not r.ok]
        out: dict[str, Any] = dict(
            row=name, n_seeds=len(ok), seeds=" ".join(str(r.seed) for r in ok),
            bleu_mean=bleu_ci.mean, bleu_ci95_low=bleu_ci.low, bleu_ci95_high=bleu_ci.high,
            ppl_mean=ppl_ci.mean, ppl_ci95_low=ppl_ci.low, ppl_ci95_high=ppl_ci.high, params_m=params.mean,
        )
        if name != BASE:
            d_bleu, d_ppl = paired_test(bleu, base_bleu), paired_test(ppl, base_ppl)
            notes += [boot[name].note] if boot[name].note else []
            out.update(delta_bleu=d_bleu.mean_diff, delta_bleu_ci95_low=d_bleu.low, delta_bleu_ci95_high=d_bleu.high,
                       delta_bleu_p_seeds=d_bleu.p_value, delta_bleu_n_pairs=d_bleu.n,
                       delta_bleu_p_bootstrap=boot[name].p_value, bootstrap_seeds=boot[name].n_seeds,
                       delta_ppl=d_ppl.mean_diff, delta_ppl_ci95_low=d_ppl.low, delta_ppl_ci95_high=d_ppl.high,
                       delta_ppl_p_seeds=d_ppl.p_value)
        out.update(_paper_columns(name, paper))
        out["sign_matches_paper"] = sign_agreement(out.get("delta_bleu"), out["paper_delta_bleu"])
        out["ppl_sign_matches_paper"] = sign_agreement(out.get("delta_ppl"), out["paper_delta_ppl"])
        out["failed_runs"] = "; ".join(notes) or None
        rows.append({c: out.get(c) for c in COLUMNS})
    return rows


def _markdown_body(rows: Sequence[dict[str, Any]]) -> list[list[str]]:
    def p_int(x: Any) -> str:
        return DASH if x is None else str(x)

    return [[r["row"], str(r["n_seeds"]),
             mean_pm(r["bleu_mean"], r["bleu_ci95_low"], r["bleu_ci95_high"]),
             mean_pm(r["delta_bleu"], r["delta_bleu_ci95_low"], r["delta_bleu_ci95_high"], sign=True),
             pvalue(r["delta_bleu_p_seeds"]), pvalue(r["delta_bleu_p_bootstrap"]),
             num(r["paper_bleu"], 1), signed(r["paper_delta_bleu"], 1), r["sign_matches_paper"] or DASH,
             mean_pm(r["ppl_mean"], r["ppl_ci95_low"], r["ppl_ci95_high"]),
             mean_pm(r["delta_ppl"], r["delta_ppl_ci95_low"], r["delta_ppl_ci95_high"], sign=True),
             num(r["paper_ppl"]), num(r["params_m"], 3), p_int(r["paper_params_m"])] for r in rows]


HEADER = ("Row", "n", "dev BLEU", "ΔBLEU", "p (seeds)", "p (bootstrap)", "paper BLEU", "paper Δ", "same sign",
          "dev PPL", "ΔPPL", "paper PPL", "params (M)", "paper params (M)")


def legend(context: Mapping[str, Any]) -> str:
    """What the columns mean and at what scale and data they were measured."""
    return (
        f"Scale: {context.get('scale') or DASH}; data: {context.get('data') or DASH}; seeds asked: "
        f"{context.get('seeds') or DASH}.\n\n"
        "dev BLEU is sacreBLEU on the dev set (the paper's Table 3 reports tokenized BLEU on newstest2013); "
        "dev PPL is per-token (BPE) perplexity. Values are mean ± half-width of a 95% Student-t interval over "
        "seeds (no interval with one seed). ΔBLEU/ΔPPL are the row minus base over the seeds both have, with a "
        "paired t-test p over seeds and a paired bootstrap p (sacreBLEU, seed-concatenated dev hypotheses, "
        f"{context.get('bootstrap_samples', DASH)} resamples). 'same sign' says whether our ΔBLEU has the "
        "paper's sign (— when either is zero or undefined). At a reduced scale the absolute numbers are not "
        "comparable with the paper's; compare the differences from base.\n"
    )


def write_table3(rows: Sequence[dict[str, Any]], out_dir: Path, context: Mapping[str, Any]) -> list[Path]:
    """Write table3.md (with legend and failed runs), table3.csv and table3.tex (booktabs), atomically."""
    out_dir = Path(out_dir)
    body = _markdown_body(rows)
    failed = [f"- {r['row']}: {r['failed_runs']}" for r in rows if r["failed_runs"]]
    md = "# Table 3: variations on the base model\n\n" + markdown_table(HEADER, body) + "\n" + legend(context)
    if failed:
        md += "\nMissing or failed runs and skipped tests:\n\n" + "\n".join(failed) + "\n"
    return [atomic_write_text(out_dir / "table3.md", md),
            atomic_write_text(out_dir / "table3.csv", csv_text(rows, COLUMNS)),
            atomic_write_text(out_dir / "table3.tex", latex_tabular(HEADER, body, rule_after=(0,)))]
