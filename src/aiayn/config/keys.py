"""A YAML file Hydra does not compose (params.yaml) or reads without naming it (a row file), read through its
structured config: OmegaConf refuses a misspelt key or a wrong type, and the message names the file, the key and
what was meant, e.g. "params.yaml: unknown key 'train.lr_factr' (did you mean 'train.lr_factor'?)"."""

from __future__ import annotations

import dataclasses
import difflib
import re
import types
import typing
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import yaml
from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import ConfigKeyError, OmegaConfBaseException

from aiayn.config.schema import Config, ConfigError


def valid_keys(schema: type, prefix: str = "") -> list[str]:
    """Every dotted key of a schema: its fields, and each field of a nested dataclass."""
    hints = typing.get_type_hints(schema)
    keys = []
    for f in dataclasses.fields(schema):
        if dataclasses.is_dataclass(hints[f.name]):
            keys += valid_keys(hints[f.name], f"{prefix}{f.name}.")
        else:
            keys.append(prefix + f.name)
    return keys


def unknown_key(path: Path | str, key: str, candidates: Iterable[str]) -> str:
    """The message for an unknown `key` in file `path`, naming the valid key most likely meant: by the whole dotted
    key, else by its last part (a flat `d_model` written before rows became patches means `model.d_model`)."""
    candidates = list(candidates)
    by_leaf = {c.rsplit(".", 1)[-1]: c for c in candidates}
    match = difflib.get_close_matches(key, candidates, n=1, cutoff=0.75) or [
        by_leaf[m] for m in difflib.get_close_matches(key.rsplit(".", 1)[-1], list(by_leaf), n=1, cutoff=0.7)
    ]
    return f"{path}: unknown key '{key}'" + (f" (did you mean '{match[0]}'?)" if match else "")


def read_yaml(path: Path, what: str) -> dict[str, Any]:
    """A YAML mapping (an empty file is {}); an unreadable file or another kind of document is refused, naming it
    and saying what the file is (`what`, e.g. "a row file")."""
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as err:
        raise ConfigError(f"{path}: not valid YAML ({err})") from err
    data = {} if data is None else data
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: {what} is a mapping of keys, got {type(data).__name__}")
    return data


def _given(data: Any, key: str) -> Any:
    """The value at a dotted key with list indices (`extra_seeds.A1[1]`) in plain data; ... where there is none."""
    node = data
    for part in re.findall(r"[^.\[\]]+|\[\d+\]", key):
        try:
            node = node[int(part[1:-1])] if part.startswith("[") else node[part]
        except (KeyError, IndexError, TypeError, ValueError):
            return ...
    return node


def _bare(hint: Any) -> Any:
    """A type hint without its Optional."""
    args = [a for a in typing.get_args(hint) if a is not type(None)]
    return args[0] if typing.get_origin(hint) in (typing.Union, types.UnionType) and len(args) == 1 else hint


def misshapen(schema: type, data: dict[str, Any], prefix: str = "") -> tuple[str, str] | None:
    """The first key of `data` whose value has the wrong shape for `schema` (a list where a mapping belongs, a
    scalar where a list does), and what it must be; None when every value has its shape. Checked before OmegaConf
    merges, whose own messages for these say it in its node classes' words."""
    hints = typing.get_type_hints(schema)
    for name in (f.name for f in dataclasses.fields(schema)):
        value, hint, key = data.get(name), _bare(hints[name]), prefix + name
        if value is None:
            continue
        origin = typing.get_origin(hint)
        if dataclasses.is_dataclass(hint) or origin is dict:
            if not isinstance(value, dict):
                return key, "must be a mapping of keys"
            if dataclasses.is_dataclass(hint) and (found := misshapen(hint, value, f"{key}.")):  # type: ignore[arg-type]
                return found
        elif origin is list and not isinstance(value, list):
            return key, "must be a list"
    return None


def structured(
    schema: type, data: dict[str, Any], path: Path | str, unknown: Callable[[str], ConfigError] | None = None
) -> DictConfig:
    """`data` merged onto `schema`'s structured config, one top-level key at a time (so an error names its key);
    refused as a ConfigError naming `path` and the key: an unknown key with the valid key meant (or `unknown(key)`'s
    message), a value of the wrong shape (`misshapen`) with the value given, a wrong type or value with OmegaConf's
    reason."""
    if shape := misshapen(schema, data):
        key, reason = shape
        raise ConfigError(f"{path}: {key} = {_given(data, key)!r}: {reason}")
    out = OmegaConf.structured(schema)
    for top, value in data.items():
        try:
            out = OmegaConf.merge(out, {top: value})
        except ConfigKeyError as err:
            key = err.full_key or str(top)
            group = _given(data, key)
            if isinstance(group, dict) and group:  # a whole group the schema lacks: name its first key
                key = f"{key}.{next(iter(group))}"
            raise (unknown(key) if unknown else ConfigError(unknown_key(path, key, valid_keys(schema)))) from None
        except OmegaConfBaseException as err:
            key = getattr(err, "full_key", None) or str(top)  # OmegaConf's reason names the value itself
            raise ConfigError(f"{path}: {key}: {str(getattr(err, 'msg', err)).splitlines()[0]}") from None
    assert isinstance(out, DictConfig)
    return out


def _known(data: Any, schema: type) -> Any:
    """`data` with only the keys `schema` has (nested dataclasses alike; a free-form dict field kept whole)."""
    if not isinstance(data, dict):
        return data
    hints, names = typing.get_type_hints(schema), {f.name for f in dataclasses.fields(schema)}
    return {k: _known(v, hints[k]) if dataclasses.is_dataclass(hints[k]) else v for k, v in data.items() if k in names}


def recorded_config(path: Path) -> Config:
    """A run's config.yaml (the train stage writes it from the run's Config) as this version reads it: a key this
    version no longer has is dropped, one it has added takes its default (as aiayn.model.config.recorded reads a
    model); a value of the wrong type is refused naming the file and the key."""
    data = _known(read_yaml(Path(path), "a run's config"), Config)
    built = OmegaConf.to_object(structured(Config, data, path))
    assert isinstance(built, Config)
    return built
