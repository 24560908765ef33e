"""The entry point shared by every pipeline script: register the schemas, then run it as a Hydra app."""
from __future__ import annotations

from typing import Any, Callable

import hydra
from omegaconf import DictConfig

from aiayn.config.compose import CONF_DIR, register_configs


def hydra_main(run: Callable[[DictConfig], Any]) -> None:
    """Run `run(cfg)` under `@hydra.main` on conf/config.yaml (overrides, multirun and launchers included)."""
    register_configs()
    hydra.main(config_path=str(CONF_DIR), config_name="config", version_base="1.3")(run)()
