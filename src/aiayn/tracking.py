"""wandb for every stage run: one run per job, offline without credentials, never able to stop the work.

The run folders, not wandb, are the source of truth for the tables; wandb is for browsing. Secrets never reach
a wandb config: `scrub` drops credential-like keys and any value equal to a credential in the environment.
"""
from __future__ import annotations

import logging
import netrc
import os
import re
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf

log = logging.getLogger(__name__)

SECRET_KEY = re.compile(r"(api_?key|token|secret|password|passwd|credential)", re.IGNORECASE)
SECRET_ENV = ("WANDB_API_KEY", "HF_TOKEN", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN")


def _secrets() -> list[str]:
    return [v for k in SECRET_ENV if len(v := os.environ.get(k, "")) >= 8]


def scrub(obj: Any, secrets: list[str] | None = None) -> Any:
    """A copy of a plain container with credential-like keys removed and secret values masked."""
    secrets = _secrets() if secrets is None else secrets
    if isinstance(obj, dict):
        return {k: scrub(v, secrets) for k, v in obj.items() if not SECRET_KEY.search(str(k))}
    if isinstance(obj, (list, tuple)):
        return type(obj)(scrub(v, secrets) for v in obj)
    if isinstance(obj, str):
        for s in secrets:
            obj = obj.replace(s, "***")
    return obj


def has_credentials() -> bool:
    """True when wandb could log in: an API key in the environment or a netrc entry for the wandb host."""
    if os.environ.get("WANDB_API_KEY"):
        return True
    try:
        host = os.environ.get("WANDB_BASE_URL", "https://api.wandb.ai").split("//")[-1]
        return netrc.netrc().authenticators(host) is not None
    except (FileNotFoundError, netrc.NetrcParseError, OSError):
        return False


def resolve_mode(mode: str) -> str:
    """`auto` means online with credentials, offline without; WANDB_MODE in the environment wins."""
    if os.environ.get("WANDB_MODE"):
        return os.environ["WANDB_MODE"]
    if mode == "auto":
        return "online" if has_credentials() else "offline"
    return mode


def start_run(cfg: DictConfig, job_type: str, name: str | None = None, group: str | None = None):
    """Start a wandb run for this job, or return None (with a warning) when wandb is off or fails."""
    if cfg.logger.backend != "wandb":
        return None
    try:
        import wandb

        config = scrub(OmegaConf.to_container(cfg, resolve=True))
        Path(cfg.logger.dir).mkdir(parents=True, exist_ok=True)
        return wandb.init(
            project=cfg.logger.project,
            entity=cfg.logger.entity,
            group=group or cfg.row.name,
            job_type=job_type,
            name=name or f"{cfg.row.name}-s{cfg.seed}",
            config=config,
            tags=[f"scale:{cfg.scale.name}", f"data:{cfg.data.name}", *cfg.logger.tags],
            dir=cfg.logger.dir,
            mode=resolve_mode(cfg.logger.mode),
            reinit="finish_previous",
            settings=wandb.Settings(silent=True, init_timeout=60, console="off"),
        )
    except Exception as err:  # wandb is optional: a broken install, service or network must not stop the run
        log.warning("wandb disabled for this run: %s: %s", type(err).__name__, scrub(str(err)))
        return None


def finish(run) -> None:
    """Finish the run (each job its own run, multirun included); errors are logged, never raised."""
    if run is None:
        return
    try:
        run.finish()
    except Exception as err:
        log.warning("wandb finish failed: %s", scrub(str(err)))


def safe_log(run, data: dict[str, Any]) -> None:
    if run is None:
        return
    try:
        run.log(data)
    except Exception as err:
        log.warning("wandb log failed: %s", scrub(str(err)))
