"""Table 2 (test BLEU and training cost): our base and big beside the paper's systems."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from aiayn.cost.flops import training_flops
from aiayn.io import atomic_write_text
from aiayn.model.config import recorded
from aiayn.paper import paper_bleu_and_cost, paper_table2, published
from aiayn.report.collect import RunRecord, row_settings
from aiayn.report.formats import (
    DASH,
    Column,
    ci_cells,
    csv_columns,
    csv_text,
    latex_tabular,
    markdown_table,
    metrics,
    num,
    sci,
    shown,
)
from aiayn.run import folders
from aiayn.verdicts.stats import mean_ci

# The paper's estimate of a P100's sustained single-precision rate (section 6.1, footnote 5): 9.5 TFLOPS.
P100_SUSTAINED_FLOPS = 9.5e12


# Table 2's columns as shown, each with its CSV keys (the CSV's order).
COLUMNS: tuple[Column, ...] = (
    Column("System", ("system", "source", "row")),
    Column("Pair", ("pair",)),
    Column("n", ("n_seeds",)),
    Column("averaged", ("checkpoints_averaged",)),
    Column("test BLEU (sacre)", *ci_cells("bleu"), metrics=(("test_bleu", lambda r: r["bleu_mean"]),)),
    Column("test BLEU (tok)", *ci_cells("bleu_tok"), metrics=(("test_bleu_tok", lambda r: r["bleu_tok_mean"]),)),
    Column(
        "test BLEU (lc tok)",
        *ci_cells("bleu_lc_tok"),
        metrics=(("test_bleu_lc_tok", lambda r: r["bleu_lc_tok_mean"]),),
    ),
    Column("paper BLEU", ("paper_bleu",), lambda r: num(r["paper_bleu"])),
    Column("FLOPs (time×devices×rate)", ("train_flops_estimated",), lambda r: sci(r["train_flops_estimated"])),
    Column("FLOPs (counted)", ("train_flops_counted",), lambda r: sci(r["train_flops_counted"])),
    Column("paper FLOPs", ("paper_train_flops",), lambda r: sci(r["paper_train_flops"])),
    Column("device-hours (measured)", ("device_hours", "devices"), lambda r: device_hours_cell(r)),
    Column(None, ("wall_time_s",)),
    Column(None, ("reference",)),  # where a published system's number is printed
)
KEYS = csv_columns(COLUMNS)


def language_pair(config: Mapping[str, Any]) -> str | None:
    """ "en_de" from the resolved run config's data.src_lang / data.tgt_lang (the paper's column names)."""
    data = config.get("data") or {}
    src, tgt = data.get("src_lang"), data.get("tgt_lang")
    return f"{src}_{tgt}".lower() if src and tgt else None


def data_name(config: Mapping[str, Any]) -> str | None:
    """The run's data set (data.name: "multi30k" in either form, "wmt14_en_de", "synthetic", ...)."""
    return (config.get("data") or {}).get("name")


def estimated_flops(train: Mapping[str, Any], sustained_flops_per_device: float) -> float | None:
    """The paper's way: training time x number of devices x a sustained rate per device."""
    hours = device_hours(train)
    return None if hours is None else hours * 3600 * sustained_flops_per_device


def device_hours(train: Mapping[str, Any]) -> float | None:
    """What one training run cost as measured: its wall time x the devices it held, in hours."""
    device = train.get("device") or {}
    if train.get("wall_time_s") is None or not device.get("count"):
        return None
    return float(train["wall_time_s"]) * int(device["count"]) / 3600


def device_hours_cell(row: Mapping[str, Any]) -> str:
    """ "0.0062 (1x cpu)": device-hours per run (mean over seeds) and what ran them."""
    if row.get("device_hours") is None:
        return DASH
    hours = row["device_hours"]
    shown = f"{hours:.2f}" if hours >= 10 else f"{hours:.3g}"
    return f"{shown} ({row['devices']})" if row.get("devices") else shown


def counted_flops(rec: RunRecord, lengths: tuple[float, float]) -> float | None:
    """aiayn.cost.flops over the tokens this run saw; None when the run did not record what it needs."""
    model, seen, vocab = rec.config.get("model"), rec.train.get("tokens_seen") or {}, rec.train.get("vocab_size")
    if not model or vocab is None or seen.get("src") is None or seen.get("tgt") is None:
        return None
    try:
        return training_flops(recorded(model), int(vocab), seen["src"], seen["tgt"], *lengths)
    except (KeyError, ValueError):
        return None  # a config without the model sizes leaves the cell blank rather than stopping the report


def _ours(
    name: str, pair: str, recs: Sequence[RunRecord], sustained: float, lengths: tuple[float, float]
) -> dict[str, Any]:
    """Our system `name` (a row) on one language pair, beside the paper's system it reproduces (row.paper.table2)."""
    bleu = mean_ci(v for r in recs if (v := r.score("test", "bleu")) is not None)
    tok = mean_ci(v for r in recs if (v := r.score("test", "bleu_paper")) is not None)
    lc_tok = mean_ci(v for r in recs if (v := r.score("test", "bleu_lc_tok")) is not None)
    averaged = sorted({int(v) for r in recs if (v := r.score("test", "checkpoints_averaged")) is not None})
    est = mean_ci(v for r in recs if (v := estimated_flops(r.train, sustained)) is not None)
    counted = mean_ci(v for r in recs if (v := counted_flops(r, lengths)) is not None)
    wall = mean_ci(float(r.train["wall_time_s"]) for r in recs if r.train.get("wall_time_s") is not None)
    hours = mean_ci(v for r in recs if (v := device_hours(r.train)) is not None)
    devices = sorted({f"{d.get('count')}x {d.get('name')}" for r in recs if (d := r.train.get("device"))})
    ref = (row_settings(recs).get("paper") or {}).get("table2")
    # On a data set with its own published results (Multi30k) the paper's newstest2014 numbers are no reference.
    on_paper_data = published(data_name(recs[0].config)) is None
    paper_bleu, paper_cost = paper_bleu_and_cost(ref, pair) if ref and on_paper_data else (None, None)
    return dict(
        system=f"{ref or name}, ours",
        source="ours",
        row=name,
        pair=pair,
        n_seeds=len(recs),
        checkpoints_averaged=" ".join(map(str, averaged)) or None,
        bleu_mean=bleu.mean,
        bleu_ci95_low=bleu.low,
        bleu_ci95_high=bleu.high,
        bleu_tok_mean=tok.mean,
        bleu_tok_ci95_low=tok.low,
        bleu_tok_ci95_high=tok.high,
        bleu_lc_tok_mean=lc_tok.mean,
        bleu_lc_tok_ci95_low=lc_tok.low,
        bleu_lc_tok_ci95_high=lc_tok.high,
        paper_bleu=paper_bleu,
        train_flops_estimated=est.mean,
        train_flops_counted=counted.mean,
        paper_train_flops=paper_cost,
        device_hours=hours.mean,
        wall_time_s=wall.mean,
        devices=", ".join(devices) or None,
    )


def build_table2(
    records: Sequence[RunRecord], lengths: tuple[float, float], sustained_flops_per_device: float = P100_SUSTAINED_FLOPS
) -> list[dict[str, Any]]:
    """Our base/big per language pair run, then the paper's Table 2 systems for those pairs.

    `lengths` are the average source and target sentence lengths (tokens) that counted attention FLOPs use.
    """
    groups: dict[tuple[str, str], list[RunRecord]] = {}
    for rec in records:
        pair = language_pair(rec.config)
        if rec.ok and pair and "table2" in (row_settings([rec]).get("tables") or ()) and rec.eval.get("test"):
            groups.setdefault((rec.row, pair), []).append(rec)
    pairs = sorted({pair for _, pair in groups}) or ["en_de"]
    names = list(dict.fromkeys(name for name, _ in groups))  # the rows in the order the records come
    rows = []
    for name in names:
        for pair in pairs:
            if (name, pair) in groups:
                recs = groups[(name, pair)]
                ours = _ours(name, pair, recs, sustained_flops_per_device, lengths)
                rows += [ours, *_ensemble(ours, recs)]
    datasets = list(dict.fromkeys(data_name(r.config) for recs in groups.values() for r in recs))
    anchors = [entry for entry in map(published, datasets) if entry is not None]
    for entry in anchors:
        rows.extend(_published_rows(entry))
    # The paper's newstest2014 systems, unless every run is on a data set with its own published results.
    for pair in pairs if not datasets or len(anchors) < len(datasets) else ():
        for entry in paper_table2():
            bleu, cost = paper_bleu_and_cost(entry["model"], pair)
            if bleu is not None or cost is not None:
                rows.append(
                    dict(system=entry["model"], source="paper", pair=pair, paper_bleu=bleu, paper_train_flops=cost)
                )
    return [{k: row.get(k) for k in KEYS} for row in rows]


def _ensemble(ours: Mapping[str, Any], recs: Sequence[RunRecord]) -> list[dict[str, Any]]:
    """The row's seeds as one ensemble (aiayn.stages.ensemble's evals/{row}/ensemble/eval.json), when it decoded
    exactly the seeds tabulated here; [] otherwise."""
    path = recs[0].path.parent / folders.ENSEMBLE / folders.EVAL
    try:
        ensemble = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return []
    test = ensemble.get("test") or {}
    if sorted(ensemble.get("seeds") or []) != sorted(r.seed for r in recs) or test.get("bleu") is None:
        return []
    return [
        dict(
            system=f"{ours['system'].removesuffix(', ours')}, ensemble of {len(recs)} seeds, ours",
            source="ensemble",
            row=ours["row"],
            pair=ours["pair"],
            n_seeds=len(recs),
            checkpoints_averaged=ours["checkpoints_averaged"],
            bleu_mean=test.get("bleu"),
            bleu_tok_mean=test.get("bleu_paper"),
            bleu_lc_tok_mean=test.get("bleu_lc_tok"),
            paper_bleu=ours["paper_bleu"],
        )
    ]


def _published_rows(anchors: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Rows for the published results on our runs' data set, their BLEU in the column of its flavour."""
    column, rows = anchors["column"], []
    for system in anchors["systems"]:
        ci = system.get("ci95")
        bleu = float(system["bleu"])
        rows.append(
            {
                "system": system["system"],
                "source": "published",
                "reference": system["source"],
                "pair": anchors["pair"],
                f"{column}_mean": bleu,
                f"{column}_ci95_low": None if ci is None else bleu - ci,
                f"{column}_ci95_high": None if ci is None else bleu + ci,
            }
        )
    return rows


def _published_legend(rows: Sequence[Mapping[str, Any]]) -> str:
    """Where each published system's number is printed (aiayn/report/published.yaml), one line each."""
    cited = [f"- {r['system']}: {r['reference']}" for r in rows if r["source"] == "published"]
    return "\nPublished results on the same test set, as printed:\n" + "\n".join(cited) + "\n" if cited else ""


def table2_metrics(rows: Sequence[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Our Table 2 systems' test BLEU (sacreBLEU and the paper's tokenized), keyed by row ("base_en_de" when a
    pipeline tabulates more than one language pair), for `dvc exp show`."""
    ours = [r for r in rows if r["source"] in ("ours", "ensemble")]
    several = len({r["pair"] for r in ours}) > 1
    return {
        (f"{r['row']}_{r['pair']}" if several else r["row"]) + ("_ensemble" if r["source"] == "ensemble" else ""): (
            metrics(COLUMNS, r)
        )
        for r in ours
    }


def write_table2(rows: Sequence[dict[str, Any]], out_dir: Path, context: Mapping[str, Any]) -> list[Path]:
    """Write table2.md (with legend), table2.csv and table2.tex (booktabs), atomically."""
    header, body = shown(COLUMNS, rows)
    n_ours = sum(r["source"] in ("ours", "ensemble") for r in rows)
    text = (
        "# Table 2: test BLEU and training cost\n\n" + markdown_table(header, body) + "\n"
        f"Scale: {context.get('scale') or DASH}; data: {context.get('data') or DASH}; float path: "
        f"{context.get('float_path') or DASH}."
        + (f" Read from kept seeds: {context['kept']}." if context.get("kept") else "")
        + "\n\n"
        "test BLEU (sacre) is detokenized sacreBLEU; test BLEU (tok) is the paper's tokenized, compound-split "
        "BLEU; test BLEU (lc tok) is the Multi30k literature's: hypotheses and references lowercased, "
        "punctuation-normalised and Moses-tokenised as its data/task1/tok files are, BLEU over those tokens as "
        "multi-bleu.perl computes it (sacreBLEU tok:none, no smoothing); mean ± half-width of a 95% Student-t "
        "interval over seeds, each seed decoded from the average of its last checkpoints (averaged: how many; "
        "section 6.1: base 5, big 20), where Table 3 takes the last checkpoint alone (or the row's "
        "dev_average_last). FLOPs (time×devices×rate) follows the "
        "paper: wall time × device count × a sustained rate per device, here "
        f"{context.get('sustained_flops_per_device', P100_SUSTAINED_FLOPS):.2g} FLOP/s (the paper's P100 "
        "estimate, whatever device actually ran). FLOPs (counted) is 3 × forward matmul FLOPs per token × tokens "
        f"seen (aiayn.cost.flops), with attention at average sentence lengths {context.get('lengths', DASH)}. "
        "device-hours (measured) is one training run's wall time × the devices it held (mean over seeds), with "
        'what ran it; `aiayn-plan` predicts it before a run. A row\'s "ensemble of N seeds" line is '
        "its seeds decoding together, each with its Table 2 weights, log-probabilities averaged at every step of "
        "one beam search (aiayn.stages.ensemble): one system, so no interval. "
        "At a reduced scale the absolute numbers are not comparable with the paper's.\n\n"
        f"sacreBLEU signature of test BLEU (sacre): {context.get('test_signature') or DASH}.\n"
        + _published_legend(rows)
    )
    out_dir = Path(out_dir)
    return [
        atomic_write_text(out_dir / "table2.md", text),
        atomic_write_text(out_dir / "table2.csv", csv_text(rows, KEYS)),
        atomic_write_text(out_dir / "table2.tex", latex_tabular(header, body, rule_after=(n_ours - 1,))),
    ]


def table2_headline(rows: Sequence[dict[str, Any]], literature: bool = False) -> dict[str, Any]:
    """Table 2's part of results/metrics.json: each of our systems' test BLEU (sacreBLEU's; with `literature`, the
    data being the Multi30k literature's tokenised text, its BLEU too), seed ensembles left to rows.json."""
    out: dict[str, Any] = {}
    for name, numbers in table2_metrics(rows).items():
        if name.endswith("_ensemble"):
            continue
        for metric in ("test_bleu", "test_bleu_lc_tok") if literature else ("test_bleu",):
            if numbers.get(metric) is not None:
                out[f"{name}_{metric}"] = numbers[metric]
    return out
