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

from aiayn.config.schema import ROW_GROUPS, TABLES, ModelConfig, choices, relative_keys

SIZE_KEYS = relative_keys(ModelConfig)


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
        relative, allowed = relative_keys(schema), choices(schema)
        for key, value in row[group].items():
            if value is None:
                continue
            if key in allowed and value not in allowed[key]:
                raise ConfigError(f"{row_file(row.name)}: {group}.{key}={value!r} is not one of {allowed[key]}")
            out[group][key] = scaled(group, key, value, cfg[group][key], row.name, scale) if key in relative else value
    if row.train.batch_tokens is not None and out.train.max_tokens > out.train.batch_tokens:
        out.train.max_tokens = out.train.batch_tokens  # a micro-batch never exceeds the row's (smaller) update
    if out.train.keep_last is None:  # the row's own keep_last, else what its averaging needs
        out.train.keep_last = row.average_last if row.average_last > 1 else 0
    return out


def _check_choices(cfg: DictConfig) -> None:
    for group, schema in ROW_GROUPS.items():
        for key, allowed in choices(schema).items():
            if cfg[group][key] not in allowed:
                raise ConfigError(f"{group}.{key}={cfg[group][key]!r} is not one of {allowed}")
    unknown = [t for t in cfg.row.tables if t not in TABLES]
    if unknown:
        raise ConfigError(f"{row_file(cfg.row.name)}: tables lists {unknown[0]!r}; a row can be in {TABLES}")


def validate(cfg: DictConfig) -> None:
    """Refuse, before any work starts, a config whose values cannot run; the message names the key."""
    _check_choices(cfg)
    m, t = cfg.model, cfg.train
    for key in SIZE_KEYS:
        if m[key] < 1:
            raise ConfigError(f"model.{key}={m[key]} must be a positive integer (row '{cfg.row.name}')")
    for key in ("dropout", "attention_dropout"):
        if not 0.0 <= m[key] < 1.0:
            raise ConfigError(f"model.{key}={m[key]} must be in [0, 1)")
    if m.pos_encoding == "sinusoidal" and m.d_model % 2:
        raise ConfigError(f"model.d_model={m.d_model} must be even for sinusoidal positions (row '{cfg.row.name}')")
    if m.pos_encoding == "rotary" and m.d_k % 2:
        raise ConfigError(
            f"model.d_k={m.d_k} must be even for rotary positions, which rotate pairs of query/key "
            f"dimensions (row '{cfg.row.name}')"
        )
    if not 0.0 <= t.label_smoothing < 1.0:
        raise ConfigError(f"train.label_smoothing={t.label_smoothing} must be in [0, 1)")
    if t.grad_clip < 0:
        raise ConfigError(f"train.grad_clip={t.grad_clip} must be >= 0 (0: no clipping)")
    if t.length_bucket < 0:
        raise ConfigError(f"train.length_bucket={t.length_bucket} must be >= 0 (0: lengths as they are)")
    if t.loss_chunk_tokens < 0:
        raise ConfigError(f"train.loss_chunk_tokens={t.loss_chunk_tokens} must be >= 0 (0: the whole logits at once)")
    if not (0.0 <= t.adam_beta1 < 1.0 and 0.0 <= t.adam_beta2 < 1.0):
        raise ConfigError(f"train.adam_beta1={t.adam_beta1} and train.adam_beta2={t.adam_beta2} must be in [0, 1)")
    for key in ("lr_factor", "adam_eps"):
        if not t[key] > 0:
            raise ConfigError(f"train.{key}={t[key]} must be > 0")
    for key in ("max_steps", "batch_tokens", "max_tokens", "warmup_steps", "val_every_steps", "log_every_steps"):
        if t[key] < 1:
            raise ConfigError(f"train.{key}={t[key]} must be >= 1")
    if t.max_tokens > t.batch_tokens:
        raise ConfigError(f"train.max_tokens={t.max_tokens} exceeds train.batch_tokens={t.batch_tokens}")
    if t.ckpt_every_steps and t.max_steps % t.ckpt_every_steps:
        raise ConfigError(
            f"train.max_steps={t.max_steps} (row '{cfg.row.name}') is not a multiple of train.ckpt_every_steps="
            f"{t.ckpt_every_steps}: the final weights would never be checkpointed, so neither evaluated nor averaged"
        )
    if t.snapshot_every_steps and t.max_steps % t.snapshot_every_steps:
        raise ConfigError(
            f"train.max_steps={t.max_steps} (row '{cfg.row.name}') is not a multiple of "
            f"train.snapshot_every_steps={t.snapshot_every_steps}: the final weights would not be averaged"
        )
    if t.snapshot_every_steps < 0:
        raise ConfigError(f"train.snapshot_every_steps={t.snapshot_every_steps} must be >= 0")
    if t.keep_last < 0:
        raise ConfigError(f"train.keep_last={t.keep_last} must be >= 0 (null: the row's average_last)")
    if cfg.row.average_last > 1 and t.keep_last < cfg.row.average_last:
        raise ConfigError(
            f"train.keep_last={t.keep_last} keeps fewer checkpoints than row '{cfg.row.name}' averages "
            f"(row.average_last={cfg.row.average_last})"
        )
    if cfg.decode.beam_size < 1:
        raise ConfigError(f"decode.beam_size={cfg.decode.beam_size} must be >= 1")
    if cfg.decode.compact_every is not None and cfg.decode.compact_every < 1:
        raise ConfigError(f"decode.compact_every={cfg.decode.compact_every} must be >= 1 (null: by device)")
    for key in ("train_size", "valid_size", "test_size", "vocab_size"):
        if cfg.data[key] < 1:
            raise ConfigError(f"data.{key}={cfg.data[key]} must be >= 1")
    if cfg.data.name == "synthetic" and cfg.data.max_words < 4:
        raise ConfigError(
            f"data.max_words={cfg.data.max_words} must be >= 4 (the synthetic corpus's shortest sentence)"
        )
    if cfg.data.lexicon_scale <= 0:
        raise ConfigError(f"data.lexicon_scale={cfg.data.lexicon_scale} must be > 0")


def prepare(cfg: DictConfig) -> DictConfig:
    """The run's final config: the row applied, every value checked, interpolations resolved, read-only (its
    folders: aiayn.runspec.RunSpec.of(cfg))."""
    out = resolve_row(cfg)
    validate(out)
    OmegaConf.resolve(out)
    OmegaConf.set_readonly(out, True)
    return out
