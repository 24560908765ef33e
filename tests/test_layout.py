"""The package's architecture, checked on the source: its layers (a unit imports only units of layers below its own;
imports inside functions count), a root of folders with few loose modules, each folder saying what lives there, the
layout map in docs/usage.md drawn from those lines; and each fact's one home: one module loads checkpoints, and run
folders and data files are named and found in aiayn.run.folders alone."""

from __future__ import annotations

import ast
import itertools
import re
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "src" / "aiayn"
SOURCES = sorted(PACKAGE.rglob("*.py"))


def _unit(module: str) -> str | None:
    """A subpackage or top-level module of aiayn (aiayn.report.table3 -> report)."""
    parts = module.split(".")
    if len(parts) < 2 or parts[0] != "aiayn":
        return None
    return parts[1] if (PACKAGE / parts[1]).is_dir() or (PACKAGE / f"{parts[1]}.py").is_file() else None


def unit_imports(package: Path = PACKAGE) -> dict[str, set[str]]:
    """Each unit -> the other units it imports anywhere in its files (top level or inside a function)."""
    edges: dict[str, set[str]] = {}
    for path in sorted(package.rglob("*.py")):
        me = _unit(".".join(("aiayn", *path.relative_to(package).with_suffix("").parts)))
        if me is None or me == "__init__":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
            else:
                continue
            edges.setdefault(me, set()).update(u for n in names if (u := _unit(n)) not in (None, me))
    return edges


def cycles(edges: dict[str, set[str]]) -> list[tuple[str, str]]:
    def reach(start: str) -> set[str]:
        seen, todo = set(), [start]
        while todo:
            for b in edges.get(todo.pop(), ()):
                if b not in seen:
                    seen.add(b)
                    todo.append(b)
        return seen

    reached = {u: reach(u) for u in edges}
    return [(a, b) for a, b in itertools.combinations(sorted(edges), 2) if b in reached[a] and a in reached[b]]


# The units of aiayn from the bottom up: a unit may import the units of lower layers only (never one of its own layer
# or above). Leaves are the root modules.
LAYERS = (
    ("io", "progress", "marks", "paper"),
    ("model", "eval"),
    ("config",),
    ("run",),
    ("data", "cost"),
    ("checkpoint",),
    ("train", "decode"),
    ("inference", "verdicts"),
    ("report", "export"),
    ("stages",),
)
LAYER = {unit: i for i, units in enumerate(LAYERS) for unit in units}
ROOT_MODULES_AT_MOST = 4  # besides __init__.py


def layer_violations(edges: dict[str, set[str]]) -> list[str]:
    return sorted(
        f"{a} (layer {LAYER[a]}) imports {b} (layer {LAYER[b]})"
        for a, bs in edges.items()
        for b in bs
        if LAYER[b] >= LAYER[a]
    )


def test_every_unit_has_a_layer():
    units = {p.stem for p in PACKAGE.iterdir() if p.suffix == ".py" and p.stem != "__init__"}
    units |= {p.name for p in PACKAGE.iterdir() if p.is_dir() and (p / "__init__.py").is_file()}
    assert units == set(LAYER)


def test_each_unit_imports_only_the_layers_below_it():
    assert layer_violations(unit_imports()) == []


def test_an_import_upwards_is_found():
    assert layer_violations({"model": {"train"}, "train": {"model"}}) == ["model (layer 1) imports train (layer 6)"]


def test_no_two_units_import_each_other():
    assert cycles(unit_imports()) == []


def test_the_root_holds_folders_and_few_modules():
    modules = sorted(p.name for p in PACKAGE.glob("*.py") if p.name != "__init__.py")
    assert len(modules) <= ROOT_MODULES_AT_MOST, modules
    loose = [
        p.name
        for p in PACKAGE.rglob("*")
        if p.is_dir() and p.name != "__pycache__" and not (p / "__init__.py").is_file()
    ]
    assert loose == [], f"folders without an __init__.py saying what lives there: {loose}"


def _folder_lines() -> list[str]:
    folders = sorted(p for p in PACKAGE.iterdir() if p.is_dir() and (p / "__init__.py").is_file())
    return [
        f"  {d.name + '/':<14} {ast.get_docstring(ast.parse((d / '__init__.py').read_text())).splitlines()[0]}"
        for d in folders
    ]


def test_each_folder_says_in_one_line_what_lives_there():
    for line in _folder_lines():
        assert line.split(maxsplit=1)[1].strip().endswith("."), line


def test_the_layout_map_is_the_tree():
    usage = (PACKAGE.parents[1] / "docs" / "usage.md").read_text(encoding="utf-8")
    block = usage.split("## Layout", 1)[1].split("```", 2)[1]
    mapped = [line for line in block.splitlines() if line.startswith("  ") and line.split()[0].endswith("/")]
    assert mapped == _folder_lines(), "docs/usage.md's layout map: its folder lines should read\n" + "\n".join(
        _folder_lines()
    )
    modules = {p.name for p in PACKAGE.glob("*.py") if p.name != "__init__.py"}
    assert modules == {
        line.split()[0] for line in block.splitlines() if line.startswith("  ") and line.split()[0].endswith(".py")
    }
    top = {p.name for p in PACKAGE.parents[1].iterdir() if p.is_dir() and not p.name.startswith(".")}
    named = {line.split("/")[0] for line in block.splitlines() if line and not line.startswith(" ")}
    assert {"conf", "pipeline", "src", "tests", "bench", "studies", "gpu", "docs"} <= named
    assert not {"bench", "studies", "gpu"} - top


def test_a_cycle_is_found_through_an_import_inside_a_function(tmp_path: Path):
    (tmp_path / "a.py").write_text("from aiayn import b\n")
    (tmp_path / "b.py").write_text("def f():\n    from aiayn.c import x\n")
    (tmp_path / "c").mkdir()
    (tmp_path / "c" / "x.py").write_text("import aiayn.a\n")
    global PACKAGE
    saved, PACKAGE = PACKAGE, tmp_path
    try:
        assert cycles(unit_imports(tmp_path)) == [("a", "b"), ("a", "c"), ("b", "c")]
    finally:
        PACKAGE = saved


def _strings(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    docstrings = {
        id(n.body[0].value)
        for n in ast.walk(tree)
        if isinstance(n, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
        and n.body
        and isinstance(n.body[0], ast.Expr)
        and isinstance(n.body[0].value, ast.Constant)
    }
    return [
        n.value
        for n in ast.walk(tree)
        if isinstance(n, ast.Constant) and isinstance(n.value, str) and id(n) not in docstrings
    ]


# A file name the stages share, or a piece of one, as code spells it (a glob, an f-string's part, a suffix): written
# in aiayn.run.folders and nowhere else. A message's example ("such as runs/base/seed1") names no file the code opens.
SHARED_NAME = re.compile(
    r"^(.*/)?(spm(\.model)?|stats\.json|(train|valid|test)\.(src|tgt)|\.(src|tgt)|eval\.json|train\.json|curve\.csv|"
    r"config\.yaml|last\.ckpt|seed\*.*|/seed)$"
)


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: str(p.relative_to(PACKAGE)))
def test_shared_file_names_and_run_folders_live_in_runspec(path: Path):
    if path.relative_to(PACKAGE).as_posix() == "run/folders.py":
        return
    named = [s for s in _strings(path) if SHARED_NAME.search(s)]
    assert not named, f"{path.relative_to(PACKAGE)} spells {named}: take the name from aiayn.run.folders"


def test_one_module_loads_checkpoints():
    loading = [p.relative_to(PACKAGE).as_posix() for p in SOURCES if "torch.load(" in p.read_text(encoding="utf-8")]
    assert loading == ["checkpoint/reader.py"]
