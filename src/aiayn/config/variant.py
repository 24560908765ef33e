"""A run's variant: the settings that change its results in which it differs from its row at its scale.

The reference is the plain composition of the same data, scale, trainer and row, compared before the row is applied
(so a variant has the same name in every row); a job of `python pipeline/train.py
-m train.lr_factor=0.5,2` differs from it in {"train.lr_factor": 0.5} and {"train.lr_factor": 2}, so each runs in
a folder of its own: runs/base/lr_factor=0.5/seed1, runs/base/lr_factor=2/seed1 (an evaluation also by its decode
settings: evals/base/lr_factor=2,beam_size=8/seed1). A run with no variant keeps runs/{row}/seed{seed}. Settings
marked `observed` in the schema (logging, checkpoint cadence, ...) never make a variant.
"""
from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Mapping
from typing import Any

from omegaconf import DictConfig

from aiayn.config.schema import ROW_GROUPS, observed_keys

# What a run *is* rather than how it differs from its row: the pipeline's choices (which corpus, scale, hardware
# and row), where and how it logs and runs, and its seed. Overrides of these never make a variant.
IDENTITY_GROUPS = ("data", "scale", "trainer", "row", "logger")
IDENTITY_PREFIXES = ("data.", "scale.", "trainer.", "logger.", "paths.", "aggregate.", "hydra.", "hydra/", "seed",
                     "variant")
EVAL_ONLY = ("decode",)  # groups that change an evaluation, not the training run
MAX_SLUG = 64  # characters of a folder name before it is shortened with a hash


def _key(override: str) -> str:
    return override.split("=", 1)[0].lstrip("+~")


def is_identity(override: str) -> bool:
    """Whether a Hydra override chooses what the run is (row=A1, scale=tiny, seed=2) rather than a variant of it."""
    key = _key(override)
    return "=" not in override or key in IDENTITY_GROUPS or key.startswith(IDENTITY_PREFIXES)


def identity_overrides(overrides: Iterable[str]) -> list[str]:
    """The overrides that make the reference composition: the identity ones, without Hydra's own."""
    return [o for o in overrides if is_identity(o) and not _key(o).startswith(("hydra", "variant"))]


def differences(cfg: DictConfig, reference: DictConfig) -> dict[str, Any]:
    """Dotted key -> value of every non-observed model, train and decode setting in which the composed `cfg`
    differs from the composed `reference`, in schema order: the scale-level values (before the row is applied, so a
    variant is named alike in every row), then the row's own patch and checkpoint averaging."""
    out: dict[str, Any] = {}
    for prefix, node, ref in (("", cfg, reference), ("row.", cfg.row, reference.row)):
        for group, schema in ROW_GROUPS.items():
            skip = observed_keys(schema)
            for key in node[group]:
                if key not in skip and node[group][key] != ref[group][key]:
                    out[f"{prefix}{group}.{key}"] = node[group][key]
    if cfg.row.average_last != reference.row.average_last:
        out["row.average_last"] = cfg.row.average_last
    return out


def _value(value: Any) -> str:
    """A value as a Hydra override would spell it, integral floats without ".0" (lr_factor=2)."""
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def slug(variant: Mapping[str, Any], eval_too: bool = True) -> str:
    """A readable folder name for a variant ("lr_factor=2,dropout=0.2"), "" for none; keys by their last part
    unless two share it; names longer than MAX_SLUG characters keep a prefix and gain a short hash of the whole."""
    keys = [k for k in variant
            if eval_too or (k.removeprefix("row.").split(".")[0] not in EVAL_ONLY and k != "row.average_last")]
    if not keys:
        return ""
    leaves = [k.rsplit(".", 1)[-1] for k in keys]
    names = [leaf if leaves.count(leaf) == 1 else key for key, leaf in zip(keys, leaves)]
    text = ",".join(f"{name}={_value(variant[key])}" for name, key in zip(names, keys))
    text = re.sub(r"[^A-Za-z0-9._=,+-]", "_", text)
    if len(text) <= MAX_SLUG:
        return text
    digest = hashlib.sha256(text.encode()).hexdigest()[:8]
    return f"{text[:MAX_SLUG - 9].rstrip(',')}-{digest}"
