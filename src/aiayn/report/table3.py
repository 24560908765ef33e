"""Table 3 (model variations, dev set): our rows over seeds beside the paper's, with differences from base and the
verdict each difference supports (aiayn.verdicts.significance; docs/verdicts.md)."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from aiayn.io import atomic_write_text
from aiayn.paper import paper_table3
from aiayn.report.collect import RunRecord, row_settings
from aiayn.report.formats import (
    DASH,
    Column,
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
from aiayn.verdicts.decide import BASE, BLEU, PPL, Measure, claim_count, decide
from aiayn.verdicts.significance import CONTRADICTED, REPRODUCED, SEEDS_UP_TO, UNRESOLVED, Design
from aiayn.verdicts.stats import exp_or_none, mean_ci, score_columns

__all__ = ["BASE", "build_table3", "table3_metrics", "write_table3"]


def _by_seed(records: Sequence[RunRecord], key: str) -> dict[int, float]:
    """One dev-set number by seed (eval.json's dev section, Table 3's protocol)."""
    return {r.seed: v for r in records if (v := r.score("dev", key)) is not None}


def runaways_by_seed(records: Sequence[RunRecord], section: str = "dev") -> dict[int, int]:
    """Each seed's runaway hypotheses in eval.json's `section` (aiayn.eval.runaways), for the runs that counted
    them."""
    out = {}
    for r in records:
        counted = (r.eval.get(section) or {}).get("runaways") if r.ok else None
        if isinstance(counted, Mapping) and isinstance(counted.get("count"), int):
            out[r.seed] = counted["count"]
    return out


def runaway_cell(total: int | None, by_seed: str | None) -> str:
    """A row's runaways over its seeds, with the seeds that have any: "16 (s2: 2, s4: 14)"; "0"; a dash when not
    counted."""
    if total is None:
        return DASH
    seeds = [pair.split(":") for pair in (by_seed or "").split()]
    shown = ", ".join(f"s{seed}: {n}" for seed, n in seeds if n != "0")
    return f"{total} ({shown})" if shown else str(total)


def _logs(by_seed: Mapping[int, float]) -> dict[int, float]:
    """log PPL by seed: the mean per-token loss, what perplexities are averaged and compared on."""
    return {s: math.log(v) for s, v in by_seed.items() if v > 0}


def _paper_columns(row: str | None, paper: Mapping[str, dict[str, Any]]) -> dict[str, float | None]:
    """The paper's dev BLEU/PPL/params for its Table 3 row `row`, its BLEU difference and PPL ratio to base (and
    that ratio's log, what the PPL claim compares)."""
    if row is None or row not in paper:
        return dict.fromkeys(
            ("paper_bleu", "paper_ppl", "paper_params_m", "paper_delta_bleu", "paper_ppl_ratio", "paper_delta_log_ppl")
        )
    ref, base = paper[row], paper[BASE]
    # Rounded so that float noise (25.8 - 25.8 = 1e-15) never turns "no change" into a sign.
    return dict(
        paper_bleu=ref["bleu_dev"],
        paper_ppl=ref["ppl_dev"],
        paper_params_m=ref.get("params_m"),
        paper_delta_bleu=round(ref["bleu_dev"] - base["bleu_dev"], 4),
        paper_ppl_ratio=round(ref["ppl_dev"] / base["ppl_dev"], 4),
        paper_delta_log_ppl=round(math.log(ref["ppl_dev"] / base["ppl_dev"]), 6),
    )


def build_table3(records: Sequence[RunRecord], design: Design = Design()) -> list[dict[str, Any]]:
    """One flat row (the CSV's columns) per row name, in the order the records come, with its verdicts."""
    by_row: dict[str, list[RunRecord]] = {}
    for rec in records:
        by_row.setdefault(rec.row, []).append(rec)
    paper = paper_table3()
    rows: list[dict[str, Any]] = []
    values: dict[str, dict[str, dict[int, float]]] = {"bleu": {}, "ppl": {}}
    for name, recs in by_row.items():
        meta = row_settings(recs)
        if meta and "table3" not in meta.get("tables", ()):
            continue
        ok = [r for r in recs if r.ok]
        # Departure: see docs/departures.md#table3-dev-sacrebleu (the paper's Table 3 BLEU is tokenized).
        values["bleu"][name], values["ppl"][name] = _by_seed(ok, "bleu"), _logs(_by_seed(ok, "ppl"))
        bleu_ci, log_ppl_ci = mean_ci(values["bleu"][name].values()), mean_ci(values["ppl"][name].values())
        params = mean_ci([r.train["params"] / 1e6 for r in ok if r.train.get("params") is not None])
        averaged = sorted(
            {
                int(r.eval["dev"]["checkpoints_averaged"])
                for r in ok
                if r.eval["dev"].get("checkpoints_averaged") is not None
            }
        )
        runaways = runaways_by_seed(ok)
        rows.append(
            dict(
                row=name,
                runaways=sum(runaways.values()) if runaways else None,
                runaways_by_seed=" ".join(f"{seed}:{n}" for seed, n in runaways.items()) or None,
                n_seeds=len(ok),
                seeds=" ".join(str(r.seed) for r in ok),
                **score_columns(bleu_ci, log_ppl_ci),
                params_m=params.mean,
                checkpoints_averaged=" ".join(map(str, averaged)) or None,
                effect_of_interest_paper=meta.get("effect_of_interest"),
                **_paper_columns((meta.get("paper") or {}).get("table3"), paper),
                failed_runs="; ".join(f"seed{r.seed}: {r.reason}" for r in recs if not r.ok) or None,
            )
        )
    decided = decide(
        values,
        {
            "bleu": {r["row"]: r["paper_delta_bleu"] for r in rows},
            "ppl": {r["row"]: r["paper_delta_log_ppl"] for r in rows},
        },
        {r["row"]: r["effect_of_interest_paper"] for r in rows},
        design,
    )
    out = []
    for r in rows:
        row = dict(r, **decided[r["row"]], seeds_max=design.max_seeds)
        log_ratio = {k: row.get(f"delta_log_ppl{k}") for k in ("", "_ci95_low", "_ci95_high")}
        row.update({f"ppl_ratio{k}": exp_or_none(v) for k, v in log_ratio.items()})
        out.append({k: row.get(k) for k in KEYS})
    return out


def verdict_cell(row: Mapping[str, Any], key: str = "verdict") -> str:
    """A verdict, marked interim where the design's extension will give the row more seeds; a dash for base."""
    if row.get(key) is None:
        return DASH
    return row[key] + ("" if row.get("verdict_final", True) else " (interim)")


def _delta_cell(row: Mapping[str, Any]) -> str:
    """ΔBLEU ± its 95% half-width, with the number of pairs when base has more seeds than the pairs."""
    text = ci_cells("delta_bleu", sign=True)[1](row)
    pairs = row.get("delta_bleu_n_pairs")
    return (
        text
        if row.get("delta_bleu") is None or pairs is None or pairs == row.get("base_seeds")
        else f"{text} ({pairs} pairs)"
    )


def _paper_cell(row: Mapping[str, Any], paper: str, here: str, ratio: bool = False) -> str:
    """The paper's difference and, in brackets, the same relative effect at this setting (the Δ of interest)."""
    if row["row"] == BASE or row.get(paper) is None:
        return DASH
    converted = row.get(here)
    if ratio:
        return f"{row[paper]:.3f}" + ("" if converted is None else f" ({math.exp(converted):.3f})")
    return signed(row[paper], 1) + ("" if converted is None else f" ({signed(converted, 2)})")


def _ratio_interval(row: Mapping[str, Any]) -> str:
    low, high = row.get("delta_log_ppl_family_low"), row.get("delta_log_ppl_family_high")
    return DASH if low is None or high is None else bracket(math.exp(low), math.exp(high), sign=False, digits=3)


def _planned_cell(row: Mapping[str, Any]) -> str:
    """The seeds the row's plan asks for; one beyond design.max_seeds says the row stays at the seeds it has."""
    if row["row"] == BASE or all(row.get(k) is None for k in ("planning_sd", "planning_sd_ppl")):
        return DASH
    planned, most = row.get("seeds_planned"), row.get("seeds_max")
    if planned is None:
        return f"> {SEEDS_UP_TO}"
    if most is not None and planned > most:
        return f"{planned} (> {most}: stays at {row['n_seeds']})"
    return str(planned)


def _claim_keys(measure: Measure) -> tuple[str, ...]:
    return tuple(measure.key(k) for k in ("verdict", "test", "claim_low", "claim_high"))


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
        "runaways",
        ("runaways", "runaways_by_seed"),
        lambda r: runaway_cell(r["runaways"], r["runaways_by_seed"]),
        metrics=(("dev_runaways", lambda r: r["runaways"]),),
    ),
    Column(
        "ΔBLEU ± 95%",
        ci_cells("delta_bleu", sign=True)[0] + ("delta_bleu_sd", "delta_bleu_n_pairs"),
        _delta_cell,
        metrics=(("delta_bleu", lambda r: r["delta_bleu"]),),
    ),
    Column("p (t)", ("delta_bleu_p_seeds",), lambda r: pvalue(r["delta_bleu_p_seeds"])),
    Column(None, ("delta_bleu_p_sign_flip",)),
    Column(
        "family interval",
        ("delta_bleu_family_low", "delta_bleu_family_high", "family_level"),
        lambda r: bracket(r["delta_bleu_family_low"], r["delta_bleu_family_high"]),
    ),
    Column(
        "paper Δ (here)",
        ("paper_bleu", "paper_delta_bleu", "expected_delta_bleu", "effect_of_interest_paper", "bleu_scale"),
        lambda r: _paper_cell(r, "paper_delta_bleu", "expected_delta_bleu"),
    ),
    Column(None, ("margin_bleu", "paper_delta_in_interval", "seeds_planned_bleu", "planning_sd")),
    Column(
        "BLEU verdict",
        ("verdict", "verdict_final") + _claim_keys(BLEU)[1:],
        verdict_cell,
        metrics=(("verdict", lambda r: None if r["verdict"] is None else verdict_cell(r)),),
    ),
    Column(
        "dev PPL",
        ("ppl_gmean", "ppl_ci95_low", "ppl_ci95_high"),
        lambda r: bracket(r["ppl_ci95_low"], r["ppl_ci95_high"], mean=r["ppl_gmean"], sign=False),
    ),
    Column(
        "PPL ÷ base",
        (
            "ppl_ratio",
            "ppl_ratio_ci95_low",
            "ppl_ratio_ci95_high",
            "delta_log_ppl",
            "delta_log_ppl_ci95_low",
            "delta_log_ppl_ci95_high",
            "delta_log_ppl_sd",
            "delta_log_ppl_n_pairs",
            "delta_log_ppl_p_seeds",
        ),
        lambda r: bracket(r["ppl_ratio_ci95_low"], r["ppl_ratio_ci95_high"], mean=r["ppl_ratio"], sign=False, digits=3),
        metrics=(("ppl_ratio", lambda r: r["ppl_ratio"]),),
    ),
    Column(None, ("delta_log_ppl_p_sign_flip",)),
    Column("family interval (÷)", ("delta_log_ppl_family_low", "delta_log_ppl_family_high"), _ratio_interval),
    Column(
        "paper ÷ (here)",
        ("paper_ppl", "paper_ppl_ratio", "paper_delta_log_ppl", "expected_delta_log_ppl", "ppl_scale"),
        lambda r: _paper_cell(r, "paper_ppl_ratio", "expected_delta_log_ppl", ratio=True),
    ),
    Column(None, ("margin_log_ppl", "paper_ppl_in_interval", "seeds_planned_ppl", "planning_sd_ppl")),
    Column(
        "PPL verdict",
        _claim_keys(PPL),
        lambda r: verdict_cell(r, "verdict_ppl"),
        metrics=(("verdict_ppl", lambda r: None if r["verdict_ppl"] is None else verdict_cell(r, "verdict_ppl")),),
    ),
    Column("seeds planned", ("seeds_planned", "seeds_max"), _planned_cell),
    Column("params (M)", ("params_m",), lambda r: num(r["params_m"], 3)),
    Column(None, ("paper_params_m",)),
    Column(None, ("failed_runs",)),  # listed below the markdown table
)
KEYS = csv_columns(COLUMNS)


def legend(context: Mapping[str, Any], rows: Sequence[Mapping[str, Any]], design: Design) -> str:
    """What the columns mean, at what scale and data they were measured, and how the verdicts were decided."""
    claims = claim_count(list(rows), design)
    averaged = sorted({str(r["checkpoints_averaged"]) for r in rows if r.get("checkpoints_averaged")})
    if averaged in ([], ["1"]):
        checkpoints = "from its last checkpoint, no averaging (section 6.2; Table 2 averages)"
    else:
        checkpoints = (
            f"from the average of its last {' or '.join(averaged)} checkpoints (row.dev_average_last), where the "
            "paper takes the last checkpoint alone (section 6.2; docs/departures.md#dev-averaging)"
        )
    base = next((r for r in rows if r["row"] == BASE), {})
    scale, ppl_scale, level = base.get("bleu_scale"), base.get("ppl_scale"), base.get("family_level")
    margin, margin_log = base.get("margin_bleu"), base.get("margin_log_ppl")
    if design.bleu_scale is not None or design.ppl_scale is not None:
        setting = (
            f"The paper's effects are converted by the declared factors (design.bleu_scale "
            f"{_shown(scale, 'g')}, design.ppl_scale {_shown(ppl_scale, 'g')})."
        )
    elif design.paper_setting:
        setting = "This is the paper's setting: the paper's differences are compared as they are."
    elif scale is not None:
        setting = (
            f"This is not the paper's setting: a verdict is about the direction at this scale, against the "
            f"paper's, and need not transfer (docs/departures.md#small-scales). The paper's differences and the "
            f"margins are converted as relative effects of the same size: BLEU by our base's pilot dev BLEU over "
            f"the paper's 25.8 (× {scale:.3f}), log PPL by our base's pilot mean log PPL (the mean token loss) over "
            f"log 4.92 (× {_shown(ppl_scale, '.3f')})."
        )
    else:
        setting = "Without base runs there is no scale to convert the paper's differences: no margin, no plan."
    margin_text = DASH if margin is None else f"±{margin:.2f}"
    ppl_margin_text = DASH if margin_log is None else f"{math.exp(-margin_log):.4f} to {math.exp(margin_log):.4f}"
    level_text = DASH if level is None else f"{level:.4g}"
    stage = (
        "The design's one extension was made: every verdict is its final test."
        if design.extended
        else "Pilot stage: a verdict marked (interim) belongs to a row the plan gives more seeds "
        "(`aiayn-extend`); it is not the design's test. The other verdicts are final."
    )
    columns = " and ".join({"bleu": "dev BLEU", "ppl": "dev PPL"}[c] for c in design.columns)
    return (
        f"Scale: {context.get('scale') or DASH}; data: {context.get('data') or DASH}; float path: "
        f"{context.get('float_path') or DASH}; seeds asked: {context.get('seeds') or DASH}."
        + (f" Read from kept seeds: {context['kept']}." if context.get("kept") else "")
        + "\n\n"
        f"dev BLEU is sacreBLEU on the dev set, every row and base alike {checkpoints}; mean ± half-width of a "
        "95% Student-t interval over seeds. dev PPL is "
        "per-token (BPE) perplexity, the geometric mean over seeds with its 95% interval (seeds are averaged and "
        "compared on log PPL, the mean token loss); PPL ÷ base is the paired ratio. ΔBLEU is the row minus base "
        "over the seeds both have (the pairs are counted when base has more). Every test's unit is the training "
        "run (a seed), never the dev sentence; p (t) is the paired t-test over seeds (the CSV also has the exact "
        "sign-flip permutation p of each column, which needs no normality and cannot go below 2/2^n); no p "
        "decides. runaways: the dev hypotheses that ran to the search's length limit or say a word (or up to 4) 4 "
        "times in a row, summed over seeds, with each seed that has any (aiayn.eval.runaways; eval.json lists "
        "their lines and the BLEU without them): a few such lines move a seed's BLEU by points and its PPL "
        "hardly at all.\n\n"
        f"Every row makes one claim per column ({columns}), each decided by its family interval alone: the "
        f"paired t interval (of ΔBLEU; of Δ log PPL, shown as a ratio) at level {level_text} = "
        f"1 − {design.alpha:g}/{claims} (Bonferroni over the {claims} claims of the table), so that all the "
        f"verdicts together are wrong with probability at most {design.alpha:g}. The margins δ are "
        f"{design.margin_bleu:g} BLEU and a PPL ratio within 1 ± {design.margin_ppl:g} at the paper's setting; "
        f"here {margin_text} BLEU and a ratio within {ppl_margin_text}. A claim whose paper difference is within "
        f"δ says no difference: reproduced when the interval lies inside ±δ, contradicted when it lies beyond. "
        f"Any other: reproduced when the interval lies on the paper's side of 0 (of 1 for a ratio), "
        f"contradicted on the other side or inside ±δ. A row the paper does not have: higher, lower, no "
        f"difference (inside ±δ). Otherwise unresolved; with one seed or identical differences there is no "
        f"interval. {setting} paper Δ (here), paper ÷ (here): the paper's difference and, in brackets, the "
        "difference of interest at this setting (for a row the paper does not have, its "
        "row.effect_of_interest, default δ). The two columns can disagree, and the paper's do: without label "
        "smoothing (D3) PPL improves (4.67 against base's 4.92) while BLEU drops (25.3 against 25.8), as section 5.4 "
        'says smoothing "hurts perplexity, as the model learns to be more unsure, but improves accuracy and BLEU '
        'score".\n\n'
        f"seeds planned: the seeds at which each of the row's claims has {design.power:.0%} power at the family "
        f"level, the most any claim needs within {design.max_seeds} (design.max_seeds), planned from the "
        f"{design.planning_pool} of the rows' variances (BLEU {_shown(base.get('planning_sd'), '.3g')}, log PPL "
        f"{_shown(base.get('planning_sd_ppl'), '.3g')}): to reproduce the difference of interest, or for a "
        f"no-difference claim to show it within ±δ when there is none; more than {design.max_seeds}: the row stays at "
        f"the seeds it has, its verdicts final (the cell says so); > {SEEDS_UP_TO}: out of reach. {stage}\n\n"
        f"sacreBLEU signature of dev BLEU: {context.get('dev_signature') or DASH}.\n"
        + _changed(context.get("design_changed") or ())
    )


def _changed(changed: Sequence[str]) -> str:
    """The legend's warning when the table's design is not its study's recorded one (aiayn.verdicts.record)."""
    if not changed:
        return ""
    return (
        "\n**Not the study's design.** This table was made with a design or pilot other than the one recorded with "
        "the study's first table (results/design.json): " + "; ".join(changed) + ". Its verdicts are not the "
        "design's test, and `aiayn-extend` will not extend it.\n"
    )


def _shown(x: float | None, spec: str) -> str:
    return DASH if x is None else format(x, spec)


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


def table3_headline(rows: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Table 3's part of what a person compares across experiments (results/metrics.json, a `dvc exp show` column
    each): base's dev BLEU and PPL, and how many of the table's claims it decided, reproduced and contradicted. Each
    row's numbers are in rows.json, every column in table3.csv."""
    base = next((r for r in rows if r["row"] == BASE), None)
    verdicts = [r[k] for r in rows for k in ("verdict", "verdict_ppl") if r.get(k) is not None]
    out: dict[str, Any] = {}
    if base is not None:
        out |= {"dev_bleu": base["bleu_mean"], "dev_ppl": base["ppl_gmean"]}
    if verdicts:
        out |= {
            "decided": sum(v != UNRESOLVED for v in verdicts),
            "reproduced": sum(v == REPRODUCED for v in verdicts),
            "contradicted": sum(v == CONTRADICTED for v in verdicts),
        }
    return {k: v for k, v in out.items() if v is not None}
