"""The DVC pipeline's params.yaml, read through one structured config (schema.ParamsConfig): the rows, seeds and
each row's extra seeds that the stages run or tabulate, and the overrides of conf/ for every row; edited (comments
kept) by `aiayn-extend` and kept in step with the schemas by `--sync`."""

from __future__ import annotations

import dataclasses
import io
import subprocess
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from omegaconf import OmegaConf

from aiayn.config.keys import read_yaml, structured
from aiayn.config.schema import DESIGN_KEYS, ROW_GROUPS, ConfigError, DesignConfig, ParamsConfig, TablesConfig
from aiayn.io import atomic_write_text

EXTRA_SEEDS = "extra_seeds"  # row -> seeds it runs besides `seeds` (and base runs them too: differences are paired)
OVERRIDE_GROUPS = ("model", "train", "decode")  # params.yaml's overrides of conf/ for every row (null: none)


@dataclass(frozen=True)
class Params:
    """A params file read through schema.ParamsConfig (`Params.read`, or `Params.of` for values already read, e.g.
    with `-S` values set): the pipeline's lists and overrides. A misspelt key or a wrong type is refused as the file
    is read, naming the file and the key (aiayn.config.keys)."""

    values: ParamsConfig
    path: Path

    @classmethod
    def read(cls, path: str | Path) -> Params:
        """The params file at `path`. In a DVC project, a file it refuses (a key `dvc exp run -S` has just written)
        is put back as the last read accepted it, the refused one kept beside it: `keep_accepted`."""
        path = Path(path)
        if not path.is_file():
            raise FileNotFoundError(f"{path} not found (needed for its rows, seeds and overrides)")
        try:
            params = cls.of(read_yaml(path, "a params file"), path)
        except ConfigError as err:
            raise ConfigError(f"{err}{restore_accepted(path)}") from err
        keep_accepted(path)
        return params

    @classmethod
    def of(cls, data: dict[str, Any], path: str | Path) -> Params:
        values = OmegaConf.to_object(structured(ParamsConfig, data, path))
        assert isinstance(values, ParamsConfig)
        return cls(values, Path(path))

    def _listed(self, key: str) -> list[Any]:
        values = list(getattr(self.values, key))
        if not values:
            raise ValueError(f"{self.path}: key '{key}' must be a non-empty list")
        return values

    def rows(self) -> list[str]:
        """`rows`, non-empty."""
        return self._listed("rows")

    def seeds(self) -> list[int]:
        """`seeds`, non-empty, each once."""
        return list(dict.fromkeys(self._listed("seeds")))

    def extra_seeds(self) -> dict[str, list[int]]:
        """`extra_seeds` as row -> list of seeds; absent or empty is {}."""
        return {row: list(seeds) for row, seeds in self.values.extra_seeds.items()}

    def seeds_per_row(self, rows: Iterable[str] | None = None) -> dict[str, list[int]]:
        """Each row's seeds (the file's `rows` unless given): `seeds`, then its `extra_seeds`, each seed once."""
        rows = self.rows() if rows is None else list(rows)
        seeds, extra = self.seeds(), self.extra_seeds()
        return {row: list(dict.fromkeys([*seeds, *extra.get(row, [])])) for row in rows}

    def design(self) -> DesignConfig:
        """The `design` block's keys, each null or missing one at its default."""
        given = self.values.design
        return DesignConfig(**{k: v for k in DESIGN_KEYS if (v := getattr(given, k)) is not None})

    def overrides(self) -> list[str]:
        """The `model`, `train`, `decode` and `design` keys that are not null, as Hydra overrides
        (`train.lr_factor=2.0`), in schema order."""
        out = []
        for group in (*OVERRIDE_GROUPS, "design"):
            node = getattr(self.values, group)
            out += [
                f"{group}.{f.name}={_hydra_value(value)}"
                for f in dataclasses.fields(node)
                if (value := getattr(node, f.name)) is not None
            ]
        return out


def _accepted_copy(path: Path) -> Path | None:
    """Where the last accepted version of a DVC project's params file is kept (.dvc/tmp/, DVC's own scratch folder,
    never committed); None outside a DVC project."""
    dvc = path.resolve().parent / ".dvc"
    return dvc / "tmp" / f"{path.name}.accepted" if dvc.is_dir() else None


def keep_accepted(path: Path) -> None:
    """Keep a copy of the params file just accepted, for `restore_accepted`."""
    copy = _accepted_copy(path)
    if copy is not None and (not copy.is_file() or copy.read_bytes() != path.read_bytes()):
        atomic_write_text(copy, path.read_text(encoding="utf-8"))


def restore_accepted(path: Path) -> str:
    """Put back a refused params file as the last read accepted it, or as the git commit has it before any was, and
    keep the refused file as `<name>.refused`: `dvc exp run -S +train.lr_factr=2` writes its key into params.yaml
    before any stage can refuse it, and every later `dvc repro` would fail on it. What was done, for the message."""
    copy = _accepted_copy(path)
    accepted = copy.read_bytes() if copy is not None and copy.is_file() else _committed(path)
    if accepted is None or accepted == path.read_bytes():
        return ""
    refused = path.with_name(f"{path.name}.refused")
    atomic_write_text(refused, path.read_text(encoding="utf-8"))
    atomic_write_text(path, accepted.decode("utf-8"))
    return f"; {path} is back as it was accepted, the refused file kept as {refused}"


def _committed(path: Path) -> bytes | None:
    """The params file as the DVC project's git HEAD has it, where it is a git repository with a commit."""
    root = path.resolve().parent
    if not (root / ".dvc").is_dir() or not (root / ".git").exists():
        return None
    try:
        shown = subprocess.run(["git", "show", f"HEAD:./{path.name}"], cwd=root, capture_output=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):  # no git binary
        return None
    return shown.stdout if shown.returncode == 0 else None  # no commit, or the file never committed


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


def rows_and_seeds(a: TablesConfig) -> tuple[list[str], dict[str, list[int]], list[int]]:
    """The rows, each row's seeds to tabulate and the pilot seeds (the ones every row runs first), from the config's
    `tables` group: its rows and seeds when given (the same seeds for every row), else params.yaml's (at
    `a.params_file`: DVC's lists, `seeds` plus the row's `extra_seeds`)."""
    if a.rows is not None and a.seeds is not None:
        return list(a.rows), {row: list(a.seeds) for row in a.rows}, list(a.seeds)
    if not Path(a.params_file).exists():
        raise FileNotFoundError(f"{a.params_file} not found: pass tables.rows=[...] and tables.seeds=[...]")
    params = Params.read(a.params_file)
    rows = list(a.rows) if a.rows is not None else params.rows()
    if a.seeds is not None:
        return rows, {row: list(a.seeds) for row in rows}, list(a.seeds)
    return rows, params.seeds_per_row(rows), params.seeds()


if __name__ == "__main__":
    import argparse

    parser = argparse.ArgumentParser(prog="python -m aiayn.config.params", description=sync_overrides.__doc__)
    parser.add_argument("--sync", type=Path, required=True, metavar="PARAMS", help="the params file to bring in sync")
    print("\n".join(sync_overrides(parser.parse_args().sync)) or "in sync")
