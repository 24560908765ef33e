"""Composing the `conf/` tree (Hydra's compose API), and a run's variant: the settings that change its results in
which it differs from its row at its scale.

The variant's reference is the plain composition of the same data, scale, trainer and row, compared before the row
is applied (so a variant has the same name in every row); a job of `python pipeline/train.py
-m train.lr_factor=0.5,2` differs from it in {"train.lr_factor": 0.5} and {"train.lr_factor": 2}. Which folders a
variant runs in, and which of its settings a row's folder names (a checkpoint cadence only where the row averages
checkpoints), is aiayn.run.folders's. Settings marked `observed` in the schema (logging, compiling, ...) are never part
of a variant.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from hydra import compose as hydra_compose
from hydra import initialize_config_dir
from hydra.core.config_store import ConfigStore
from hydra.core.global_hydra import GlobalHydra
from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig

from aiayn.config.rowfile import read_row
from aiayn.config.schema import ROW_GROUPS, Config
from aiayn.io import CHECKOUT
from aiayn.marks import marked

# The Hydra tree lives at the repository root (conf/), beside pipeline/: the checkout's when the package is installed
# from one (pip install -e), else the working folder's; AIAYN_CONF points elsewhere.
CONF_DIR = Path(os.environ.get("AIAYN_CONF", CHECKOUT / "conf" if (CHECKOUT / "conf").is_dir() else Path("conf")))
ROOT_CONFIG = "config"  # conf/config.yaml, the primary config
# What a run *is* rather than how it differs from its row: the pipeline's choices (which corpus, scale, hardware
# and row: `row=A1`), where and how it logs and runs, and its seed. Overrides of these groups and their keys never
# make a variant; a key of the row (`row.average_last=0`) does.
IDENTITY = ("data", "scale", "trainer", "logger", "paths", "tables", "design", "hydra", "seed", "variant")


def register_configs() -> None:
    """Store the top-level schema as `config_schema`; conf/config.yaml lists it first in its defaults."""
    ConfigStore.instance().store(name="config_schema", node=Config)


def override_key(arg: str) -> str:
    """The key of a Hydra override: `+train.lr_factor=2` -> `train.lr_factor`, `hydra/launcher=basic` ->
    `hydra/launcher` ("" for an argument that is not an override)."""
    return arg.split("=", 1)[0].lstrip("+~") if "=" in arg else ""


def override_values(argv: Iterable[str], key: str) -> list[str]:
    """The values given to `key` on a Hydra command line (`key=...`, with or without +/~), in order."""
    return [arg.split("=", 1)[1] for arg in argv if override_key(arg) == key]


def is_identity(override: str) -> bool:
    """Whether a Hydra override chooses what the run is (row=A1, scale=tiny, seed=2) rather than a variant of it."""
    key = override_key(override)
    return "=" not in override or key == "row" or re.split(r"[./]", key)[0] in IDENTITY


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
    for key in ("average_last", "dev_average_last"):
        if cfg.row[key] != reference.row[key]:
            out[f"row.{key}"] = cfg.row[key]
    return out


def rows_in_overrides(overrides: Iterable[str]) -> list[str]:
    """The row names a Hydra command line selects (`row=A1` or a sweep `row=A1,B2`), in order."""
    return [v.strip() for value in override_values(overrides, "row") for v in value.split(",") if v.strip()]


def row_path(name: str, conf_dir: Path | str = CONF_DIR) -> Path:
    """Row `name`'s file: conf/row/<name>.yaml."""
    return Path(conf_dir) / "row" / f"{name}.yaml"


def check_row_overrides(overrides: Iterable[str], conf_dir: Path) -> None:
    """Check the row file of every `row=` on a command line (an absent file is left to Hydra's own error)."""
    for name in rows_in_overrides(overrides):
        if (path := row_path(name, conf_dir)).is_file():
            read_row(path)


def _compose(overrides: Sequence[str], config_dir: Path) -> DictConfig:
    """One composition: inside a running `@hydra.main` job with that app's config tree, else with `config_dir`."""
    register_configs()
    if HydraConfig.initialized() and GlobalHydra.instance().is_initialized():
        return hydra_compose(config_name=ROOT_CONFIG, overrides=list(overrides))
    with initialize_config_dir(config_dir=str(config_dir), version_base="1.3"):
        return hydra_compose(config_name=ROOT_CONFIG, overrides=list(overrides))


def with_variant(cfg: DictConfig, overrides: Sequence[str], config_dir: Path | str | None = None) -> DictConfig:
    """`cfg` (composed with `overrides`) with `variant` set: how it differs from the same data, scale, trainer
    and row composed without its other overrides. Only overrides that can change results cost a second composition."""
    if not all(is_identity(o) for o in overrides):
        identity = [o for o in overrides if is_identity(o) and not override_key(o).startswith(("hydra", "variant"))]
        cfg.variant = differences(cfg, _compose(identity, Path(config_dir or CONF_DIR)))
    return cfg


def compose(overrides: Sequence[str] = (), config_dir: Path | str | None = None) -> DictConfig:
    """Compose conf/config.yaml with Hydra overrides, as a pipeline script would (for tests and notebooks); a bad
    row file is refused first, naming its file and key."""
    config_dir = Path(config_dir or CONF_DIR)
    if not (config_dir / f"{ROOT_CONFIG}.yaml").is_file():
        raise FileNotFoundError(
            f"{config_dir} holds no {ROOT_CONFIG}.yaml: it is not the project's Hydra tree (conf/); run from the "
            "project's checkout, or set AIAYN_CONF to its conf/ folder"
        )
    check_row_overrides(overrides, config_dir)
    return with_variant(_compose(overrides, config_dir), overrides, config_dir)
