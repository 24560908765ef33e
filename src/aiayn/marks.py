"""The marks a config field carries, declared once in the schemas, and what derives from them.

`relative(...)`: a size or step count (>= 1) a row gives in the paper's units (aiayn.config.resolve scales it).
`choice(...)`: a value from a fixed set. `observed(...)`: how a run is watched or scheduled, never a number a table
reads (not in its fingerprint or folder). `averaging(...)`: how a run is checkpointed: a number only for a row that
averages checkpoints (aiayn.run.folders). `at_least=` / `unit=` / `positive=`: the range of a value. `check_values` is
the one check of sets and ranges, run on the model's config when it is built and on every group before a run.
Standard library only: the model's own config (aiayn.model.config) uses them, and the model needs no Hydra.

`Sealable` is every config dataclass's base: `seal` makes a built config read-only, so that nothing changes a value
after it was checked (aiayn.config.resolve.prepare seals the run's config); `dataclasses.replace` still makes a
changed copy, which is not sealed.
"""

from __future__ import annotations

import dataclasses
import functools
import typing
from collections.abc import Mapping, Sequence
from typing import Any

# The metadata keys of a field are the marks' names: relative, choices, observed, averaging, range.


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
    return dataclasses.field(default=default, metadata={**marks, **({"range": bound} if bound else {})})


def relative(default: int) -> Any:
    """A size or step count whose paper value is `default`; a row's value v becomes scale_value * v / default."""
    return mark(default, at_least=1, relative=True)


def choice(default: str | None, *others: str) -> Any:
    """A string that must be one of (default, *others); the default is the paper's (None: set by another key)."""
    return mark(default, choices=(default, *others))


def observed(default: Any, **bounds: Any) -> Any:
    """How a run is observed or scheduled, not what it computes: a resume may differ in it, and a run that differs
    only in it is the same run."""
    return mark(default, **bounds, observed=True)


def averaging(default: Any, **bounds: Any) -> Any:
    """How a run is checkpointed: it changes no weight, but which weights a row that averages its last checkpoints
    (row.average_last > 1, Table 2; row.dev_average_last > 1, Table 3 at the tiny scale) averages, so it is part of
    such a row's run and of no other's."""
    return mark(default, **bounds, averaging=True)


class Sealable:
    """A config dataclass that `seal` can make read-only (assigning a field then raises FrozenInstanceError)."""

    __slots__ = ()

    def __setattr__(self, name: str, value: Any) -> None:
        if self.__dict__.get("_sealed"):
            raise dataclasses.FrozenInstanceError(
                f"cannot assign {type(self).__name__}.{name}: the run's config is read-only once checked; make a "
                f"changed copy with dataclasses.replace"
            )
        object.__setattr__(self, name, value)


def seal(config: Any) -> Any:
    """Make a built config and every config dataclass inside it read-only; returns it."""
    if isinstance(config, Sealable):
        for f in dataclasses.fields(config):  # type: ignore[arg-type]  # a Sealable is a dataclass
            seal(getattr(config, f.name))
        object.__setattr__(config, "_sealed", True)
    return config


def marked(schema: type, name: str) -> dict[str, Any]:
    """Field name -> its mark `name` ("relative", "choices", ...), for the fields of `schema` that carry it."""
    return {f.name: f.metadata[name] for f in dataclasses.fields(schema) if f.metadata.get(name)}


def _out_of_range(value: Any, bound: Any, integer: bool) -> str | None:
    """Why `value` breaks `bound` (a range mark), or None."""
    if isinstance(value, bool) or not isinstance(value, int if integer else (int, float)):
        return "must be an integer" if integer else "must be a number"
    if bound == "[0, 1)":
        return None if 0.0 <= value < 1.0 else "must be in [0, 1)"
    if bound == "> 0":
        return None if value > 0 else "must be > 0"
    return None if value >= bound[0] else f"must be >= {bound[0]}{bound[1]}"


@functools.cache
def _integer_fields(schema: type) -> frozenset[str]:
    """The fields of `schema` declared as integers (`int`, `int | None`, `list[int]`), from the type hints."""

    def integer(hint: Any) -> bool:
        args = [a for a in typing.get_args(hint) if a is not type(None)]
        return hint is int or (bool(args) and all(integer(a) for a in args))

    return frozenset(name for name, hint in typing.get_type_hints(schema).items() if integer(hint))


def check_values(values: Mapping[str, Any] | Any, schema: type, where: str = "") -> None:
    """Refuse a value outside its field's set (each item of a list field) or range, naming `where` and the key. None
    is left alone (a row's unset key, a null for "as the scale has it")."""
    integers = _integer_fields(schema)
    for f in dataclasses.fields(schema):
        allowed, bound = f.metadata.get("choices"), f.metadata.get("range")
        if allowed or bound:
            value = values[f.name] if isinstance(values, Mapping) else getattr(values, f.name)
            for item in value if isinstance(value, Sequence) and not isinstance(value, str) else [value]:
                if item is not None and allowed and item not in allowed:
                    raise ValueError(f"{where}{f.name}={item!r} is not one of {allowed}")
                if item is not None and bound and (why := _out_of_range(item, bound, f.name in integers)):
                    raise ValueError(f"{where}{f.name}={item!r} {why}")
