"""Config schemas, registration with Hydra, composition for tests and scripts, and row resolution."""
from aiayn.config.compose import CONF_DIR, compose, register_configs
from aiayn.config.params import read_params_list
from aiayn.config.resolve import ConfigError, prepare, resolve_row
from aiayn.config.schema import Config

__all__ = ["CONF_DIR", "Config", "ConfigError", "compose", "prepare", "read_params_list", "register_configs",
           "resolve_row"]
