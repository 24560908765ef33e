"""The DVC pipeline's lists in params.yaml: rows, seeds and each row's extra seeds, read by the stages that run or
tabulate them and edited (comments kept) by `python -m aiayn.seeds`."""

from __future__ import annotations

import dataclasses
import io
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any, TypeVar

import yaml

from aiayn.io import atomic_write_text

T = TypeVar("T")
EXTRA_SEEDS = "extra_seeds"  # row -> seeds it runs besides `seeds` (and base runs them too: differences are paired)
OVERRIDE_GROUPS = ("model", "train", "decode")  # params.yaml's overrides of conf/ for every row (null: none)
# params.yaml's `aggregate` keys: how Table 3 decides, declared before the runs (AggregateConfig; null: the default)
DESIGN_KEYS = ("alpha", "power", "margin_bleu", "bleu_scale", "max_seeds")


def _load(path: Path, key: str) -> dict[str, Any]:
    if not path.is_file():
        raise FileNotFoundError(f"{path} not found (needed for its '{key}' list)")
    try:
        params = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except yaml.YAMLError as err:
        raise ValueError(f"{path}: not valid YAML ({err})") from err
    return params if isinstance(params, dict) else {}


def _items(path: Path, key: str, values: Any, kind: Callable[[Any], T]) -> list[T]:
    """`values` as a list of `kind`; errors name the file, the key and the bad item."""
    if not isinstance(values, list):
        raise ValueError(f"{path}: key '{key}' must be a list, got {values!r}")
    out = []
    for i, value in enumerate(values):
        if isinstance(value, (bool, dict, list)) or value is None:
            raise ValueError(f"{path}: {key}[{i}] = {value!r} is not a {kind.__name__}")
        try:
            out.append(kind(value))
        except (TypeError, ValueError) as err:
            raise ValueError(f"{path}: {key}[{i}] = {value!r} is not a {kind.__name__}") from err
    return out


def read_params_list(path: str | Path, key: str, kind: Callable[[Any], T]) -> list[T]:
    """`key` of a params file as a non-empty list of `kind`; errors name the file, the key and the bad item."""
    return _list_of(_load(Path(path), key), Path(path), key, kind)


def _list_of(params: Mapping[str, Any], path: Path, key: str, kind: Callable[[Any], T]) -> list[T]:
    values = params.get(key)
    if not isinstance(values, list) or not values:
        raise ValueError(f"{path}: key '{key}' must be a non-empty list, got {values!r}")
    return _items(path, key, values, kind)


def read_extra_seeds(path: str | Path) -> dict[str, list[int]]:
    """`extra_seeds` of a params file as row -> list of seeds; absent or empty is {}."""
    return _extra_seeds_of(_load(Path(path), EXTRA_SEEDS), Path(path))


def _extra_seeds_of(params: Mapping[str, Any], path: Path) -> dict[str, list[int]]:
    extra = params.get(EXTRA_SEEDS) or {}
    if not isinstance(extra, dict):
        raise ValueError(f"{path}: key '{EXTRA_SEEDS}' must map rows to lists of seeds, got {extra!r}")
    return {str(row): _items(path, f"{EXTRA_SEEDS}.{row}", seeds or [], int) for row, seeds in extra.items()}


def seeds_per_row(path: str | Path, rows: Iterable[str] | None = None) -> dict[str, list[int]]:
    """Each row's seeds (the file's `rows` unless given): `seeds`, then its `extra_seeds`, each seed once."""
    return seeds_of(_load(Path(path), "seeds"), path, rows)


def seeds_of(params: Mapping[str, Any], path: str | Path, rows: Iterable[str] | None = None) -> dict[str, list[int]]:
    """`seeds_per_row` of params already read (e.g. with `-S` values set); `path` names them in errors."""
    path = Path(path)
    rows = _list_of(params, path, "rows", str) if rows is None else list(rows)
    seeds, extra = _list_of(params, path, "seeds", int), _extra_seeds_of(params, path)
    return {row: list(dict.fromkeys([*seeds, *extra.get(row, [])])) for row in rows}


def add_extra_seeds(path: str | Path, additions: Mapping[str, Iterable[int]]) -> dict[str, list[int]]:
    """Append seeds to rows' `extra_seeds` in the params file, keeping its comments and layout (ruamel's round
    trip), written atomically; returns the new `extra_seeds`. Seeds a row already has are not added twice."""

    from ruamel.yaml.comments import CommentedSeq

    path = Path(path)
    read_extra_seeds(path)  # refuse a malformed file before editing it
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
    return read_extra_seeds(path)


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
    per_row = seeds_per_row(params_file)
    for row, seeds in per_row.items():
        atomic_write_text(
            Path(out_dir) / f"{row}.yaml",
            f"# {row}'s seeds: seeds + {EXTRA_SEEDS}.{row} of {Path(params_file).name} "
            f"(written by pipeline/seeds.py)\nseeds: [{', '.join(map(str, seeds))}]\n",
        )
    return per_row


def read_overrides(path: str | Path) -> list[str]:
    """params.yaml's `model`, `train`, `decode` and `aggregate` mappings as Hydra overrides (`train.lr_factor=2`),
    nulls left out; a key the schema does not have is refused naming the file, the key and the nearest valid one."""
    return overrides_of(_load(Path(path), "overrides"), path)


def overrides_of(params: Mapping[str, Any], path: str | Path) -> list[str]:
    """`read_overrides` of params already read; `path` names them in errors."""
    from aiayn.config.rowfile import nearest_key
    from aiayn.config.schema import ROW_GROUPS

    path, out = Path(path), []
    keys = {group: [f.name for f in dataclasses.fields(ROW_GROUPS[group])] for group in OVERRIDE_GROUPS}
    for group, names in {**keys, "aggregate": list(DESIGN_KEYS)}.items():
        values = params.get(group) or {}
        if not isinstance(values, dict):
            raise ValueError(f"{path}: key '{group}' must map {group} settings to values (null: none), got {values!r}")
        valid = [f"{group}.{f}" for f in names]
        for key, value in values.items():
            if f"{group}.{key}" not in valid:
                hint = nearest_key(f"{group}.{key}", valid)
                raise ValueError(
                    f"{path}: unknown key '{group}.{key}'" + (f" (did you mean '{hint}'?)" if hint else "")
                )
            if value is not None:
                out.append(f"{group}.{key}={_hydra_value(value)}")
    return out


def _hydra_value(value: Any) -> str:
    """A value in Hydra's override grammar: strings quoted, booleans lower-case, numbers as they are."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"
    return str(value)


if __name__ == "__main__":
    import argparse

    parser = argparse.ArgumentParser(prog="python -m aiayn.config.params", description=sync_overrides.__doc__)
    parser.add_argument("--sync", type=Path, required=True, metavar="PARAMS", help="the params file to bring in sync")
    print("\n".join(sync_overrides(parser.parse_args().sync)) or "in sync")
