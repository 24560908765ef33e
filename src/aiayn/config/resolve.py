"""Turning a composed config into the run's config: apply the row at the scale, then validate everything.

A row (conf/row/*.yaml) is a typed patch over `model`, `train` and `decode` (schema.RowConfig). Keys the schemas
mark `relative` are in the paper's units: at a scale whose value differs from the paper's, a value v becomes
`scale_value * v / paper_value`, so "model.d_model: 256" is half the scale's base width. Every other key is
absolute.
"""

from __future__ import annotations

import copy
import dataclasses
from typing import Any

from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException

from aiayn.config.schema import (
    ROW_GROUPS,
    Config,
    ConfigError,
    DataConfig,
    DecodeConfig,
    LoggerConfig,
    RowConfig,
    TrainConfig,
    TrainerConfig,
    averaged,
    refuse_credentials,
    row_file,
)
from aiayn.marks import check_values, marked, seal
from aiayn.model.config import ModelConfig


def paper_value(group: str, key: str) -> Any:
    """The paper's value of `group.key`: the schema default."""
    return next(f.default for f in dataclasses.fields(ROW_GROUPS[group]) if f.name == key)


def scaled(group: str, key: str, row_value: int, scale_value: int, row: str, scale: str) -> int:
    """The row's value of a relative key, given in the paper's units, applied to the scale's value."""
    ratio = row_value / paper_value(group, key)
    value = scale_value * ratio
    if value < 1 - 1e-9:
        raise ConfigError(
            f"row '{row}' does not fit scale '{scale}' ({row_file(row)}): {group}.{key}={row_value} at paper scale "
            f"is {ratio:g}x the paper's {paper_value(group, key)}, which makes {key}={value:g} (< 1) at this scale "
            f"(its {key} is {scale_value}); use a larger scale or drop the row"
        )
    return max(1, round(value))


def resolve_row(cfg: DictConfig) -> DictConfig:
    """Return a copy of `cfg` with the row's patch applied to `model`, `train` and `decode` (relative keys scaled,
    the rest absolute)."""
    out = copy.deepcopy(cfg)
    row, scale = cfg.row, cfg.scale.name
    for group, schema in ROW_GROUPS.items():
        relative = marked(schema, "relative")
        for key, value in row[group].items():
            if value is not None:  # values are checked once, on the result (validate)
                out[group][key] = (
                    scaled(group, key, value, cfg[group][key], row.name, scale) if key in relative else value
                )
    if row.train.batch_tokens is not None and out.train.max_tokens > out.train.batch_tokens:
        out.train.max_tokens = out.train.batch_tokens  # a micro-batch never exceeds the row's (smaller) update
    if out.train.keep_last is None:  # the row's own keep_last, else what its averaging needs
        out.train.keep_last = averaged(row)
    return out


def check_groups(cfg: DictConfig) -> None:
    """Refuse, before any work starts, a value outside its set or range (the schemas' marks, aiayn.marks.check_values),
    naming the group and key; what values must say together is the dataclasses' own (`__post_init__`), checked when
    `prepare` builds them."""
    for group, schema in (
        ("model", ModelConfig),
        ("train", TrainConfig),
        ("decode", DecodeConfig),
        ("data", DataConfig),
        ("logger", LoggerConfig),
        ("trainer", TrainerConfig),
    ):
        check_values(cfg[group], schema, f"{group}.")
    check_values(cfg.row, RowConfig, f"{row_file(cfg.row.name)}: ")


def prepare(cfg: DictConfig) -> Config:
    """The run's final config, typed: the row applied, interpolations resolved, every value checked (each alone by
    its mark, together by the schemas' `__post_init__`); a value that cannot run is a ConfigError naming the key and
    the row. Its folders: aiayn.run.folders.RunSpec.of(cfg)."""
    tree = OmegaConf.to_container(cfg, resolve=False)
    assert isinstance(tree, dict)
    refuse_credentials(tree)  # before the schema's dataclasses drop a key they lack (`+logger.api_key=...`)
    out = resolve_row(cfg)
    OmegaConf.resolve(out)
    try:
        check_groups(out)
        built = OmegaConf.to_object(out)
    except OmegaConfBaseException as err:  # a __post_init__'s error, as OmegaConf rethrows it
        raise _named(err.__cause__ if isinstance(err.__cause__, ValueError) else err, cfg.row.name) from None
    except ValueError as err:
        raise _named(err, cfg.row.name) from None
    assert isinstance(built, Config), f"the composed config is a {type(built).__name__}, not a Config"
    return seal(built)


def _named(err: Exception, row: str) -> ConfigError:
    """A refused value's error as a ConfigError; one about a single group's key also names the row it ran with."""
    return err if isinstance(err, ConfigError) else ConfigError(f"{err} (row '{row}')")
