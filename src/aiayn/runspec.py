"""Which run this is, decided in one place: its folders, the files in them, its fingerprint and its wandb id.

A run is a row, a seed and a variant: the result-changing settings in which it differs from its row at its scale
(aiayn.config.composition finds them). From those, RunSpec names its folders, `runs/{row}/{variant}/seed{seed}` for the
train stage and `evals/{row}/{variant and decode settings}/seed{seed}` for the evaluate stage, and the files in
them. `fingerprint` says what a checkpoint must share with a run to be resumed by it: every setting that can change
a number a table reads, the code the run executes, the tokenizer and the encoded data; the wandb id derives from
it. The stages, the wandb artifacts, the tables' readers and the benchmarks all take their paths from here.

A row that averages checkpoints for Table 2 (`row.average_last` > 1) is one whose checkpoint cadence and
`keep_last` change its numbers (which weights are averaged); for every other row they are how the run is watched.
"""

from __future__ import annotations

import ast
import hashlib
import json
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from functools import cache
from importlib.util import find_spec
from pathlib import Path
from typing import Any

# Names, paths and hashes, never a number a table reads (a setting it counts or stops counting changes the
# fingerprint's content by itself): an edit here does not retrain (code_digest leaves marked modules out).
CANNOT_CHANGE_RESULTS = True

# The files of a run, declared once. The train stage's folder:
CONFIG = "config.yaml"  # the resolved config, written first (a crashed run still says what it was)
TRAIN_SUMMARY = "train.json"  # written last, when the run finished
CURVE = "curve.csv"  # aiayn.curve's columns
CHECKPOINTS = "checkpoints"  # last.ckpt to resume from, step-*.ckpt snapshots to average
LAST_CHECKPOINT = "last.ckpt"
SNAPSHOT = "step-{step:08d}"  # an averaging snapshot's name, without its .ckpt
SNAPSHOT_GLOB = "step-*.ckpt"
FINGERPRINT = "aiayn_fingerprint"  # the checkpoint key holding the run's fingerprint (`fingerprint` below)
LOCK = ".lock"
STALE = "stale-checkpoints-"  # + a time stamp: checkpoints of another config, moved aside
# The evaluate stage's folder:
EVAL = "eval.json"


def hyps_file(split: str) -> str:
    """The hypotheses of one decoded split ("valid", "test")."""
    return f"hyps.{split}.txt"


EVAL_ONLY = ("decode",)  # groups that change an evaluation, not the training run
MAX_SLUG = 64  # characters of a folder name before it is shortened with a hash


def _is_eval_only(key: str) -> bool:
    return key.removeprefix("row.").split(".")[0] in EVAL_ONLY or key == "row.average_last"


def _averaging() -> tuple[str, ...]:
    """Train settings of how a run is checkpointed (schema `averaging`): they change which weights a row that
    averages checkpoints averages, and no other row's numbers."""
    from aiayn.config.schema import TrainConfig
    from aiayn.marks import marked

    return tuple(marked(TrainConfig, "averaging"))


def _is_averaging(key: str) -> bool:
    return key.removeprefix("row.") in {f"train.{k}" for k in _averaging()}


def _value(value: Any) -> str:
    """A value as a Hydra override would spell it, integral floats without ".0" (lr_factor=2)."""
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def slug(variant: Mapping[str, Any]) -> str:
    """A readable folder name for a variant ("lr_factor=2,dropout=0.2"), "" for none; keys by their last part
    unless two share it; names longer than MAX_SLUG characters keep a prefix and gain a short hash of the whole."""
    keys = list(variant)
    if not keys:
        return ""
    leaves = [k.rsplit(".", 1)[-1] for k in keys]
    names = [leaf if leaves.count(leaf) == 1 else key for key, leaf in zip(keys, leaves)]
    text = ",".join(f"{name}={_value(variant[key])}" for name, key in zip(names, keys))
    text = re.sub(r"[^A-Za-z0-9._=,+-]", "_", text)
    if len(text) <= MAX_SLUG:
        return text
    digest = hashlib.sha256(text.encode()).hexdigest()[:8]
    return f"{text[: MAX_SLUG - 9].rstrip(',')}-{digest}"


@dataclass(frozen=True)
class RunSpec:
    """One run: a row and seed, its variant (dotted key -> value, in the order aiayn.config.composition gives) and
    whether the row averages checkpoints, under the runs/ and evals/ roots."""

    row: str
    seed: int
    variant: tuple[tuple[str, Any], ...] = ()
    averages: bool = False
    runs: Path = Path("runs")
    evals: Path = Path("evals")
    tuning: Path = Path("decode_tuning")

    @classmethod
    def of(cls, cfg) -> RunSpec:
        """The run a composed config (with its `variant`) describes."""
        return cls.for_row(
            cfg.row.name,
            int(cfg.seed),
            dict(cfg.variant),
            int(cfg.row.average_last),
            runs=cfg.paths.runs,
            evals=cfg.paths.evals,
            tuning=cfg.paths.tuning,
        )

    @classmethod
    def for_row(
        cls,
        row: str,
        seed: int,
        variant: Mapping[str, Any] | None = None,
        average_last: int = 0,
        runs: Path | str = "runs",
        evals: Path | str | None = None,
        tuning: Path | str = "decode_tuning",
    ) -> RunSpec:
        """A row's run of a variant, for a reader that knows the row's own average_last (from its row file or
        config); the variant may set it (row.average_last). `evals` defaults to `runs` (one folder for both)."""
        variant = dict(variant or {})
        averages = int(variant.get("row.average_last", average_last)) > 1
        return cls(
            row,
            int(seed),
            tuple(variant.items()),
            averages,
            Path(runs),
            Path(runs if evals is None else evals),
            Path(tuning),
        )

    def _folder(self, evaluation: bool) -> str:
        kept = {
            k: v
            for k, v in self.variant
            if (evaluation or not _is_eval_only(k)) and (self.averages or not _is_averaging(k))
        }
        name = slug(kept)
        return f"{name}/" if name else ""

    @property
    def train_folder(self) -> str:
        """ "" for the row itself, else the variant's folder name with its "/" (lr_factor=2/)."""
        return self._folder(evaluation=False)

    @property
    def eval_folder(self) -> str:
        """The train folder's name with the decode settings (and average_last) that change the evaluation."""
        return self._folder(evaluation=True)

    @property
    def run_dir(self) -> Path:
        return self.runs / self.row / f"{self.train_folder}seed{self.seed}"

    @property
    def eval_dir(self) -> Path:
        return self.evals / self.row / f"{self.eval_folder}seed{self.seed}"

    @property
    def tuning_dir(self) -> Path:
        """pipeline/tune_decode.py's folder for this run's decoding sweep."""
        return self.tuning / self.row / f"{self.train_folder}seed{self.seed}"

    @property
    def checkpoints(self) -> Path:
        return self.run_dir / CHECKPOINTS

    def name(self, job_type: str = "train") -> str:
        """ "{row}-s{seed}", with the variant's folder name between for a variant (base-lr_factor=2-s1)."""
        folder = (self.train_folder if job_type == "train" else self.eval_folder).rstrip("/")
        return f"{self.row}-{folder}-s{self.seed}" if folder else f"{self.row}-s{self.seed}"

    def shown(self, path: Path) -> str:
        """A path of this run named from its root folder's own name down ("evals/A1/seed2/eval.json"), so that
        messages and tables do not depend on where the checkout lives."""
        for root in (self.runs, self.evals, self.tuning):
            if path.is_relative_to(root):
                return f"{root.name}/{path.relative_to(root).as_posix()}"
        return str(path)


# What a run's numbers depend on -------------------------------------------------------------------------------------


# Train settings a resume may differ in: its length (a longer run continues a shorter one), and those of how a run
# is observed (schema `observed`), which change no number.
def _resumable_across() -> set[str]:
    from aiayn.config.schema import TrainConfig
    from aiayn.marks import marked

    return {*marked(TrainConfig, "observed"), "max_steps"}


def fingerprint(cfg, bpe_dir: Path) -> dict[str, Any]:
    """What a checkpoint must share with this run to be resumed by it: the row, the seed, every model setting and
    every train setting but the run's length and how it is watched (its checkpoint cadence too, unless the row
    averages checkpoints), the code the train stage executes, the tokenizer and the encoded data."""
    from aiayn.config.resolve import plain

    spec = RunSpec.of(cfg)
    skip = _resumable_across() | (set() if spec.averages else set(_averaging()))
    return {
        "code_sha256": code_digest(TRAIN_ENTRY),
        "row": cfg.row.name,
        "seed": int(cfg.seed),
        "model": plain(cfg.model),
        "train": {k: v for k, v in plain(cfg.train).items() if k not in skip},
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

    out = {"tokenizer_sha256": file_sha256(bpe_dir / "spm.model")}
    for split in TRAINING_SPLITS:
        out[f"{split}_sha256"] = split_sha256(bpe_dir / split)
    return out


TRAIN_ENTRY = "aiayn.train.fit"  # the train stage's module: its imports are the code a training run executes
# A module that sets this at its top level cannot change any number a table reads (logging, progress lines); its
# edits do not retrain.
OBSERVED_MODULE = "CANNOT_CHANGE_RESULTS"


def code_digest(entry: str, root: Path | None = None) -> str:
    """One hash of the code a stage executes: `entry` and every aiayn module it imports, directly or not, at the top
    of a file or inside a function (read from the source, so the set is the same in every process), except modules
    marked CANNOT_CHANGE_RESULTS. Each module counts by its syntax tree without docstrings: a comment, a docstring
    or a line break does not retrain. `root` is the folder holding the aiayn package (default: the one imported)."""
    root = Path(root) if root is not None else _package_root()
    digest = hashlib.sha256()
    for name, path in sorted(_closure(entry, root).items()):
        tree = _tree(path)
        if not _marked_observed(tree):
            digest.update(name.encode() + b"\0" + ast.dump(tree).encode() + b"\0")
    return digest.hexdigest()


def imported_modules(entry: str, root: Path | None = None) -> list[str]:
    """The aiayn modules `code_digest` hashes for `entry`, by name."""
    root = Path(root) if root is not None else _package_root()
    return sorted(name for name, path in _closure(entry, root).items() if not _marked_observed(_tree(path)))


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


def _marked_observed(tree: ast.Module) -> bool:
    return any(
        isinstance(node, ast.Assign)
        and any(isinstance(t, ast.Name) and t.id == OBSERVED_MODULE for t in node.targets)
        and isinstance(node.value, ast.Constant)
        and node.value.value is True
        for node in tree.body
    )
