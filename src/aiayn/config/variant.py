"""A run's variant: the settings that change its results in which it differs from its row at its scale.

The reference is the plain composition of the same data, scale, trainer and row, compared before the row is applied
(so a variant has the same name in every row); a job of `python pipeline/train.py
-m train.lr_factor=0.5,2` differs from it in {"train.lr_factor": 0.5} and {"train.lr_factor": 2}. Which folders a
variant runs in, and which of its settings a row's folder names (a checkpoint cadence only where the row averages
checkpoints), is aiayn.runspec's. Settings marked `observed` in the schema (logging, compiling, ...) are never part
of a variant.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from omegaconf import DictConfig

from aiayn.config.schema import ROW_GROUPS
from aiayn.marks import marked

# What a run *is* rather than how it differs from its row: the pipeline's choices (which corpus, scale, hardware
# and row: `row=A1`), where and how it logs and runs, and its seed. Overrides of these groups and their keys never
# make a variant; a key of the row (`row.average_last=0`) does.
IDENTITY = ("data", "scale", "trainer", "logger", "paths", "aggregate", "hydra", "seed", "variant")


def override_key(arg: str) -> str:
    """The key of a Hydra override: `+train.lr_factor=2` -> `train.lr_factor`, `hydra/launcher=basic` ->
    `hydra/launcher` ("" for an argument that is not an override)."""
    return arg.split("=", 1)[0].lstrip("+~") if "=" in arg else ""


def is_identity(override: str) -> bool:
    """Whether a Hydra override chooses what the run is (row=A1, scale=tiny, seed=2) rather than a variant of it."""
    key = override_key(override)
    return "=" not in override or key == "row" or re.split(r"[./]", key)[0] in IDENTITY


def identity_overrides(overrides: Iterable[str]) -> list[str]:
    """The overrides that make the reference composition: the identity ones, without Hydra's own."""
    return [o for o in overrides if is_identity(o) and not override_key(o).startswith(("hydra", "variant"))]


def differences(cfg: DictConfig, reference: DictConfig) -> dict[str, Any]:
    """Dotted key -> value of every non-observed model, train and decode setting in which the composed `cfg`
    differs from the composed `reference`, in schema order: the scale-level values (before the row is applied, so a
    variant is named alike in every row), then the row's own patch and checkpoint averaging."""
    out: dict[str, Any] = {}
    for prefix, node, ref in (("", cfg, reference), ("row.", cfg.row, reference.row)):
        for group, schema in ROW_GROUPS.items():
            skip = marked(schema, "observed")
            for key in node[group]:
                if key not in skip and node[group][key] != ref[group][key]:
                    out[f"{prefix}{group}.{key}"] = node[group][key]
    if cfg.row.average_last != reference.row.average_last:
        out["row.average_last"] = cfg.row.average_last
    return out
