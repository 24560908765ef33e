"""The marks a config field carries, declared once in the schemas, and what derives from them.

`relative(...)`: a size or step count a row gives in the paper's units (aiayn.config.resolve scales it).
`choice(...)`: a value from a fixed set, checked before anything runs (`check_choices`, the one place).
`observed(...)`: how a run is watched or scheduled, never a number a table reads (not in its fingerprint or folder).
`averaging(...)`: how a run is checkpointed: a number only for a row that averages checkpoints (aiayn.runspec).
Standard library only: the model's own config (aiayn.model.config) uses them, and the model needs no Hydra.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

# A training run's numbers do not depend on this module (the marks say what the settings are; the settings
# themselves are in the fingerprint): aiayn.runspec leaves it out of the run's fingerprint.
CANNOT_CHANGE_RESULTS = True

RELATIVE, CHOICES, OBSERVED, AVERAGING = "aiayn_relative", "aiayn_choices", "aiayn_observed", "aiayn_averaging"


def relative(default: int) -> Any:
    """A size or step count whose paper value is `default`; a row's value v becomes scale_value * v / default."""
    return dataclasses.field(default=default, metadata={RELATIVE: True})


def choice(default: str | None, *others: str) -> Any:
    """A string that must be one of (default, *others); the default is the paper's (None: set by another key)."""
    return dataclasses.field(default=default, metadata={CHOICES: (default, *others)})


def observed(default: Any) -> Any:
    """How a run is observed or scheduled, not what it computes: a resume may differ in it, and a run that differs
    only in it is the same run."""
    return dataclasses.field(default=default, metadata={OBSERVED: True})


def averaging(default: Any) -> Any:
    """How a run is checkpointed: it changes no weight, but which weights a row that averages its last checkpoints
    (row.average_last > 1, Table 2) averages, so it is part of such a row's run and of no other's."""
    return dataclasses.field(default=default, metadata={AVERAGING: True})


def _marked(schema: type, mark: str) -> tuple[str, ...]:
    return tuple(f.name for f in dataclasses.fields(schema) if f.metadata.get(mark))


def relative_keys(schema: type) -> tuple[str, ...]:
    return _marked(schema, RELATIVE)


def observed_keys(schema: type) -> tuple[str, ...]:
    return _marked(schema, OBSERVED)


def averaging_keys(schema: type) -> tuple[str, ...]:
    return _marked(schema, AVERAGING)


def choices(schema: type) -> dict[str, tuple[str, ...]]:
    """Field name -> allowed values, for the fields of `schema` marked with a set of values."""
    return {f.name: f.metadata[CHOICES] for f in dataclasses.fields(schema) if CHOICES in f.metadata}


def check_choices(values: Mapping[str, Any] | Any, schema: type, where: str = "") -> None:
    """Refuse a value outside its field's set (each item of a list field), naming `where` and the key. None is
    left alone (a row's unset key, a null for "as the scale has it")."""
    for key, allowed in choices(schema).items():
        value = values[key] if isinstance(values, Mapping) else getattr(values, key)
        for item in value if isinstance(value, Sequence) and not isinstance(value, str) else [value]:
            if item is not None and item not in allowed:
                raise ValueError(f"{where}{key}={item!r} is not one of {allowed}")
