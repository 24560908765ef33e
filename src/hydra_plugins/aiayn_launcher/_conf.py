"""The fork launcher's config schema and the state its workers inherit, in a module Hydra's plugin scanner skips (a
leading underscore): a scan runs each plugin module it finds, and a second run of this one would make a second
ForkLauncherConf class (a job's config holding the first would no longer pickle) and empty the inherited state."""

from dataclasses import dataclass
from typing import Any

from hydra.core.config_store import ConfigStore


@dataclass
class ForkLauncherConf:
    _target_: str = "hydra_plugins.aiayn_launcher.fork_launcher.ForkLauncher"
    n_jobs: int = 1  # jobs side by side; more jobs queue behind them


ConfigStore.instance().store(group="hydra/launcher", name="fork", node=ForkLauncherConf, provider="aiayn")

# What a forked worker needs, set by the launching process just before its pool forks (inherited, never pickled:
# the task function is a closure).
JOBS: dict[str, Any] = {}
