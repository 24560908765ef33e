"""Turning a composed config into the run's config: apply the row at the scale, then validate everything.

A row holds the paper's values for what it changes (conf/row/*.yaml). At a scale whose base model differs from the
paper's, a size becomes `scale_base * row_value / paper_base`: "d_model: 256" is half the scale's base width.
"""
from __future__ import annotations

import copy

from omegaconf import DictConfig, OmegaConf

from aiayn.config.schema import ModelConfig, TrainConfig

PAPER_BASE = ModelConfig()
PAPER_STEPS = TrainConfig().max_steps
SIZE_KEYS = ("n_layers", "d_model", "d_ff", "n_heads", "d_k", "d_v")
POS_ENCODINGS = ("sinusoidal", "learned", "none")


class ConfigError(ValueError):
    """A config that cannot run; the message names the key (and the row or scale) and the reason."""


def scaled_size(key: str, row_value: int, scale_base: int, row: str, scale: str) -> int:
    """The row's change of `key`, relative to the paper's base, applied to the scale's base value."""
    value = scale_base * row_value / getattr(PAPER_BASE, key)
    if value < 1 - 1e-9:
        raise ConfigError(
            f"row '{row}' does not fit scale '{scale}': {key}={row_value} at paper scale is "
            f"{row_value / getattr(PAPER_BASE, key):g}x base, which makes {key}={value:g} (< 1) at this scale "
            f"(its base {key} is {scale_base}); use a larger scale or drop the row"
        )
    return max(1, round(value))


def resolve_row(cfg: DictConfig) -> DictConfig:
    """Return a copy of `cfg` with `row` applied to `model` and `train` (sizes scaled, the rest absolute)."""
    out = copy.deepcopy(cfg)
    row, scale = cfg.row, cfg.scale.name
    for key in SIZE_KEYS:
        if row[key] is not None:
            out.model[key] = scaled_size(key, row[key], cfg.model[key], row.name, scale)
    for key in ("dropout", "pos_encoding"):
        if row[key] is not None:
            out.model[key] = row[key]
    if row.label_smoothing is not None:
        out.train.label_smoothing = row.label_smoothing
    if row.train_steps is not None:
        out.train.max_steps = max(1, round(cfg.train.max_steps * row.train_steps / PAPER_STEPS))
    if cfg.train.keep_last is None:
        out.train.keep_last = row.average_last if row.average_last > 1 else 0
    return out


def validate(cfg: DictConfig) -> None:
    """Refuse, before any work starts, a config whose values cannot run; the message names the key."""
    m, t = cfg.model, cfg.train
    for key in SIZE_KEYS:
        if m[key] < 1:
            raise ConfigError(f"model.{key}={m[key]} must be a positive integer (row '{cfg.row.name}')")
    if m.pos_encoding not in POS_ENCODINGS:
        raise ConfigError(f"model.pos_encoding={m.pos_encoding!r} is not one of {POS_ENCODINGS}")
    if not 0.0 <= m.dropout < 1.0:
        raise ConfigError(f"model.dropout={m.dropout} must be in [0, 1)")
    if not 0.0 <= t.label_smoothing < 1.0:
        raise ConfigError(f"train.label_smoothing={t.label_smoothing} must be in [0, 1)")
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
        raise ConfigError(f"train.max_steps={t.max_steps} (row '{cfg.row.name}') is not a multiple of "
                          f"train.snapshot_every_steps={t.snapshot_every_steps}: the final weights would not be averaged")
    if t.snapshot_every_steps < 0:
        raise ConfigError(f"train.snapshot_every_steps={t.snapshot_every_steps} must be >= 0")
    if t.keep_last < 0:
        raise ConfigError(f"train.keep_last={t.keep_last} must be >= 0 (null: the row's average_last)")
    if cfg.row.average_last > 1 and t.keep_last < cfg.row.average_last:
        raise ConfigError(
            f"train.keep_last={t.keep_last} keeps fewer checkpoints than row '{cfg.row.name}' averages "
            f"(row.average_last={cfg.row.average_last})"
        )
    if cfg.decode.strategy not in ("beam", "greedy"):
        raise ConfigError(f"decode.strategy={cfg.decode.strategy!r} is not 'beam' or 'greedy'")
    if cfg.decode.beam_size < 1:
        raise ConfigError(f"decode.beam_size={cfg.decode.beam_size} must be >= 1")
    for key in ("train_size", "valid_size", "test_size", "vocab_size"):
        if cfg.data[key] < 1:
            raise ConfigError(f"data.{key}={cfg.data[key]} must be >= 1")
    if cfg.data.name == "synthetic" and cfg.data.max_words < 4:
        raise ConfigError(f"data.max_words={cfg.data.max_words} must be >= 4 (the synthetic corpus's shortest "
                          "sentence)")
    if cfg.data.lexicon_scale <= 0:
        raise ConfigError(f"data.lexicon_scale={cfg.data.lexicon_scale} must be > 0")


def prepare(cfg: DictConfig) -> DictConfig:
    """The run's final config: the row applied, every value checked, interpolations resolved, read-only."""
    out = resolve_row(cfg)
    validate(out)
    OmegaConf.resolve(out)
    OmegaConf.set_readonly(out, True)
    return out
