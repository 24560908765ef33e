"""The marks a config field carries, declared once in the schemas, and what derives from them.

`relative(...)`: a size or step count (>= 1) a row gives in the paper's units (aiayn.config.resolve scales it).
`choice(...)`: a value from a fixed set. `observed(...)`: how a run is watched or scheduled, never a number a table
reads (not in its fingerprint or folder). `averaging(...)`: how a run is checkpointed: a number only for a row that
averages checkpoints (aiayn.runspec). `at_least=` / `unit=` / `positive=`: the range of a value. `check_values` is
the one check of sets and ranges, run on the model's config when it is built and on every group before a run.
Standard library only: the model's own config (aiayn.model.config) uses them, and the model needs no Hydra.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

# A training run's numbers do not depend on this module (the marks say what the settings are; the settings
# themselves are in the fingerprint): aiayn.runspec leaves it out of the run's fingerprint.
CANNOT_CHANGE_RESULTS = True

RELATIVE, CHOICES, OBSERVED, AVERAGING, RANGE = (
    "aiayn_relative",
    "aiayn_choices",
    "aiayn_observed",
    "aiayn_averaging",
    "aiayn_range",
)


def mark(
    default: Any,
    at_least: float | None = None,
    unit: bool = False,
    positive: bool = False,
    note: str = "",
    **marks: Any,
) -> Any:
    """A field with `default` and marks: `at_least` (inclusive; `note` says what the bound value means), `unit` (in
    [0, 1)) or `positive` (> 0) for its range."""
    bound = "[0, 1)" if unit else "> 0" if positive else None if at_least is None else (at_least, note)
    return dataclasses.field(default=default, metadata={**marks, **({RANGE: bound} if bound else {})})


def relative(default: int) -> Any:
    """A size or step count whose paper value is `default`; a row's value v becomes scale_value * v / default."""
    return mark(default, at_least=1, **{RELATIVE: True})


def choice(default: str | None, *others: str) -> Any:
    """A string that must be one of (default, *others); the default is the paper's (None: set by another key)."""
    return mark(default, **{CHOICES: (default, *others)})


def observed(default: Any, **bounds: Any) -> Any:
    """How a run is observed or scheduled, not what it computes: a resume may differ in it, and a run that differs
    only in it is the same run."""
    return mark(default, **bounds, **{OBSERVED: True})


def averaging(default: Any, **bounds: Any) -> Any:
    """How a run is checkpointed: it changes no weight, but which weights a row that averages its last checkpoints
    (row.average_last > 1, Table 2) averages, so it is part of such a row's run and of no other's."""
    return mark(default, **bounds, **{AVERAGING: True})


def _marked(schema: type, key: str) -> tuple[str, ...]:
    return tuple(f.name for f in dataclasses.fields(schema) if f.metadata.get(key))


def relative_keys(schema: type) -> tuple[str, ...]:
    return _marked(schema, RELATIVE)


def observed_keys(schema: type) -> tuple[str, ...]:
    return _marked(schema, OBSERVED)


def averaging_keys(schema: type) -> tuple[str, ...]:
    return _marked(schema, AVERAGING)


def choices(schema: type) -> dict[str, tuple[str, ...]]:
    """Field name -> allowed values, for the fields of `schema` marked with a set of values."""
    return {f.name: f.metadata[CHOICES] for f in dataclasses.fields(schema) if CHOICES in f.metadata}


def _out_of_range(value: Any, bound: Any, integer: bool) -> str | None:
    """Why `value` breaks `bound` (a RANGE mark), or None."""
    if isinstance(value, bool) or not isinstance(value, int if integer else (int, float)):
        return "must be an integer" if integer else "must be a number"
    if bound == "[0, 1)":
        return None if 0.0 <= value < 1.0 else "must be in [0, 1)"
    if bound == "> 0":
        return None if value > 0 else "must be > 0"
    return None if value >= bound[0] else f"must be >= {bound[0]}{bound[1]}"


def check_values(values: Mapping[str, Any] | Any, schema: type, where: str = "") -> None:
    """Refuse a value outside its field's set (each item of a list field) or range, naming `where` and the key. None
    is left alone (a row's unset key, a null for "as the scale has it")."""
    for f in dataclasses.fields(schema):
        if CHOICES not in f.metadata and RANGE not in f.metadata:
            continue
        value = values[f.name] if isinstance(values, Mapping) else getattr(values, f.name)
        for item in value if isinstance(value, Sequence) and not isinstance(value, str) else [value]:
            if item is None:
                continue
            if CHOICES in f.metadata and item not in f.metadata[CHOICES]:
                raise ValueError(f"{where}{f.name}={item!r} is not one of {f.metadata[CHOICES]}")
            if RANGE in f.metadata and (why := _out_of_range(item, f.metadata[RANGE], type(f.default) is int)):
                raise ValueError(f"{where}{f.name}={item!r} {why}")
