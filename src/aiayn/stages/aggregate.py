"""The aggregate stage: Table 2 and Table 3 from every run folder, logged to one wandb run of job_type aggregate."""

from __future__ import annotations

import csv
import dataclasses
import logging
from pathlib import Path
from typing import Any

from aiayn.config.params import rows_and_seeds
from aiayn.config.schema import DESIGN_KEYS, Config, DesignConfig
from aiayn.io import atomic_write_json
from aiayn.report.summary import write_tables
from aiayn.report.table2 import table2_headline, table2_metrics
from aiayn.report.table3 import table3_headline, table3_metrics
from aiayn.run import folders, kept, tracking
from aiayn.run.folders import RunSpec
from aiayn.verdicts import record
from aiayn.verdicts.significance import Design

log = logging.getLogger(__name__)


def design_of(cfg: Config, declared: DesignConfig, seeds: dict[str, list[int]], pilot: list[int]) -> Design:
    """How Table 3 decides (the design's keys, `declared`), at this setting, at the design's stage:
    extended once any row has seeds beyond the pilot's."""
    return Design(
        **{key: getattr(declared, key) for key in DESIGN_KEYS},
        paper_setting=cfg.scale.name == "paper" and cfg.data.name == "wmt14_en_de",
        pilot_seeds=tuple(pilot),
        extended=any(set(s) - set(pilot) for s in seeds.values()),
    )


def aggregate(cfg: Config) -> dict[str, Any]:
    """The aggregate stage's job: the design record updated, then every table, figure and metrics.json written from
    the evaluations (aiayn.report.summary.write_tables), the summary returned."""
    rows, seeds, pilot = rows_and_seeds(cfg.tables)
    design = design_of(cfg, cfg.design, seeds, pilot)
    raw = Path(cfg.paths.raw)
    changed = record.update(Path(cfg.paths.results) / record.FILE, design, pilot, seeds)
    summary = write_tables(
        runs_dir=Path(cfg.paths.runs),
        evals_dir=Path(cfg.paths.evals),
        rows=rows,
        seeds=seeds,
        refs={split: raw / folders.raw_file(split, "tgt") for split in ("valid", "test")},
        out_dir=Path(cfg.paths.results),
        sustained_flops_per_device=cfg.tables.sustained_flops_per_device,
        variant=dict(cfg.variant),
        design=design,
        design_changed=changed,
        kept_root=kept.kept_root(cfg.paths.kept, cfg.scale.name, dataclasses.asdict(cfg.data)),
    )
    # `dvc metrics show` / `dvc exp show` read metrics.json: the few numbers a person compares across experiments, one
    # column each. Every row's headline numbers are rows.json's (an output, not a metric: no column each); the full
    # tables are the CSVs.
    results = Path(cfg.paths.results)
    atomic_write_json(
        results / "metrics.json",
        table3_headline(summary["table3"]) | table2_headline(summary["table2"], cfg.data.form == "lc.norm.tok"),
    )
    atomic_write_json(
        results / "rows.json",
        {"table3": table3_metrics(summary["table3"]), "table2": table2_metrics(summary["table2"])},
    )
    _log(cfg, summary, Path(cfg.paths.results), inputs(cfg, seeds))
    return summary


def inputs(cfg: Config, seeds: dict[str, list[int]]) -> list[tracking.ArtifactSpec]:
    """The evaluation artifacts the tables were made from: every run of the table's variant that was evaluated."""
    specs = [
        RunSpec.for_row(row, seed, dict(cfg.variant), cfg.paths.runs, cfg.paths.evals)
        for row, row_seeds in seeds.items()
        for seed in row_seeds
    ]
    return [tracking.eval_artifact(spec) for spec in specs if (spec.eval_dir / folders.EVAL).is_file()]


RESULT_FILES = (
    "table3.md",
    "table3.csv",
    "table3.tex",
    "table2.md",
    "table2.csv",
    "table2.tex",
    "sweep.md",
    "sweep.csv",
    "metrics.json",
    "rows.json",
    "curves.csv",
    "plan.json",
    "design.json",
    "claims.png",
    "learning_curves.png",
)


def _log(cfg: Config, summary: dict[str, Any], results: Path, used: list[tracking.ArtifactSpec]) -> None:
    """One wandb run of job_type aggregate: Table 3 (paper columns, verdicts), Table 2, the sweep, dev BLEU by row
    as a bar chart and with its CI error bars (the figure), the headline numbers as summary; the evaluations as
    inputs, the results as its artifact."""
    run = tracking.start_run(cfg, job_type="aggregate", name=f"aggregate-{cfg.scale.name}", group="aggregate")
    if run is None:
        return
    try:
        import wandb

        tracking.use_inputs(run, used)
        for name in ("table3", "table2", "sweep"):
            path = results / f"{name}.csv"
            if path.exists():
                with open(path, encoding="utf-8", newline="") as f:
                    records = list(csv.reader(f))
                if records:
                    run.log({name: wandb.Table(columns=list(records[0]), data=records[1:])})
        bars = wandb.Table(
            columns=["row", "dev/bleu", "dev/bleu_ci95", "verdict"],
            data=[
                [r["row"], m.get("dev_bleu"), m.get("dev_bleu_ci95"), m.get("verdict")]
                for r in summary["table3"]
                for m in [table3_metrics([r])[r["row"]]]
            ],
        )
        run.log({"dev/bleu_by_row": wandb.plot.bar(bars, "row", "dev/bleu", title="dev BLEU by row (mean over seeds)")})
        for png in sorted(results.glob("*.png")):
            run.log({png.stem: wandb.Image(str(png))})
        for row, values in table3_metrics(summary["table3"]).items():
            run.summary.update({f"dev/{key.removeprefix('dev_')}/{row}": v for key, v in values.items()})
        tracking.log_output(
            run, tracking.ArtifactSpec(f"tables-{cfg.scale.name}", "results", results, copy=True, files=RESULT_FILES)
        )
    except Exception as err:
        log.warning("could not log the tables to wandb: %s", tracking.scrub(str(err)))
    finally:
        tracking.finish(run)
