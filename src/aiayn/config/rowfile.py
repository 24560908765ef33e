"""Checking a row file (conf/row/<name>.yaml) against schema.RowConfig before Hydra composes it.

Hydra's structured merge refuses an unknown key or a wrong type; read first through the same schema
(aiayn.config.keys), the message also names the file and what was meant: "conf/row/X1.yaml: unknown key
'model.dropuot' (did you mean 'model.dropout'?)"; and the values are checked against the schemas' marks (sets,
ranges), which Hydra does not know.
"""

from __future__ import annotations

from pathlib import Path

from omegaconf import OmegaConf

from aiayn.config.keys import read_yaml, structured, unknown_key, valid_keys
from aiayn.config.schema import ROW_GROUPS, ConfigError, RowConfig
from aiayn.marks import check_values


def _unknown(path: Path, key: str) -> ConfigError:
    valid = valid_keys(RowConfig)
    if key.split(".")[0] == "data":
        return ConfigError(
            f"{path}: a row cannot change {key}: every row trains on the one corpus and tokenizer that the fetch "
            f"and bpe stages make; change data for the whole pipeline instead (params.yaml, or dvc exp run -S)"
        )
    return ConfigError(
        unknown_key(path, key, valid) + f"; a row sets metadata ({', '.join(k for k in valid if '.' not in k)}) "
        f"and keys of {', '.join(ROW_GROUPS)} (src/aiayn/config/schema.py)"
    )


def read_row(path: Path | str) -> RowConfig:
    """A row file as a RowConfig (metadata and patch); a file that is not a valid RowConfig patch is refused, the
    message naming the file and the key."""
    path = Path(path)
    row = structured(RowConfig, read_yaml(path, "a row file"), path, lambda key: _unknown(path, key))
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
    typed = OmegaConf.to_object(row)
    assert isinstance(typed, RowConfig)
    return typed
