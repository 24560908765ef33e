"""A run's learning curve (aiayn.run.folders.CURVE in its run folder): its columns, written by the train stage
(CurveWriter) and read by the aggregate stage (tables, plots, `dvc plots`), declared once here.

Each column is a metric key as the LightningModule and callbacks log it ("train/lr"), with "/" written as "_"
("train_lr"), one line per logged step; validation columns are filled only on validation steps.
"""

from __future__ import annotations

import csv
import io
import math
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

TRAIN_METRICS = ("train/loss", "train/nll", "train/lr", "train/tokens_per_s", "train/grad_norm")
VAL_METRICS = ("val/loss", "val/ppl")


def column(metric: str) -> str:
    """The CSV column of a metric key: "train/lr" -> "train_lr"."""
    return metric.replace("/", "_")


COLUMNS = ("step", *(column(m) for m in (*TRAIN_METRICS, *VAL_METRICS)))


def curve_text(rows: Iterable[Mapping[str, Any]]) -> str:
    """The CSV text of `rows`, each a {"step": int, metric key: value} mapping; absent metrics are empty cells."""
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=COLUMNS, lineterminator="\n")
    writer.writeheader()
    for row in rows:
        writer.writerow({column(k): v for k, v in row.items()})
    return buf.getvalue()


def read_curve(path: Path) -> dict[str, list[float]]:
    """A curve.csv as columns of floats (the columns it has of COLUMNS); empty cells become NaN so matplotlib
    leaves gaps."""
    with open(path, newline="", encoding="utf-8") as f:
        reader = csv.DictReader(f)
        fields = reader.fieldnames or []
        if "step" not in fields:
            raise ValueError(f"{path}: no 'step' column; expected {list(COLUMNS)}")
        columns: dict[str, list[float]] = {c: [] for c in COLUMNS if c in fields}
        for line_no, line in enumerate(reader, start=2):
            for name, values in columns.items():
                cell = (line.get(name) or "").strip()
                try:
                    values.append(float(cell) if cell else math.nan)
                except ValueError as err:
                    raise ValueError(f"{path}:{line_no}: column {name!r} has {cell!r}, not a number") from err
    return columns
