"""The DVC pipeline's lists in params.yaml: rows, seeds and each row's extra seeds, read by the stages that run or
tabulate them and edited (comments kept) by `python -m aiayn.seeds`."""

from __future__ import annotations

import dataclasses
import io
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import yaml

from aiayn.io import atomic_write_text

if TYPE_CHECKING:  # the seeds stage reads this module without the schemas (its DVC deps say so)
    from aiayn.config.schema import AggregateConfig

T = TypeVar("T")
EXTRA_SEEDS = "extra_seeds"  # row -> seeds it runs besides `seeds` (and base runs them too: differences are paired)
OVERRIDE_GROUPS = ("model", "train", "decode")  # params.yaml's overrides of conf/ for every row (null: none)


@dataclass(frozen=True)
class Params:
    """A params file's contents (`Params.read`, or values already read, e.g. with `-S` values set), read as the
    pipeline's lists; every error names the file, the key and the bad item."""

    data: Mapping[str, Any]
    path: Path

    @classmethod
    def read(cls, path: str | Path) -> Params:
        path = Path(path)
        if not path.is_file():
            raise FileNotFoundError(f"{path} not found (needed for its rows, seeds and overrides)")
        try:
            data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
        except yaml.YAMLError as err:
            raise ValueError(f"{path}: not valid YAML ({err})") from err
        return cls(data if isinstance(data, dict) else {}, path)

    def _items(self, key: str, values: Any, kind: Callable[[Any], T]) -> list[T]:
        if not isinstance(values, list):
            raise ValueError(f"{self.path}: key '{key}' must be a list, got {values!r}")
        out = []
        for i, value in enumerate(values):
            try:
                if isinstance(value, (bool, dict, list)) or value is None:
                    raise TypeError(value)
                out.append(kind(value))
            except (TypeError, ValueError) as err:
                raise ValueError(f"{self.path}: {key}[{i}] = {value!r} is not a {kind.__name__}") from err
        return out

    def list_of(self, key: str, kind: Callable[[Any], T]) -> list[T]:
        """`key` as a non-empty list of `kind`."""
        values = self.data.get(key)
        if not isinstance(values, list) or not values:
            raise ValueError(f"{self.path}: key '{key}' must be a non-empty list, got {values!r}")
        return self._items(key, values, kind)

    def extra_seeds(self) -> dict[str, list[int]]:
        """`extra_seeds` as row -> list of seeds; absent or empty is {}."""
        extra = self.data.get(EXTRA_SEEDS) or {}
        if not isinstance(extra, dict):
            raise ValueError(f"{self.path}: key '{EXTRA_SEEDS}' must map rows to lists of seeds, got {extra!r}")
        return {str(row): self._items(f"{EXTRA_SEEDS}.{row}", seeds or [], int) for row, seeds in extra.items()}

    def seeds_per_row(self, rows: Iterable[str] | None = None) -> dict[str, list[int]]:
        """Each row's seeds (the file's `rows` unless given): `seeds`, then its `extra_seeds`, each seed once."""
        rows = self.list_of("rows", str) if rows is None else list(rows)
        seeds, extra = self.list_of("seeds", int), self.extra_seeds()
        return {row: list(dict.fromkeys([*seeds, *extra.get(row, [])])) for row in rows}

    def design(self) -> dict[str, Any]:
        """The `aggregate` block's design keys, each null or missing one at its default (DesignConfig)."""
        from aiayn.config.schema import DESIGN_KEYS, DesignConfig

        given, default = self.data.get("aggregate") or {}, DesignConfig()
        out: dict[str, Any] = {k: getattr(default, k) if given.get(k) is None else given[k] for k in DESIGN_KEYS}
        out["columns"] = list(out["columns"])
        return out

    def overrides(self) -> list[str]:
        """The `model`, `train`, `decode` and `aggregate` mappings as Hydra overrides (`train.lr_factor=2`), nulls
        left out; a key the schema does not have is refused naming the nearest valid one."""
        from aiayn.config.rowfile import unknown_key
        from aiayn.config.schema import DESIGN_KEYS, ROW_GROUPS

        out = []
        keys = {group: [f.name for f in dataclasses.fields(ROW_GROUPS[group])] for group in OVERRIDE_GROUPS}
        for group, names in {**keys, "aggregate": list(DESIGN_KEYS)}.items():
            values = self.data.get(group) or {}
            if not isinstance(values, dict):
                raise ValueError(
                    f"{self.path}: key '{group}' must map {group} settings to values (null: none), got {values!r}"
                )
            valid = [f"{group}.{f}" for f in names]
            for key, value in values.items():
                if f"{group}.{key}" not in valid:
                    raise ValueError(unknown_key(self.path, f"{group}.{key}", valid))
                if value is not None:
                    out.append(f"{group}.{key}={_hydra_value(value)}")
        return out


def add_extra_seeds(path: str | Path, additions: Mapping[str, Iterable[int]]) -> dict[str, list[int]]:
    """Append seeds to rows' `extra_seeds` in the params file, keeping its comments and layout (ruamel's round
    trip), written atomically; returns the new `extra_seeds`. Seeds a row already has are not added twice."""

    from ruamel.yaml.comments import CommentedSeq

    path = Path(path)
    Params.read(path).extra_seeds()  # refuse a malformed file before editing it
    rt, data = _round_trip(path)
    if not isinstance(data.get(EXTRA_SEEDS), dict):
        data[EXTRA_SEEDS] = {}
    extra = data[EXTRA_SEEDS]
    for row, seeds in additions.items():
        current = [int(s) for s in extra.get(row) or []]
        merged = CommentedSeq(dict.fromkeys([*current, *map(int, seeds)]))
        merged.fa.set_flow_style()  # "A1: [4, 5]", one line a row
        extra[row] = merged
    _write(rt, data, path)
    return Params.read(path).extra_seeds()


def _round_trip(path: Path) -> tuple[Any, Any]:
    """A params file read with ruamel, which writes it back with its comments and layout."""
    from ruamel.yaml import YAML

    rt = YAML()
    rt.indent(mapping=2, sequence=4, offset=2)  # the shipped file's "  - base" lists
    rt.width = 4096  # never rewrap a comment
    rt.representer.add_representer(type(None), lambda rep, _: rep.represent_scalar("tag:yaml.org,2002:null", "null"))
    return rt, rt.load(path.read_text(encoding="utf-8"))


def _write(rt: Any, data: Any, path: Path) -> None:
    buf = io.StringIO()
    rt.dump(data, buf)
    atomic_write_text(path, buf.getvalue())


def sync_overrides(path: str | Path) -> list[str]:
    """Make params.yaml's `model`, `train` and `decode` blocks list every key of their schemas in schema order (DVC
    refuses `-S key=...` for a key the file lacks): a missing key is added as null, a key the schema no longer has
    is removed, values and comments stay. Returns what changed ("+train.x", "-train.y"); the shipped file is in
    sync (tests/config/test_params.py): `python -m aiayn.config.params --sync params.yaml` after a schema edit."""
    from ruamel.yaml.comments import CommentedMap

    from aiayn.config.schema import ROW_GROUPS

    path = Path(path)
    rt, data = _round_trip(path)
    changed = []
    for group in OVERRIDE_GROUPS:
        if not data.get(group):
            data[group] = CommentedMap()
        block, keys = data[group], [f.name for f in dataclasses.fields(ROW_GROUPS[group])]
        changed += [f"-{group}.{k}" for k in block if k not in keys] + [f"+{group}.{k}" for k in keys if k not in block]
        ordered = {k: block.get(k) for k in keys}
        for key in list(block):
            del block[key]
        for i, (key, value) in enumerate(ordered.items()):
            block.insert(i, key, value)
    if changed:
        _write(rt, data, path)
    return changed


def write_seed_lists(params_file: str | Path, out_dir: str | Path) -> dict[str, list[int]]:
    """One `{row}.yaml` holding `seeds: [...]` per row of the params file: what train@{row} and evaluate@{row} run
    (seeds_from) and track, so a row's stages rerun only when its own seeds change."""
    per_row = Params.read(params_file).seeds_per_row()
    for row, seeds in per_row.items():
        atomic_write_text(
            Path(out_dir) / f"{row}.yaml",
            f"# {row}'s seeds: seeds + {EXTRA_SEEDS}.{row} of {Path(params_file).name} "
            f"(written by pipeline/seeds.py)\nseeds: [{', '.join(map(str, seeds))}]\n",
        )
    return per_row


def _hydra_value(value: Any) -> str:
    """A value in Hydra's override grammar: strings quoted, booleans lower-case, lists of those, numbers as they
    are."""
    if isinstance(value, (list, tuple)):
        return "[" + ",".join(_hydra_value(v) for v in value) + "]"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"
    return str(value)


def rows_and_seeds(a: AggregateConfig) -> tuple[list[str], dict[str, list[int]], list[int]]:
    """The rows, each row's seeds to tabulate and the pilot seeds (the ones every row runs first), from the config's
    `aggregate` group: its rows and seeds when given (the same seeds for every row), else params.yaml's (at
    `a.params_file`: DVC's lists, `seeds` plus the row's `extra_seeds`)."""
    if a.rows is not None and a.seeds is not None:
        return list(a.rows), {row: list(a.seeds) for row in a.rows}, list(a.seeds)
    if not Path(a.params_file).exists():
        raise FileNotFoundError(f"{a.params_file} not found: pass aggregate.rows=[...] and aggregate.seeds=[...]")
    params = Params.read(a.params_file)
    rows = list(a.rows) if a.rows is not None else params.list_of("rows", str)
    if a.seeds is not None:
        return rows, {row: list(a.seeds) for row in rows}, list(a.seeds)
    return rows, params.seeds_per_row(rows), params.list_of("seeds", int)


if __name__ == "__main__":
    import argparse

    parser = argparse.ArgumentParser(prog="python -m aiayn.config.params", description=sync_overrides.__doc__)
    parser.add_argument("--sync", type=Path, required=True, metavar="PARAMS", help="the params file to bring in sync")
    print("\n".join(sync_overrides(parser.parse_args().sync)) or "in sync")
