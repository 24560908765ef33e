"""Table 3 (model variations, dev set): our rows over seeds beside the paper's, with differences from base and the
verdict each difference supports (aiayn.report.significance; docs/verdicts.md)."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from aiayn.report.collect import RunRecord, row_settings
from aiayn.report.formats import (
    DASH,
    Column,
    atomic_write_text,
    bracket,
    ci_cells,
    csv_columns,
    csv_text,
    half_width,
    latex_tabular,
    markdown_table,
    metrics,
    num,
    pvalue,
    shown,
    signed,
)
from aiayn.report.paper import paper_base_bleu, paper_table3
from aiayn.report.significance import (
    EQUIVALENCE,
    OWN,
    SEEDS_UP_TO,
    Design,
    family_level,
    kind_of,
    pooled_sd,
    seeds_needed,
    sign_flip_p,
    t_quantile,
    verdict,
)
from aiayn.report.stats import exp_or_none, mean_ci, paired_test

BASE = "base"


def _by_seed(records: Sequence[RunRecord], key: str) -> dict[int, float]:
    """One dev-set number by seed (eval.json's dev section: the last checkpoint, Table 3's protocol)."""
    return {r.seed: v for r in records if (v := r.score("dev", key)) is not None}


def _logs(by_seed: Mapping[int, float]) -> dict[int, float]:
    """log PPL by seed: the mean per-token loss, what perplexities are averaged and compared on."""
    return {s: math.log(v) for s, v in by_seed.items() if v > 0}


def _paper_columns(row: str | None, paper: Mapping[str, dict[str, Any]]) -> dict[str, float | None]:
    """The paper's dev BLEU/PPL/params for its Table 3 row `row`, its BLEU difference and PPL ratio to base."""
    if row is None or row not in paper:
        return dict(paper_bleu=None, paper_ppl=None, paper_params_m=None, paper_delta_bleu=None, paper_ppl_ratio=None)
    ref, base = paper[row], paper[BASE]
    # Rounded so that float noise (25.8 - 25.8 = 1e-15) never turns "no change" into a sign.
    return dict(
        paper_bleu=ref["bleu_dev"],
        paper_ppl=ref["ppl_dev"],
        paper_params_m=ref.get("params_m"),
        paper_delta_bleu=round(ref["bleu_dev"] - base["bleu_dev"], 4),
        paper_ppl_ratio=round(ref["ppl_dev"] / base["ppl_dev"], 4),
    )


def build_table3(records: Sequence[RunRecord], design: Design = Design()) -> list[dict[str, Any]]:
    """One flat row (the CSV's columns) per row name, in the order the records come, with its verdict."""
    by_row: dict[str, list[RunRecord]] = {}
    for rec in records:
        by_row.setdefault(rec.row, []).append(rec)
    paper = paper_table3()
    base_log_ppl = _logs(_by_seed([r for r in by_row.get(BASE, []) if r.ok], "ppl"))
    rows, bleu_by_row = [], {}
    for name, recs in by_row.items():
        meta = row_settings(recs)
        if meta and "table3" not in meta.get("tables", ()):
            continue
        ok = [r for r in recs if r.ok]
        # Departure: see docs/departures.md#table3-dev-sacrebleu (the paper's Table 3 BLEU is tokenized).
        bleu_by_row[name], log_ppl = _by_seed(ok, "bleu"), _logs(_by_seed(ok, "ppl"))
        bleu_ci, log_ppl_ci = mean_ci(bleu_by_row[name].values()), mean_ci(log_ppl.values())
        params = mean_ci([r.train["params"] / 1e6 for r in ok if r.train.get("params") is not None])
        averaged = sorted(
            {
                int(r.eval["dev"]["checkpoints_averaged"])
                for r in ok
                if r.eval["dev"].get("checkpoints_averaged") is not None
            }
        )
        out: dict[str, Any] = dict(
            row=name,
            n_seeds=len(ok),
            seeds=" ".join(str(r.seed) for r in ok),
            bleu_mean=bleu_ci.mean,
            bleu_ci95_low=bleu_ci.low,
            bleu_ci95_high=bleu_ci.high,
            ppl_gmean=exp_or_none(log_ppl_ci.mean),
            ppl_ci95_low=exp_or_none(log_ppl_ci.low),
            ppl_ci95_high=exp_or_none(log_ppl_ci.high),
            params_m=params.mean,
            checkpoints_averaged=" ".join(map(str, averaged)) or None,
            effect_of_interest_paper=meta.get("effect_of_interest"),
        )
        if name != BASE:
            d_log_ppl = paired_test(log_ppl, base_log_ppl)
            out.update(
                ppl_ratio=exp_or_none(d_log_ppl.mean_diff),
                ppl_ratio_ci95_low=exp_or_none(d_log_ppl.low),
                ppl_ratio_ci95_high=exp_or_none(d_log_ppl.high),
                delta_log_ppl=d_log_ppl.mean_diff,
                delta_log_ppl_p_seeds=d_log_ppl.p_value,
            )
        out.update(_paper_columns((meta.get("paper") or {}).get("table3"), paper))
        out["failed_runs"] = "; ".join(f"seed{r.seed}: {r.reason}" for r in recs if not r.ok) or None
        rows.append(out)
    decided = decide(
        bleu_by_row,
        {r["row"]: r["paper_delta_bleu"] for r in rows},
        {r["row"]: r["effect_of_interest_paper"] for r in rows},
        design,
    )
    return [{k: r.get(k) for k in KEYS} for r in (dict(r, **decided[r["row"]]) for r in rows)]


def decide(
    bleu: Mapping[str, Mapping[int, float]],
    paper_delta: Mapping[str, float | None],
    interest: Mapping[str, float | None],
    design: Design = Design(),
) -> dict[str, dict[str, Any]]:
    """Table 3's whole decision from dev BLEU by row and seed: each row's differences from base (paired by seed),
    family interval, verdict and planned seeds. `paper_delta` is each row's difference in the paper (None: a row
    the paper does not have), `interest` a user row's effect of interest (both in the paper's BLEU)."""
    base = bleu.get(BASE, {})
    rows = [
        dict(
            row=name,
            paper_delta_bleu=paper_delta.get(name),
            effect_of_interest_paper=interest.get(name),
            **({} if name == BASE else bleu_differences(scores, base)),
        )
        for name, scores in bleu.items()
    ]
    pilot = [v for s, v in base.items() if design.pilot_seeds is None or s in design.pilot_seeds]
    return {r["row"]: r for r in add_verdicts(rows, design, mean_ci(pilot).mean)}


def bleu_differences(bleu: Mapping[int, float], base_bleu: Mapping[int, float]) -> dict[str, Any]:
    """A row's ΔBLEU columns, paired by seed with base over the seeds both have: the mean, its 95% interval, the
    spread and number of pairs (what add_verdicts decides on), the t-test's and the sign-flip test's p."""
    d = paired_test(bleu, base_bleu)
    return dict(
        delta_bleu=d.mean_diff,
        delta_bleu_ci95_low=d.low,
        delta_bleu_ci95_high=d.high,
        delta_bleu_sd=d.sd,
        delta_bleu_n_pairs=d.n,
        delta_bleu_p_seeds=d.p_value,
        delta_bleu_p_sign_flip=sign_flip_p(d.diffs),
    )


def bleu_scale(design: Design, base_pilot_bleu: float | None, paper_base_bleu: float) -> float | None:
    """The factor from the paper's BLEU to this setting's: declared, 1 at the paper's setting, else our base's
    pilot dev BLEU over the paper's base (None without a base to scale by)."""
    if design.bleu_scale is not None:
        return design.bleu_scale
    if design.paper_setting:
        return 1.0
    return None if base_pilot_bleu is None else base_pilot_bleu / paper_base_bleu


def add_verdicts(
    rows: list[dict[str, Any]], design: Design = Design(), base_pilot_bleu: float | None = None
) -> list[dict[str, Any]]:
    """Give every row compared with base its family interval, verdict, the paper's difference at this setting
    (and whether the interval holds it) and the seeds its decision needs; `base_pilot_bleu` sets the scale.

    Reads each row's delta_bleu, delta_bleu_sd, delta_bleu_n_pairs, paper_delta_bleu and effect_of_interest_paper.
    """
    compared = [r for r in rows if r["row"] != BASE and (r.get("delta_bleu_n_pairs") or 0) >= 2]
    family = family_size(rows)
    level = family_level(design.alpha, family)
    scale = bleu_scale(design, base_pilot_bleu, paper_base_bleu())
    margin = None if scale is None else design.margin_bleu * scale
    spread, _ = pooled_sd([r["delta_bleu_sd"] for r in compared], [r["delta_bleu_n_pairs"] for r in compared])
    for row in rows:
        row.update(family_level=level if family else None, bleu_scale=scale, margin_bleu=margin, planning_sd=spread)
        if row["row"] == BASE:
            continue
        kind = kind_of(row.get("paper_delta_bleu"), design.margin_bleu)
        in_paper_units = (
            (row.get("effect_of_interest_paper") or design.margin_bleu) if kind == OWN else row["paper_delta_bleu"]
        )
        expected = None if scale is None else in_paper_units * scale
        low = high = None
        n, sd = row.get("delta_bleu_n_pairs") or 0, row.get("delta_bleu_sd")
        if n >= 2 and sd:
            half = float(t_quantile(level, n)) * sd / math.sqrt(n)
            low, high = row["delta_bleu"] - half, row["delta_bleu"] + half
        decided = verdict(kind, low, high, expected, margin)
        # An equivalence row plans for showing "no difference" when there is none; the others for their effect.
        planned = (
            seeds_needed(kind, 0.0 if kind == EQUIVALENCE else expected, margin, spread, level, design.power)
            if family
            else None
        )
        interim = not design.extended and planned is not None and n < planned <= design.max_seeds
        row.update(
            test=kind,
            delta_bleu_family_low=low,
            delta_bleu_family_high=high,
            verdict=decided.name,
            verdict_final=not interim,
            claim_low=decided.low,
            claim_high=decided.high,
            expected_delta_bleu=expected,
            seeds_planned=planned,
            paper_delta_in_interval=None
            if low is None or high is None or kind == OWN or expected is None
            else ("yes" if low <= expected <= high else "no"),
        )
    return rows


def family_size(rows: Sequence[Mapping[str, Any]]) -> int:
    """How many rows the family (Bonferroni's m) counts: those compared with base over at least two seeds."""
    return sum(r["row"] != BASE and (r.get("delta_bleu_n_pairs") or 0) >= 2 for r in rows)


def verdict_cell(row: Mapping[str, Any]) -> str:
    """The verdict, marked interim where the design's extension will give the row more seeds; a dash for base."""
    if row.get("verdict") is None:
        return DASH
    return row["verdict"] + ("" if row.get("verdict_final", True) else " (interim)")


def _delta_cell(row: Mapping[str, Any]) -> str:
    """ΔBLEU ± its 95% half-width, with the number of pairs when base has more seeds than the pairs."""
    text = ci_cells("delta_bleu", sign=True)[1](row)
    pairs = row.get("delta_bleu_n_pairs")
    return (
        text
        if row.get("delta_bleu") is None or pairs is None or pairs == row.get("base_seeds")
        else f"{text} ({pairs} pairs)"
    )


def _planned_cell(row: Mapping[str, Any]) -> str:
    if row["row"] == BASE or row.get("planning_sd") is None or row.get("expected_delta_bleu") is None:
        return DASH
    return f"> {SEEDS_UP_TO}" if row.get("seeds_planned") is None else str(row["seeds_planned"])


# Table 3's columns, in the order the table shows them; each carries its CSV keys (CSV and metrics.json derive from
# this one list: aiayn.report.formats).
COLUMNS: tuple[Column, ...] = (
    Column("Row", ("row",)),
    Column("n", ("n_seeds", "seeds", "checkpoints_averaged")),
    Column(
        "dev BLEU",
        *ci_cells("bleu"),
        metrics=(
            ("dev_bleu", lambda r: r["bleu_mean"]),
            ("dev_bleu_ci95", lambda r: half_width(r["bleu_ci95_low"], r["bleu_ci95_high"])),
        ),
    ),
    Column(
        "ΔBLEU ± 95%",
        ci_cells("delta_bleu", sign=True)[0] + ("delta_bleu_sd", "delta_bleu_n_pairs"),
        _delta_cell,
        metrics=(("delta_bleu", lambda r: r["delta_bleu"]),),
    ),
    Column(
        "family interval",
        ("delta_bleu_family_low", "delta_bleu_family_high", "family_level"),
        lambda r: bracket(r["delta_bleu_family_low"], r["delta_bleu_family_high"]),
    ),
    Column("p (t)", ("delta_bleu_p_seeds",), lambda r: pvalue(r["delta_bleu_p_seeds"])),
    Column("p (sign-flip)", ("delta_bleu_p_sign_flip",), lambda r: pvalue(r["delta_bleu_p_sign_flip"])),
    Column(
        "verdict",
        ("verdict", "verdict_final", "test", "claim_low", "claim_high"),
        verdict_cell,
        metrics=(("verdict", lambda r: None if r["verdict"] is None else verdict_cell(r)),),
    ),
    Column(
        "paper Δ",
        ("paper_bleu", "paper_delta_bleu"),
        lambda r: DASH if r["row"] == BASE else signed(r["paper_delta_bleu"], 1),
    ),
    Column(
        "Δ of interest",
        ("expected_delta_bleu", "effect_of_interest_paper", "bleu_scale", "margin_bleu"),
        lambda r: signed(r["expected_delta_bleu"], 2),
    ),
    Column("in interval", ("paper_delta_in_interval",), lambda r: r["paper_delta_in_interval"] or DASH),
    Column("seeds planned", ("seeds_planned", "planning_sd"), _planned_cell),
    Column(
        "dev PPL",
        ("ppl_gmean", "ppl_ci95_low", "ppl_ci95_high"),
        lambda r: bracket(r["ppl_ci95_low"], r["ppl_ci95_high"], mean=r["ppl_gmean"], sign=False),
    ),
    Column(
        "PPL ÷ base",
        ("ppl_ratio", "ppl_ratio_ci95_low", "ppl_ratio_ci95_high", "delta_log_ppl", "delta_log_ppl_p_seeds"),
        lambda r: bracket(r["ppl_ratio_ci95_low"], r["ppl_ratio_ci95_high"], mean=r["ppl_ratio"], sign=False, digits=3),
    ),
    Column("paper PPL", ("paper_ppl", "paper_ppl_ratio"), lambda r: num(r["paper_ppl"])),
    Column("params (M)", ("params_m",), lambda r: num(r["params_m"], 3)),
    Column("paper params (M)", ("paper_params_m",)),
    Column(None, ("failed_runs",)),  # listed below the markdown table
)
KEYS = csv_columns(COLUMNS)


def legend(context: Mapping[str, Any], rows: Sequence[Mapping[str, Any]], design: Design) -> str:
    """What the columns mean, at what scale and data they were measured, and how the verdicts were decided."""
    family = family_size(rows)
    base = next((r for r in rows if r["row"] == BASE), {})
    scale, margin, level = base.get("bleu_scale"), base.get("margin_bleu"), base.get("family_level")
    spread = base.get("planning_sd")
    if design.bleu_scale is not None:
        setting = (
            f"Effects are converted from the paper's BLEU by the declared factor {scale:g} (aggregate.bleu_scale)."
        )
    elif design.paper_setting:
        setting = "This is the paper's setting: the paper's BLEU differences are compared as they are."
    elif scale is not None:
        setting = (
            f"This is not the paper's setting: a verdict is about the direction at this scale, against the "
            f"paper's, and need not transfer (docs/departures.md#small-scales). The paper's differences and "
            f"the margin are converted by our base's pilot dev BLEU over the paper's 25.8: × {scale:.3f}."
        )
    else:
        setting = "Without base runs there is no scale to convert the paper's differences: no margin, no plan."
    margin_text = DASH if margin is None else f"±{margin:.2f}"
    level_text = DASH if level is None else f"{level:.4g}"
    stage = (
        "The design's one extension was made: every verdict is its final test."
        if design.extended
        else "Pilot stage: a verdict marked (interim) belongs to a row the plan gives more seeds "
        "(`python -m aiayn.seeds`); it is not the design's test. The other verdicts are final."
    )
    return (
        f"Scale: {context.get('scale') or DASH}; data: {context.get('data') or DASH}; seeds asked: "
        f"{context.get('seeds') or DASH}.\n\n"
        "dev BLEU is sacreBLEU on the dev set, every row and base alike from its last checkpoint, no averaging "
        "(section 6.2; Table 2 averages); mean ± half-width of a 95% Student-t interval over seeds. dev PPL is "
        "per-token (BPE) perplexity, the geometric mean over seeds with its 95% interval (seeds are averaged and "
        "compared on log PPL, the mean token loss); PPL ÷ base is the paired ratio. ΔBLEU is the row minus base "
        "over the seeds both have (the pairs are counted when base has more). Every test's unit is the training "
        "run (a seed), never the dev sentence; p (t) is the paired t-test over seeds and p (sign-flip) the exact "
        "permutation test (no normality; n seeds cannot give less than 2/2^n, 0.25 with 3); neither decides.\n\n"
        f"The verdict is decided by the family interval alone: the paired t interval at level {level_text} = "
        f"1 − {design.alpha:g}/{family} (Bonferroni over the {family} rows compared with base), so that all the "
        f"verdicts together are wrong with probability at most {design.alpha:g}. The margin δ is "
        f"{design.margin_bleu:g} BLEU at the paper's scale, {margin_text} here. A row whose paper Δ is within δ "
        f"claims no difference: reproduced when the interval lies inside ±δ, contradicted when it lies beyond. "
        f"Any other paper row: reproduced when the interval lies on the paper's side of 0, contradicted on the "
        f"other side or inside ±δ. A row the paper does not have: higher, lower, no difference (inside ±δ). "
        f"Otherwise unresolved; with one seed or identical differences there is no interval. {setting} "
        "Δ of interest: the paper's Δ at this setting (for a row the paper does not have, its "
        "row.effect_of_interest, default δ, converted alike); in interval: whether the family interval holds it "
        "(magnitude agreement).\n\n"
        f"seeds planned: the seeds at which the row's decision has {design.power:.0%} power at the family level, "
        f"planned from the pooled SD of all rows' paired differences "
        f"({DASH if spread is None else f'{spread:.3g}'}): to reproduce the Δ of interest, or for a "
        f"no-difference row to show it within ±δ when there is none; > {SEEDS_UP_TO}: out of reach. {stage}\n\n"
        f"sacreBLEU signature of dev BLEU: {context.get('dev_signature') or DASH}.\n"
    )


def write_table3(
    rows: Sequence[dict[str, Any]], out_dir: Path, context: Mapping[str, Any], design: Design = Design()
) -> list[Path]:
    """Write table3.md (with legend and failed runs), table3.csv and table3.tex (booktabs), atomically."""
    out_dir = Path(out_dir)
    base_seeds = next((r["n_seeds"] for r in rows if r["row"] == BASE), None)
    header, body = shown(COLUMNS, [dict(r, base_seeds=base_seeds) for r in rows])
    failed = [f"- {r['row']}: {r['failed_runs']}" for r in rows if r["failed_runs"]]
    md = (
        "# Table 3: variations on the base model\n\n"
        + markdown_table(header, body)
        + "\n"
        + legend(context, rows, design)
    )
    if failed:
        md += "\nMissing or failed runs:\n\n" + "\n".join(failed) + "\n"
    return [
        atomic_write_text(out_dir / "table3.md", md),
        atomic_write_text(out_dir / "table3.csv", csv_text(rows, KEYS)),
        atomic_write_text(out_dir / "table3.tex", latex_tabular(header, body, rule_after=(0,))),
    ]


def table3_metrics(rows: Sequence[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Table 3's headline numbers keyed by row, for `dvc exp show` (results/metrics.json): dev BLEU, its CI
    half-width, the difference from base and the verdict; the full table stays in table3.csv."""
    return {r["row"]: metrics(COLUMNS, r) for r in rows}
