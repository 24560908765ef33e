"""Checking a row file (conf/row/<name>.yaml) against schema.RowConfig before Hydra composes it.

Hydra's structured merge refuses an unknown key or a wrong type; this check adds what Hydra cannot say, the file and
what was meant: "conf/row/X1.yaml: unknown key 'model.dropuot' (did you mean 'model.dropout'?)".
"""

from __future__ import annotations

import dataclasses
import difflib
import typing
from collections.abc import Iterable
from pathlib import Path

import yaml
from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import ConfigKeyError, OmegaConfBaseException

from aiayn.config.resolve import ConfigError
from aiayn.config.schema import ROW_GROUPS, RowConfig
from aiayn.marks import check_values


def valid_keys(schema: type = RowConfig, prefix: str = "") -> list[str]:
    """Every dotted key a row file may set: metadata fields and each field of the patched groups."""
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


def _unknown(path: Path, key: str, valid: list[str]) -> ConfigError:
    if key.split(".")[0] == "data":
        return ConfigError(
            f"{path}: a row cannot change {key}: every row trains on the one corpus and tokenizer that the fetch "
            f"and bpe stages make; change data for the whole pipeline instead (params.yaml, or dvc exp run -S)"
        )
    return ConfigError(
        unknown_key(path, key, valid) + f"; a row sets metadata ({', '.join(k for k in valid if '.' not in k)}) "
        f"and keys of {', '.join(ROW_GROUPS)} (src/aiayn/config/schema.py)"
    )


def read_row(path: Path | str) -> DictConfig:
    """A row file as a RowConfig (metadata and patch); a file that is not a valid RowConfig patch is refused, the
    message naming the file and the key."""
    path = Path(path)
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as err:
        raise ConfigError(f"{path}: unreadable ({err})") from err
    data = {} if data is None else data
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: a row file is a mapping of keys, got {type(data).__name__}")
    try:
        row = OmegaConf.merge(OmegaConf.structured(RowConfig), data)
    except ConfigKeyError as err:  # Hydra names the key, not the file or what was meant
        key = err.full_key or ""
        group = data.get(key)
        if isinstance(group, dict) and group:  # a whole group a row lacks (data): name its first key
            key = f"{key}.{next(iter(group))}"
        raise _unknown(path, key, valid_keys()) from None
    except OmegaConfBaseException as err:
        raise ConfigError(
            f"{path}: {getattr(err, 'full_key', None) or 'a value'}: {getattr(err, 'msg', err)}"
        ) from None
    assert isinstance(row, DictConfig)  # a RowConfig merged with a mapping
    if row.name != path.stem:
        raise ConfigError(
            f"{path}: name is {row.name!r}, but a row's name must be its file's ({path.stem!r}): runs "
            f"of row=<file> are written under runs/<name>/"
        )
    try:
        check_values(row, RowConfig, f"{path}: ")
        for group, schema in ROW_GROUPS.items():
            check_values(row[group], schema, f"{path}: {group}.")
    except ValueError as err:
        raise ConfigError(str(err)) from None
    return row
