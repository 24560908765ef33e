"""List the configured rows (conf/row/) with what each changes and its parameter count, beside the paper's.

    aiayn-rows --scale paper --vocab 37000 [--format json] [overrides ...]

The absolute counts depend on the vocabulary (the paper's exact one is unknown); each row's difference from base
is what should match the paper's (Table 3 params column); see docs/departures.md#parameter-counts.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from collections.abc import Sequence
from typing import Any

import torch

from aiayn.config.composition import CONF_DIR, compose
from aiayn.config.resolve import prepare
from aiayn.config.schema import ROW_GROUPS, ModelConfig, RowConfig
from aiayn.model.transformer import Transformer
from aiayn.paper import paper_table3

# The resolved settings listed for every row (the model's sizes and switches, and the recipe rows change most).
SHOWN_MODEL = tuple(f.name for f in dataclasses.fields(ModelConfig) if f.name not in ("max_positions", "qkv_init_gain"))
SHOWN_TRAIN = ("label_smoothing", "max_steps", "warmup_steps")


def row_names() -> list[str]:
    """Base first, then the paper's rows in order, then any user rows."""
    names = sorted(p.stem for p in (CONF_DIR / "row").glob("*.yaml"))
    order = list(paper_table3())
    return sorted(names, key=lambda n: (order.index(n) if n in order else len(order), n))


def count_parameters(model: ModelConfig, vocab_size: int) -> int:
    """Parameters of the Transformer for a model config, built on the meta device (no memory, no time)."""
    with torch.device("meta"):
        return Transformer(model, vocab_size).num_parameters()


def changes(row: RowConfig) -> dict[str, Any]:
    """The keys a row's patch sets, dotted (model.d_model), in the paper's units as the row file gives them."""
    return {
        f"{group}.{k}": v
        for group in ROW_GROUPS
        for k, v in dataclasses.asdict(getattr(row, group)).items()
        if v is not None
    }


def describe_rows(scale: str, vocab_size: int, overrides: Sequence[str] = ()) -> list[dict[str, Any]]:
    """One record per row: its changes, the resolved settings at `scale`, params (M) and the paper's params (M)."""
    paper = paper_table3()
    records = []
    for name in row_names():
        cfg = prepare(compose([f"scale={scale}", f"row={name}", *overrides]))
        model = cfg.model
        params = count_parameters(model, vocab_size)
        ref = cfg.row.paper.table3
        records.append(
            {
                "row": name,
                "description": cfg.row.description,
                "tables": list(cfg.row.tables),
                "changes": changes(cfg.row),
                **{k: getattr(model, k) for k in SHOWN_MODEL},
                **{k: getattr(cfg.train, k) for k in SHOWN_TRAIN},
                "average_last": cfg.row.average_last,
                "params_m": round(params / 1e6, 2),
                "paper_params_m": paper[ref].get("params_m") if ref in paper else None,
            }
        )
    base = next((r for r in records if r["row"] == "base"), None)
    paper_base = paper.get("base", {}).get("params_m")
    for r in records:
        r["delta_params_m"] = round(r["params_m"] - base["params_m"], 2) if base else None
        r["paper_delta_params_m"] = (
            r["paper_params_m"] - paper_base if r["paper_params_m"] is not None and paper_base is not None else None
        )
    return records


TABLE_COLUMNS = (
    "row",
    "n_layers",
    "d_model",
    "d_ff",
    "n_heads",
    "d_k",
    "d_v",
    "dropout",
    "label_smoothing",
    "max_steps",
    "average_last",
    "params_m",
    "paper_params_m",
    "delta_params_m",
    "paper_delta_params_m",
)


def _other_changes(record: dict[str, Any]) -> str:
    """The row's changes that the table has no column for (norm placement, activation, ...), as key=value."""
    return " ".join(f"{k}={v}" for k, v in record["changes"].items() if k.split(".")[1] not in TABLE_COLUMNS)


def format_table(records: list[dict[str, Any]]) -> str:
    """The listing for a terminal: sizes and parameter counts in columns, every other change as key=value."""
    cols = [*TABLE_COLUMNS, "other changes", "description"]
    cells = [
        [("" if r[c] is None else str(r[c])) for c in TABLE_COLUMNS] + [_other_changes(r), r["description"]]
        for r in records
    ]
    widths = [max(len(c), *(len(row[i]) for row in cells)) for i, c in enumerate(cols)]
    lines = ["  ".join(c.ljust(w) for c, w in zip(cols, widths))]
    lines += ["  ".join(v.ljust(w) for v, w in zip(row, widths)) for row in cells]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="aiayn-rows", description=__doc__.splitlines()[0])
    parser.add_argument("--scale", default="paper", help="conf/scale/ name (default: paper)")
    parser.add_argument("--vocab", type=int, default=37000, help="vocabulary size (default: 37000, EN-DE)")
    parser.add_argument("--format", choices=("table", "json"), default="table")
    parser.add_argument("overrides", nargs="*", help="extra Hydra overrides, e.g. model.d_model=256")
    args = parser.parse_args(argv)
    records = describe_rows(args.scale, args.vocab, args.overrides)
    print(json.dumps(records, indent=2) if args.format == "json" else format_table(records))
    return 0


if __name__ == "__main__":
    sys.exit(main())
