"""Table 3 (model variations, dev set): our rows over seeds beside the paper's, with differences from base."""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from aiayn.report.collect import RunRecord, row_settings
from aiayn.report.formats import (DASH, Column, atomic_write_text, ci_cells, csv_columns, csv_text, latex_tabular,
                                  half_width, markdown_table, metrics, num, pvalue, shown, signed)
from aiayn.report.paper import paper_table3
from aiayn.report.significance import ALPHA, POWER, holm, seeds_needed, sign_flip_p, verdict
from aiayn.report.stats import mean_ci, paired_test

BASE = "base"


def sign_agreement(ours: float | None, paper: float | None) -> str | None:
    """"yes"/"no" when our difference from base has the paper's sign; None when either is 0 or undefined."""
    if ours is None or paper is None or ours == 0 or paper == 0:
        return None
    return "yes" if (ours > 0) == (paper > 0) else "no"


def _by_seed(records: Sequence[RunRecord], key: str) -> dict[int, float]:
    return {r.seed: v for r in records if (v := r.metric(key)) is not None}


def _paper_columns(row: str | None, paper: Mapping[str, dict[str, Any]]) -> dict[str, float | None]:
    """The paper's dev BLEU/PPL/params for its Table 3 row `row`, and its differences from the paper's base."""
    if row not in paper:
        return dict(paper_bleu=None, paper_ppl=None, paper_params_m=None, paper_delta_bleu=None, paper_delta_ppl=None)
    ref, base = paper[row], paper[BASE]
    # Rounded so that float noise (25.8 - 25.8 = 1e-15) never turns "no change" into a sign.
    return dict(paper_bleu=ref["bleu_dev"], paper_ppl=ref["ppl_dev"], paper_params_m=ref.get("params_m"),
                paper_delta_bleu=round(ref["bleu_dev"] - base["bleu_dev"], 4),
                paper_delta_ppl=round(ref["ppl_dev"] - base["ppl_dev"], 4))


def build_table3(records: Sequence[RunRecord]) -> list[dict[str, Any]]:
    """One flat row (the CSV's columns) per row name, in the order the records come."""
    by_row: dict[str, list[RunRecord]] = {}
    for rec in records:
        by_row.setdefault(rec.row, []).append(rec)
    paper = paper_table3()
    base_recs = [r for r in by_row.get(BASE, []) if r.ok]
    base_bleu, base_ppl = _by_seed(base_recs, "dev_bleu"), _by_seed(base_recs, "dev_ppl")
    rows = []
    for name, recs in by_row.items():
        meta = row_settings(recs)
        if meta and "table3" not in meta.get("tables", ()):
            continue
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
            out.update(delta_bleu=d_bleu.mean_diff, delta_bleu_ci95_low=d_bleu.low, delta_bleu_ci95_high=d_bleu.high,
                       delta_bleu_sd=d_bleu.sd, delta_bleu_n_pairs=d_bleu.n, delta_bleu_p_seeds=d_bleu.p_value,
                       delta_bleu_p_sign_flip=sign_flip_p(d_bleu.diffs),
                       delta_ppl=d_ppl.mean_diff, delta_ppl_ci95_low=d_ppl.low, delta_ppl_ci95_high=d_ppl.high,
                       delta_ppl_p_seeds=d_ppl.p_value)
        out.update(_paper_columns((meta.get("paper") or {}).get("table3"), paper))
        out["sign_matches_paper"] = sign_agreement(out.get("delta_bleu"), out["paper_delta_bleu"])
        out["ppl_sign_matches_paper"] = sign_agreement(out.get("delta_ppl"), out["paper_delta_ppl"])
        out["failed_runs"] = "; ".join(notes) or None
        rows.append({k: out.get(k) for k in KEYS})
    return add_verdicts(rows)


def add_verdicts(rows: list[dict[str, Any]], alpha: float = ALPHA, power: float = POWER) -> list[dict[str, Any]]:
    """Holm-adjust the paired t-test p over every row compared with base, then give each row its verdict and the
    seeds a paired t-test needs for `power` against the paper's difference at alpha / m (m tests: Holm's strictest
    step, so enough whatever the other rows' p)."""
    adjusted = holm([r["delta_bleu_p_seeds"] for r in rows])
    family = sum(p is not None for p in adjusted)
    for row, p in zip(rows, adjusted):
        row["delta_bleu_p_holm"] = p
        row["verdict"] = verdict(row["paper_delta_bleu"], row["delta_bleu"], p, alpha)
        # A row the paper does not have is planned against our own observed difference.
        target = row["delta_bleu"] if row["paper_delta_bleu"] is None else row["paper_delta_bleu"]
        row["seeds_needed"] = seeds_needed(target, row["delta_bleu_sd"], alpha / max(family, 1), power)
    return rows


def family_size(rows: Sequence[dict[str, Any]]) -> int:
    """How many rows the Holm correction (and the power's alpha / m) counted."""
    return sum(r["delta_bleu_p_holm"] is not None for r in rows)


SEEDS_SHOWN_UP_TO = 50  # the markdown shows "> 50" beyond this; the CSV keeps the number


def _seeds_needed(n: int | None) -> str:
    return DASH if n is None else (f"> {SEEDS_SHOWN_UP_TO}" if n > SEEDS_SHOWN_UP_TO else str(n))


# Table 3's columns, in the order the table shows them; each carries its CSV keys (CSV and metrics.json derive from
# this one list: aiayn.report.formats).
COLUMNS: tuple[Column, ...] = (
    Column("Row", ("row",)),
    Column("n", ("n_seeds", "seeds")),
    Column("dev BLEU", *ci_cells("bleu"), metrics=(
        ("dev_bleu", lambda r: r["bleu_mean"]),
        ("dev_bleu_ci95", lambda r: half_width(r["bleu_ci95_low"], r["bleu_ci95_high"])))),
    Column("ΔBLEU", ci_cells("delta_bleu", sign=True)[0] + ("delta_bleu_sd", "delta_bleu_n_pairs"),
           ci_cells("delta_bleu", sign=True)[1], metrics=(("delta_bleu", lambda r: r["delta_bleu"]),)),
    Column("p (t)", ("delta_bleu_p_seeds",), lambda r: pvalue(r["delta_bleu_p_seeds"])),
    Column("p (sign-flip)", ("delta_bleu_p_sign_flip",), lambda r: pvalue(r["delta_bleu_p_sign_flip"])),
    Column("p (Holm)", ("delta_bleu_p_holm",), lambda r: pvalue(r["delta_bleu_p_holm"])),
    Column("verdict", ("verdict",), lambda r: r["verdict"], metrics=(("verdict", lambda r: r["verdict"]),)),
    Column("seeds needed", ("seeds_needed",), lambda r: _seeds_needed(r["seeds_needed"])),
    Column("paper BLEU", ("paper_bleu",), lambda r: num(r["paper_bleu"], 1)),
    Column("paper Δ", ("paper_delta_bleu", "sign_matches_paper"), lambda r: signed(r["paper_delta_bleu"], 1)),
    Column("dev PPL", *ci_cells("ppl")),
    Column("ΔPPL", ci_cells("delta_ppl", sign=True)[0] + ("delta_ppl_p_seeds",), ci_cells("delta_ppl", sign=True)[1]),
    Column("paper PPL", ("paper_ppl", "paper_delta_ppl", "ppl_sign_matches_paper"), lambda r: num(r["paper_ppl"])),
    Column("params (M)", ("params_m",), lambda r: num(r["params_m"], 3)),
    Column("paper params (M)", ("paper_params_m",)),
    Column(None, ("failed_runs",)),  # listed below the markdown table
)
KEYS = csv_columns(COLUMNS)


def legend(context: Mapping[str, Any], family: int) -> str:
    """What the columns mean, at what scale and data they were measured, and how many rows Holm counted."""
    return (
        f"Scale: {context.get('scale') or DASH}; data: {context.get('data') or DASH}; seeds asked: "
        f"{context.get('seeds') or DASH}.\n\n"
        "dev BLEU is sacreBLEU on the dev set (the paper's Table 3 reports tokenized BLEU on newstest2013); "
        "dev PPL is per-token (BPE) perplexity. Values are mean ± half-width of a 95% Student-t interval over "
        "seeds (no interval with one seed). ΔBLEU/ΔPPL are the row minus base over the seeds both have. "
        "Every test's unit is the training run (a seed), never the dev sentence: p (t) is the paired t-test over "
        "seeds; p (sign-flip) is the exact permutation test that flips the signs of the per-seed differences "
        "(no normality assumed; n seeds cannot give less than 2/2^n, 0.25 with 3). p (Holm) is p (t) adjusted "
        f"by Holm's method over the {family} rows compared with base, so that all the verdicts together are "
        f"wrong with probability at most {ALPHA:g}. verdict: reproduced (the paper's sign, p (Holm) < {ALPHA:g}), "
        f"contradicted (the opposite sign, p (Holm) < {ALPHA:g}), unresolved (otherwise), {DASH} (the paper "
        f"shows no difference); a row the paper does not have is higher or lower than base (p (Holm) < "
        f"{ALPHA:g}) or unresolved. seeds needed: how many seeds a two-sided paired "
        f"t-test needs to detect the paper's Δ (for a row the paper does not have: our own Δ) with {POWER:.0%} "
        f"power, given the standard deviation of our "
        f"per-seed differences, at α = {ALPHA:g}/{max(family, 1)} (Holm's strictest step, so enough whatever "
        f"the other rows' p); > {SEEDS_SHOWN_UP_TO} above {SEEDS_SHOWN_UP_TO}, {DASH} without a Δ to detect or "
        "without two seeds that differ. `python -m aiayn.seeds --until-resolved --max 10` runs the seeds "
        "that can resolve a row. At a reduced scale the absolute numbers are not comparable with the paper's; "
        "compare the differences from base.\n\n"
        f"sacreBLEU signature of dev BLEU: {context.get('dev_signature') or DASH}.\n"
    )


def write_table3(rows: Sequence[dict[str, Any]], out_dir: Path, context: Mapping[str, Any]) -> list[Path]:
    """Write table3.md (with legend and failed runs), table3.csv and table3.tex (booktabs), atomically."""
    out_dir = Path(out_dir)
    header, body = shown(COLUMNS, rows)
    failed = [f"- {r['row']}: {r['failed_runs']}" for r in rows if r["failed_runs"]]
    md = ("# Table 3: variations on the base model\n\n" + markdown_table(header, body) + "\n"
          + legend(context, family_size(rows)))
    if failed:
        md += "\nMissing or failed runs:\n\n" + "\n".join(failed) + "\n"
    return [atomic_write_text(out_dir / "table3.md", md),
            atomic_write_text(out_dir / "table3.csv", csv_text(rows, KEYS)),
            atomic_write_text(out_dir / "table3.tex", latex_tabular(header, body, rule_after=(0,)))]


def table3_metrics(rows: Sequence[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Table 3's headline numbers keyed by row, for `dvc exp show` (results/metrics.json): dev BLEU, its CI
    half-width, the difference from base and the verdict; the full table stays in table3.csv."""
    return {r["row"]: metrics(COLUMNS, r) for r in rows}
