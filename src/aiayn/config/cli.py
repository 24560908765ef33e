"""The entry point shared by every pipeline script: register the schemas, then run it as a Hydra app."""
from __future__ import annotations

import sys
from typing import Any, Callable

import hydra
from omegaconf import DictConfig

from aiayn.config.compose import CONF_DIR, register_configs
from aiayn.tracking import SECRET_KEY


def refuse_secret_overrides(argv: list[str]) -> None:
    """Stop before Hydra saves the command line (.hydra/overrides.yaml) if it carries a credential-like key."""
    for arg in argv:
        key = arg.split("=", 1)[0].lstrip("+~") if "=" in arg else ""
        if key and SECRET_KEY.search(key.rsplit(".", 1)[-1]):
            sys.exit(f"error: override {key}=... looks like a credential; pass credentials through the environment "
                     f"(WANDB_API_KEY) or `wandb login`, never on the command line, which Hydra saves with the run")


def hydra_main(run: Callable[[DictConfig], Any]) -> None:
    """Run `run(cfg)` under `@hydra.main` on conf/config.yaml (overrides, multirun and launchers included)."""
    refuse_secret_overrides(sys.argv[1:])
    register_configs()
    hydra.main(config_path=str(CONF_DIR), config_name="config", version_base="1.3")(run)()
