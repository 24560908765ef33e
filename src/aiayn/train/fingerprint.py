"""What a run depends on, decided in one place: its fingerprint (what a checkpoint must share with a run to be
resumed by it: every setting that can change a number a table reads, the code the run executes, the tokenizer and
the encoded data) and the wandb id that derives from it. Where the run lives is aiayn.run.folders's.

`CANNOT_CHANGE_RESULTS` is the one list of modules whose edits cannot change a number a table reads: `code_digest`
leaves them out of the code a run executes, and the DVC audit (tests/integration/pipeline/test_dvc.py) lets a stage read
those that change no output at all without declaring them.
"""

from __future__ import annotations

import ast
import dataclasses
import hashlib
import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from functools import cache
from importlib.util import find_spec
from pathlib import Path
from typing import Any

from aiayn.config.schema import Config, TrainConfig, averaged
from aiayn.marks import marked
from aiayn.run import folders


@dataclass(frozen=True)
class Unhashed:
    """Why a module cannot change a number a table reads; `no_output`: it changes no file a stage writes either
    (what is logged or shown), so DVC need not rerun a stage when it changes."""

    why: str
    no_output: bool = False


CANNOT_CHANGE_RESULTS: dict[str, Unhashed] = {
    "aiayn.config.resolve": Unhashed("a row applied at a scale and checked: a run gets its effect as settings"),
    "aiayn.config.schema": Unhashed("defaults: a run gets them as settings, which the fingerprint holds"),
    "aiayn.run.curve": Unhashed("the curve file's columns: how a run is watched"),
    "aiayn.train.fingerprint": Unhashed(
        "what is hashed: a setting it starts or stops counting changes the digest itself"
    ),
    "aiayn.cost.flops": Unhashed("counted FLOPs, for the MFU a run logs (Table 2's FLOPs are the aggregate stage's)"),
    "aiayn.io": Unhashed("atomic writes; what is read is hashed as data"),
    "aiayn.marks": Unhashed("what the settings are; the settings themselves are in the fingerprint"),
    "aiayn.model.config": Unhashed("the model's defaults and their check: a run gets them as settings"),
    "aiayn.progress": Unhashed("progress lines in the log; it writes nothing", no_output=True),
    "aiayn.run.folders": Unhashed("names and paths"),
    "aiayn.run.tracking": Unhashed("wandb: how a run is watched"),
    "aiayn.train.mfu": Unhashed("the MFU a run logs: how a run is watched"),
}


def module_file(name: str) -> str:
    """A module's source file relative to the checkout (aiayn.io -> src/aiayn/io.py)."""
    return "src/" + name.replace(".", "/") + ".py"


# Train settings a resume may differ in: its length (a longer run continues a shorter one), and those of how a run
# is observed (schema `observed`), which change no number.
def _resumable_across() -> set[str]:
    return {*marked(TrainConfig, "observed"), "max_steps"}


def fingerprint(cfg: Config, bpe_dir: Path) -> dict[str, Any]:
    """What a checkpoint must share with this run to be resumed by it: the row, the seed, every model setting and
    every train setting but the run's length and how it is watched (its checkpoint cadence too, unless the row
    averages checkpoints), the code the train stage executes, the tokenizer and the encoded data."""
    averages = averaged(cfg.row) > 1  # else its checkpoint cadence changes none of its numbers
    skip = _resumable_across() | (set() if averages else set(marked(TrainConfig, "averaging")))
    return {
        "code_sha256": code_digest(TRAIN_ENTRY),
        "row": cfg.row.name,
        "seed": int(cfg.seed),
        "model": dataclasses.asdict(cfg.model),
        "train": {k: v for k, v in dataclasses.asdict(cfg.train).items() if k not in skip},
        "data": {"name": cfg.data.name, **data_digest(Path(bpe_dir))},
    }


def wandb_id(identity: Mapping[str, Any]) -> str:
    """A wandb run id that is the same for the same fingerprint, else different: a killed, requeued or resumed
    run continues one wandb run."""
    return hashlib.sha256(json.dumps(identity, sort_keys=True, default=str).encode()).hexdigest()[:24]


# The encoded splits a training run reads (aiayn.data.binary): train to learn, valid to validate.
TRAINING_SPLITS = ("train", "valid")


def data_digest(bpe_dir: Path) -> dict[str, str]:
    """The tokenizer's sha256 and each training split's, as the bpe stage recorded them in the split headers
    (aiayn.data.binary); a header without one is hashed here."""
    from aiayn.data.binary import split_sha256
    from aiayn.data.tokenizer import file_sha256

    out = {"tokenizer_sha256": file_sha256(bpe_dir / folders.TOKENIZER)}
    for split in TRAINING_SPLITS:
        out[f"{split}_sha256"] = split_sha256(bpe_dir / split)
    return out


TRAIN_ENTRY = "aiayn.stages.train"  # the train stage's module: its imports are the code a training run executes


def code_digest(entry: str, root: Path | None = None) -> str:
    """One hash of the code a stage executes: `entry` and every aiayn module it imports, directly or not, at the top
    of a file or inside a function (read from the source, so the set is the same in every process), except those
    in CANNOT_CHANGE_RESULTS. Each module counts by its syntax tree without docstrings: a comment, a docstring
    or a line break does not retrain. `root` is the folder holding the aiayn package (default: the one imported)."""
    root = Path(root) if root is not None else _package_root()
    digest = hashlib.sha256()
    for name, path in sorted(_closure(entry, root).items()):
        if name not in CANNOT_CHANGE_RESULTS:
            digest.update(name.encode() + b"\0" + ast.dump(_tree(path)).encode() + b"\0")
    return digest.hexdigest()


def imported_modules(entry: str, root: Path | None = None) -> list[str]:
    """The aiayn modules `code_digest` hashes for `entry`, by name."""
    root = Path(root) if root is not None else _package_root()
    return sorted(name for name in _closure(entry, root) if name not in CANNOT_CHANGE_RESULTS)


def _package_root() -> Path:
    """The folder holding the imported aiayn package (src/ in a checkout)."""
    spec = find_spec("aiayn")
    assert spec is not None and spec.origin is not None, "aiayn is imported, so it has a spec"
    return Path(spec.origin).parent.parent


def _closure(entry: str, root: Path) -> dict[str, Path]:
    found: dict[str, Path] = {}
    todo = [entry]
    while todo:
        name = todo.pop()
        path = _module_file(name, root)
        if name in found or path is None:
            continue
        found[name] = path
        todo += [m for m in _imports(name, path, root) if m not in found]
    return found


def _module_file(name: str, root: Path) -> Path | None:
    base = root.joinpath(*name.split("."))
    for path in (base.with_suffix(".py"), base / "__init__.py"):
        if path.is_file():
            return path
    return None


def _imports(name: str, path: Path, root: Path) -> Iterator[str]:
    """The aiayn modules a module imports anywhere in it (packages bring their __init__)."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    for node in ast.walk(_tree(path)):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative: the package, less one level for each dot past the first
                parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(parts + ([base] if base else []))
            targets = [base] + [f"{base}.{alias.name}" for alias in node.names]
        else:
            continue
        for target in targets:
            if target == "aiayn" or target.startswith("aiayn."):
                parts = target.split(".")
                for i in range(1, len(parts) + 1):  # importing a.b.c runs a/__init__ and a/b/__init__ too
                    if _module_file(".".join(parts[:i]), root) is not None:
                        yield ".".join(parts[:i])


@cache
def _parsed(path: Path, mtime_ns: int) -> ast.Module:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    for node in ast.walk(tree):  # docstrings say what code does; they do not change it
        body = getattr(node, "body", None)
        if (
            isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
            and body
            and isinstance(body[0], ast.Expr)
            and isinstance(body[0].value, ast.Constant)
            and isinstance(body[0].value.value, str)
        ):
            node.body = body[1:] or [ast.Pass()]
    return tree


def _tree(path: Path) -> ast.Module:
    return _parsed(path, path.stat().st_mtime_ns)
