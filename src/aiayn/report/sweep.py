"""The sweep table: every variant of every row that was evaluated (evals/{row}/{variant}/seed{seed}/eval.json, from
Hydra sweeps or `dvc exp` runs), one line per (row, override set), with the swept keys as columns.

Each line: seeds, dev BLEU and dev PPL mean ± 95% CI over them, and the difference from the row's reference point
paired by seed: the row itself (no overrides) when it was evaluated, else the row's first variant.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from aiayn.io import atomic_write_text
from aiayn.report.collect import read_eval
from aiayn.report.formats import (
    DASH,
    Column,
    bracket,
    ci_cells,
    csv_columns,
    csv_text,
    markdown_table,
    shown,
)
from aiayn.run import folders
from aiayn.verdicts.stats import exp_or_none, mean_ci, paired_test, score_columns

ROW_ITSELF = "(row)"  # the variant column of a row's own runs


@dataclass
class Point:
    """One (row, variant): its dev BLEU and PPL by seed."""

    row: str
    folder: str  # "" or "lr_factor=2/"
    variant: dict[str, Any] = field(default_factory=dict)
    bleu: dict[int, float] = field(default_factory=dict)
    log_ppl: dict[int, float] = field(default_factory=dict)  # averaged and compared on the log (mean token loss)


def collect_points(evals_dir: Path, rows: Iterable[str]) -> list[Point]:
    """Every evaluated variant of the given rows; a seed whose eval.json is unreadable is left out."""
    points = []
    for row in rows:
        for folder, evaluated in folders.evaluated(evals_dir, row).items():
            point = Point(row, folder)
            for seed, path in sorted(evaluated.items()):
                try:
                    ev = read_eval(path)
                except ValueError:
                    continue
                point.variant = ev.get("variant") or point.variant
                if ev["dev"].get("bleu") is not None:
                    point.bleu[seed] = float(ev["dev"]["bleu"])
                if ev["dev"].get("ppl") is not None and ev["dev"]["ppl"] > 0:
                    point.log_ppl[seed] = math.log(ev["dev"]["ppl"])
            points.append(point)
    return points


def build_sweep(points: Sequence[Point]) -> tuple[list[dict[str, Any]], list[str]]:
    """The table's lines and the swept keys (every key any variant sets, in first-seen order)."""
    keys = list(dict.fromkeys(k for p in points for k in p.variant))
    reference: dict[str, Point] = {}
    for p in points:  # the row itself when present (it sorts first), else the row's first variant
        reference.setdefault(p.row, p)
    lines = []
    for p in points:
        bleu, log_ppl, ref = mean_ci(p.bleu.values()), mean_ci(p.log_ppl.values()), reference[p.row]
        line: dict[str, Any] = dict(
            row=p.row,
            variant=p.folder.rstrip("/") or ROW_ITSELF,
            n_seeds=len(p.bleu),
            seeds=" ".join(map(str, sorted(p.bleu))),
            **score_columns(bleu, log_ppl),
            reference=ref.folder.rstrip("/") or ROW_ITSELF,
        )
        line.update({f"set.{k}": p.variant.get(k) for k in keys})
        if p is not ref:
            d_bleu, d_ppl = paired_test(p.bleu, ref.bleu), paired_test(p.log_ppl, ref.log_ppl)
            line.update(
                delta_bleu=d_bleu.mean_diff,
                delta_bleu_ci95_low=d_bleu.low,
                delta_bleu_ci95_high=d_bleu.high,
                delta_bleu_p=d_bleu.p_value,
                ppl_ratio=exp_or_none(d_ppl.mean_diff),
                ppl_ratio_ci95_low=exp_or_none(d_ppl.low),
                ppl_ratio_ci95_high=exp_or_none(d_ppl.high),
            )
        lines.append(line)
    return lines, keys


def _set_cell(key: str) -> Callable[[Mapping[str, Any]], str]:
    """The cell of one swept key: its value, or a dash where the row kept its own."""
    return lambda r: DASH if r.get(f"set.{key}") is None else str(r[f"set.{key}"])


def columns(keys: Sequence[str]) -> tuple[Column, ...]:
    """The sweep table's columns: the row, one per swept key, then the scores."""
    delta_keys, delta_cell = ci_cells("delta_bleu", sign=True)
    return (
        Column("Row", ("row", "variant")),
        *(Column(key, (f"set.{key}",), _set_cell(key)) for key in keys),
        Column("n", ("n_seeds", "seeds")),
        Column("dev BLEU", *ci_cells("bleu")),
        Column("ΔBLEU", delta_keys + ("delta_bleu_p",), delta_cell),
        Column(
            "dev PPL",
            ("ppl_gmean", "ppl_ci95_low", "ppl_ci95_high"),
            lambda r: bracket(r["ppl_ci95_low"], r["ppl_ci95_high"], mean=r["ppl_gmean"], sign=False),
        ),
        Column(
            "PPL ÷ reference",
            ("ppl_ratio", "ppl_ratio_ci95_low", "ppl_ratio_ci95_high"),
            lambda r: bracket(
                r.get("ppl_ratio_ci95_low"), r.get("ppl_ratio_ci95_high"), mean=r.get("ppl_ratio"), sign=False, digits=3
            ),
        ),
        Column("Δ against", ("reference",)),
    )


def write_sweep(lines: Sequence[dict[str, Any]], keys: Sequence[str], out_dir: Path) -> list[Path]:
    """results/sweep.md and sweep.csv (one line per row and override set)."""
    cols = columns(keys)
    header, body = shown(cols, lines)
    md = (
        "# Sweep: every evaluated override set of each row\n\n"
        + (markdown_table(header, body) if lines else "No evaluated runs.\n")
        + "\n"
        "One line per row and override set found under evals/ (Hydra sweeps, `dvc exp` runs); a dash: the "
        "scale's and row's own value. dev BLEU (sacreBLEU) is the mean ± half-width of a 95% Student-t "
        "interval over seeds, dev PPL the geometric mean with its 95% interval (averaged on log PPL); Δ and the "
        "PPL ratio are paired by seed against the row's own runs when they were evaluated, else against the "
        "row's first override set (column 'Δ against'). Every row's dev numbers are Table 3's: its last "
        "checkpoint, or the average of its last row.dev_average_last (the tiny scale's 5).\n"
    )
    out_dir = Path(out_dir)
    return [
        atomic_write_text(out_dir / "sweep.md", md),
        atomic_write_text(out_dir / "sweep.csv", csv_text(lines, csv_columns(cols))),
    ]
