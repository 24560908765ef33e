"""Registering the schemas with Hydra's ConfigStore, composing the `conf/` tree outside `@hydra.main`, and naming a
run's variant (aiayn.config.variant) from its overrides."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from hydra import compose as hydra_compose
from hydra import initialize_config_dir
from hydra.core.config_store import ConfigStore
from hydra.core.global_hydra import GlobalHydra
from hydra.initialize import get_gh_backup, restore_gh_from_backup
from omegaconf import DictConfig

from aiayn.config.rowfile import check_row_overrides
from aiayn.config.schema import Config
from aiayn.config.variant import differences, identity_overrides, is_identity

# The Hydra tree lives at the repository root (conf/), beside pipeline/; AIAYN_CONF points elsewhere.
CONF_DIR = Path(os.environ.get("AIAYN_CONF", Path(__file__).resolve().parents[3] / "conf"))


def register_configs() -> None:
    """Store the top-level schema as `config_schema`; conf/config.yaml lists it first in its defaults."""
    ConfigStore.instance().store(name="config_schema", node=Config)


def _compose(overrides: Sequence[str], config_dir: Path) -> DictConfig:
    """One composition, leaving Hydra's global state as it was (also inside a running `@hydra.main` job)."""
    register_configs()
    saved = get_gh_backup()
    GlobalHydra.instance().clear()
    try:
        with initialize_config_dir(config_dir=str(config_dir), version_base="1.3"):
            return hydra_compose(config_name="config", overrides=list(overrides))
    finally:
        restore_gh_from_backup(saved)


def with_variant(cfg: DictConfig, overrides: Sequence[str], config_dir: Path | str | None = None) -> DictConfig:
    """`cfg` (composed with `overrides`) with `variant` set: how it differs from the same data, scale, trainer
    and row composed without its other overrides. Only overrides that can change results cost a second composition."""
    if not all(is_identity(o) for o in overrides):
        reference = _compose(identity_overrides(overrides), Path(config_dir or CONF_DIR))
        cfg.variant = differences(cfg, reference)
    return cfg


def compose(overrides: Sequence[str] = (), config_dir: Path | str | None = None) -> DictConfig:
    """Compose conf/config.yaml with Hydra overrides, as a pipeline script would (for tests and notebooks); a bad
    row file is refused first, naming its file and key."""
    config_dir = Path(config_dir or CONF_DIR)
    check_row_overrides(overrides, config_dir)
    return with_variant(_compose(overrides, config_dir), overrides, config_dir)
