"""List the configured rows (conf/row/) with what each changes and its parameter count, beside the paper's.

    python -m aiayn.rows --scale paper --vocab 37000 [--format json]

The absolute counts depend on the vocabulary (the paper's exact one is unknown); each row's difference from base
is what should match the paper's (Table 3 params column); see docs/departures.md#parameter-counts.
"""
from __future__ import annotations

import argparse
import json
import sys
from typing import Any

import torch

from aiayn.config import CONF_DIR, compose, prepare
from aiayn.config.resolve import SIZE_KEYS
from aiayn.model import Transformer
from aiayn.report.paper import paper_table3

CHANGE_KEYS = (*SIZE_KEYS, "dropout", "label_smoothing", "pos_encoding", "train_steps")


def row_names() -> list[str]:
    """Base first, then the paper's rows in order, then any user rows."""
    names = sorted(p.stem for p in (CONF_DIR / "row").glob("*.yaml"))
    order = list(paper_table3())
    return sorted(names, key=lambda n: (order.index(n) if n in order else len(order), n))


def count_parameters(model_cfg: dict[str, Any], vocab_size: int) -> int:
    """Parameters of the Transformer for a model config, built on the meta device (no memory, no time)."""
    with torch.device("meta"):
        return Transformer(vocab_size=vocab_size, pad_id=0, **model_cfg).num_parameters()


def describe_rows(scale: str, vocab_size: int, overrides: list[str] = ()) -> list[dict[str, Any]]:
    """One record per row: its changes, the resolved model at `scale`, params (M) and the paper's params (M)."""
    paper = paper_table3()
    records = []
    for name in row_names():
        cfg = prepare(compose([f"scale={scale}", f"row={name}", *overrides]))
        model = {k: v for k, v in cfg.model.items()}
        params = count_parameters(model, vocab_size)
        records.append({
            "row": name,
            "description": cfg.row.description,
            "changes": {k: cfg.row[k] for k in CHANGE_KEYS if cfg.row[k] is not None},
            **{k: model[k] for k in (*SIZE_KEYS, "dropout", "pos_encoding")},
            "label_smoothing": cfg.train.label_smoothing,
            "train_steps": cfg.train.max_steps,
            "average_last": cfg.row.average_last,
            "params_m": round(params / 1e6, 2),
            "paper_params_m": paper.get(name, {}).get("params_m"),
        })
    base = next((r for r in records if r["row"] == "base"), None)
    for r in records:
        r["delta_params_m"] = round(r["params_m"] - base["params_m"], 2) if base else None
        paper_base = paper.get("base", {}).get("params_m")
        r["paper_delta_params_m"] = (r["paper_params_m"] - paper_base
                                     if r["paper_params_m"] is not None and paper_base is not None else None)
    return records


def format_table(records: list[dict[str, Any]]) -> str:
    cols = ["row", "n_layers", "d_model", "d_ff", "n_heads", "d_k", "d_v", "dropout", "label_smoothing",
            "pos_encoding", "train_steps", "average_last", "params_m", "paper_params_m", "delta_params_m",
            "paper_delta_params_m", "description"]
    cells = [[("" if r[c] is None else str(r[c])) for c in cols] for r in records]
    widths = [max(len(c), *(len(row[i]) for row in cells)) for i, c in enumerate(cols)]
    lines = ["  ".join(c.ljust(w) for c, w in zip(cols, widths))]
    lines += ["  ".join(v.ljust(w) for v, w in zip(row, widths)) for row in cells]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m aiayn.rows", description=__doc__.splitlines()[0])
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
