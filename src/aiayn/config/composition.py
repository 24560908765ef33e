"""Registering the schemas with Hydra's ConfigStore and composing the `conf/` tree outside `@hydra.main`."""
from __future__ import annotations

import os
from pathlib import Path
from typing import Sequence

from hydra import compose as hydra_compose
from hydra import initialize_config_dir
from hydra.core.config_store import ConfigStore
from hydra.core.global_hydra import GlobalHydra
from omegaconf import DictConfig

from aiayn.config.schema import Config

# The Hydra tree lives at the repository root (conf/), beside pipeline/; AIAYN_CONF points elsewhere.
CONF_DIR = Path(os.environ.get("AIAYN_CONF", Path(__file__).resolve().parents[3] / "conf"))


def register_configs() -> None:
    """Store the top-level schema as `config_schema`; conf/config.yaml lists it first in its defaults."""
    ConfigStore.instance().store(name="config_schema", node=Config)


def compose(overrides: Sequence[str] = (), config_dir: Path | str | None = None) -> DictConfig:
    """Compose conf/config.yaml with Hydra overrides, as a pipeline script would (for tests and notebooks)."""
    from aiayn.config.rowfile import check_row_overrides

    check_row_overrides(overrides, Path(config_dir or CONF_DIR))
    register_configs()
    GlobalHydra.instance().clear()
    with initialize_config_dir(config_dir=str(config_dir or CONF_DIR), version_base="1.3"):
        return hydra_compose(config_name="config", overrides=list(overrides))
