"""Config schemas, registration with Hydra, composition for tests and scripts, and row resolution.

Names are imported on first use (PEP 562), so that `aiayn.config.schema`, plain dataclasses, imports without Hydra:
the model builds from its schema (aiayn.model) and stays plain PyTorch.
"""

from __future__ import annotations

import importlib
from typing import Any

# A training run's numbers do not depend on this module (names only; the settings a run gets are in its
# fingerprint): aiayn.runspec leaves it out of the run's fingerprint, so editing it does not retrain.
CANNOT_CHANGE_RESULTS = True

_EXPORTS = {
    "CONF_DIR": "composition",
    "compose": "composition",
    "register_configs": "composition",
    "read_params_list": "params",
    "ConfigError": "resolve",
    "prepare": "resolve",
    "resolve_row": "resolve",
    "Config": "schema",
}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module 'aiayn.config' has no attribute {name!r}")
    return getattr(importlib.import_module(f"aiayn.config.{_EXPORTS[name]}"), name)
