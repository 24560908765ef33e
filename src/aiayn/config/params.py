"""The DVC pipeline's lists in params.yaml (rows, seeds), read by the stages that run or tabulate them."""
from __future__ import annotations

from pathlib import Path
from typing import Callable, TypeVar

import yaml

T = TypeVar("T")


def read_params_list(path: str | Path, key: str, kind: Callable[[object], T]) -> list[T]:
    """`key` of a params file as a non-empty list of `kind`; errors name the file, the key and the bad item."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"{path} not found (needed for its '{key}' list)")
    try:
        params = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except yaml.YAMLError as err:
        raise ValueError(f"{path}: not valid YAML ({err})") from err
    values = params.get(key) if isinstance(params, dict) else None
    if not isinstance(values, list) or not values:
        raise ValueError(f"{path}: key '{key}' must be a non-empty list, got {values!r}")
    out = []
    for i, value in enumerate(values):
        if isinstance(value, bool) or isinstance(value, (dict, list)) or value is None:
            raise ValueError(f"{path}: {key}[{i}] = {value!r} is not a {kind.__name__}")
        try:
            out.append(kind(value))
        except (TypeError, ValueError) as err:
            raise ValueError(f"{path}: {key}[{i}] = {value!r} is not a {kind.__name__}") from err
    return out
