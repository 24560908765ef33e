"""Turning a composed config into the run's config: apply the row at the scale, then validate everything.

A row (conf/row/*.yaml) is a typed patch over `model`, `train` and `decode` (schema.RowConfig). Keys the schemas
mark `relative` are in the paper's units: at a scale whose value differs from the paper's, a value v becomes
`scale_value * v / paper_value`, so "model.d_model: 256" is half the scale's base width. Every other key is
absolute.
"""

from __future__ import annotations

import copy
import dataclasses
from typing import Any, TypeVar

from omegaconf import DictConfig, OmegaConf

from aiayn.config.schema import (
    ROW_GROUPS,
    DataConfig,
    DecodeConfig,
    LoggerConfig,
    RowConfig,
    TrainConfig,
    TrainerConfig,
)
from aiayn.marks import check_values, marked
from aiayn.model.config import ModelConfig
from aiayn.model.config import check as check_model

T = TypeVar("T")


def plain(node: Any) -> dict[str, Any]:
    """A config node as plain dicts and lists (OmegaConf.to_container, typed for a mapping node)."""
    out = OmegaConf.to_container(node, resolve=True)
    assert isinstance(out, dict), f"expected a mapping node, got {type(out).__name__}"
    return out  # type: ignore[return-value]  # a config's keys are strings


class ConfigError(ValueError):
    """A config that cannot run; the message names the key (and the row or scale) and the reason."""


def row_file(name: str) -> str:
    """Where row `name` lives, for messages (conf/row/<name>.yaml)."""
    return f"conf/row/{name}.yaml"


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


def averaged(row) -> int:
    """The most checkpoints a row's evaluations average (Table 2's test, Table 3's dev): the snapshots a run must
    keep; 0 when each takes the last checkpoint alone."""
    most = max(int(row.average_last), int(row.dev_average_last))
    return most if most > 1 else 0


def validate(cfg: DictConfig) -> None:
    """Refuse, before any work starts, a config whose values cannot run; the message names the key. Sets and ranges
    are the schemas' marks (aiayn.marks.check_values), the model's values the model's own check."""
    try:
        check_model(ModelConfig(**plain(cfg.model)), where="model.")
        for group, schema in (
            ("train", TrainConfig),
            ("decode", DecodeConfig),
            ("data", DataConfig),
            ("logger", LoggerConfig),
            ("trainer", TrainerConfig),
        ):
            check_values(cfg[group], schema, f"{group}.")
        TrainConfig(**plain(cfg.train))  # the values together (TrainConfig.__post_init__)
        check_values(cfg.row, RowConfig, f"{row_file(cfg.row.name)}: ")
    except ValueError as err:
        raise ConfigError(f"{err} (row '{cfg.row.name}')") from None
    t, row = cfg.train, cfg.row
    for key in ("average_last", "dev_average_last"):
        if row[key] > 1 and t.keep_last < row[key]:
            raise ConfigError(
                f"train.keep_last={t.keep_last} keeps fewer checkpoints than row '{row.name}' averages "
                f"(row.{key}={row[key]})"
            )
    if cfg.data.name == "synthetic" and cfg.data.max_words < 4:
        raise ConfigError(
            f"data.max_words={cfg.data.max_words} must be >= 4 (the synthetic corpus's shortest sentence)"
        )
    if cfg.data.form != "raw" and cfg.data.name != "multi30k":
        raise ConfigError(f"data.form={cfg.data.form}: only data=multi30k is published in that form; use data.form=raw")


def prepare(cfg: DictConfig) -> DictConfig:
    """The run's final config: the row applied, every value checked, interpolations resolved, read-only (its
    folders: aiayn.runspec.RunSpec.of(cfg))."""
    out = resolve_row(cfg)
    validate(out)
    OmegaConf.resolve(out)
    OmegaConf.set_readonly(out, True)
    return out


def typed(node: DictConfig, schema: type[T]) -> T:
    """A group of the prepared config as its schema's dataclass (e.g. `typed(cfg.aggregate, AggregateConfig)`), so
    that code past prepare() reads typed fields, not string keys."""
    out = OmegaConf.to_object(node)
    if not isinstance(out, schema):
        raise TypeError(f"config node is a {type(out).__name__}, not a {schema.__name__}")
    return out
