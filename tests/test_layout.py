"""Each fact has one home, checked on the source: no two units of aiayn import each other (imports inside functions
count), one module loads checkpoints, and run folders and data files are named and found in aiayn.run.folders alone."""

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


def test_no_two_units_import_each_other():
    assert cycles(unit_imports()) == []


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
    if path.name == "run/folders.py":
        return
    named = [s for s in _strings(path) if SHARED_NAME.search(s)]
    assert not named, f"{path.relative_to(PACKAGE)} spells {named}: take the name from aiayn.run.folders"


def test_one_module_loads_checkpoints():
    loading = [p.relative_to(PACKAGE).as_posix() for p in SOURCES if "torch.load(" in p.read_text(encoding="utf-8")]
    assert loading == ["checkpoint/reader.py"]
