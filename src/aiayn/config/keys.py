"""A YAML file Hydra does not compose (params.yaml) or reads without naming it (a row file), read through its
structured config: OmegaConf refuses a misspelt key or a wrong type, and the message names the file, the key and
what was meant, e.g. "params.yaml: unknown key 'train.lr_factr' (did you mean 'train.lr_factor'?)"."""

from __future__ import annotations

import dataclasses
import difflib
import re
import typing
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import yaml
from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import ConfigKeyError, OmegaConfBaseException

from aiayn.config.resolve import ConfigError


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


def _reason(err: OmegaConfBaseException) -> str:
    """OmegaConf's reason, first line, with its node classes said in the file's words."""
    msg = str(getattr(err, "msg", err)).splitlines()[0]
    if "is not a ListConfig, list or tuple" in msg:
        return "must be a list"
    if "Cannot merge DictConfig with" in msg or ("is not a subclass of" in msg and "Patch" in msg):
        return "must be a mapping of keys"
    return msg


def structured(
    schema: type, data: dict[str, Any], path: Path | str, unknown: Callable[[str], ConfigError] | None = None
) -> DictConfig:
    """`data` merged onto `schema`'s structured config, one top-level key at a time (so an error names its key);
    refused as a ConfigError naming `path` and the key: an unknown key with the valid key meant (or `unknown(key)`'s
    message), a wrong type or value with the value given and OmegaConf's reason."""
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
            key = getattr(err, "full_key", None) or str(top)
            reason, given = _reason(err), _given(data, key)
            shown = "" if given is ... or reason.startswith("Value") else f" = {given!r}"
            raise ConfigError(f"{path}: {key}{shown}: {reason}") from None
    assert isinstance(out, DictConfig)
    return out
