"""Read the evaluate stage's folders, where aiayn.run.folders puts them: eval.json, the hypotheses, and the copy of the
run's config.yaml, train.json and curve.csv the stage keeps beside them (the aggregate stage reads no run folder)."""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from omegaconf import OmegaConf
from omegaconf.errors import OmegaConfBaseException

from aiayn.run import folders
from aiayn.run.folders import RunSpec

# eval.json's sections and the numbers the tables read in each; each must be a number (or absent / null) for the
# run to count. dev: Table 3's protocol (the last checkpoint, or the average of row.dev_average_last); test: the
# averaged weights (Table 2's), for the rows Table 2 shows.
EVAL_NUMBERS = {
    "dev": ("bleu", "bleu_paper", "ppl", "checkpoints_averaged"),
    "test": ("bleu", "bleu_paper", "bleu_lc_tok", "checkpoints_averaged"),
}
TRAIN_NUMBERS = ("params", "vocab_size", "wall_time_s")


@dataclass
class RunRecord:
    """One (row, seed) run; `ok` is False with a `reason` when eval.json is absent or unusable.

    `path` is the evaluate stage's folder, which holds everything read here; `kept`: that folder is a kept seed's
    (aiayn.run.kept), committed, where evals/ had none.
    """

    row: str
    seed: int
    path: Path
    ok: bool
    reason: str = ""
    config: dict[str, Any] = field(default_factory=dict)
    train: dict[str, Any] = field(default_factory=dict)
    eval: dict[str, Any] = field(default_factory=dict)
    kept: bool = False

    def score(self, section: str, key: str) -> float | None:
        """A number of eval.json's `section` ("dev", "test"), or None when the run failed or did not record it."""
        value = (self.eval.get(section) or {}).get(key) if self.ok else None
        return None if value is None else float(value)

    def hyps_file(self, split: str) -> Path | None:
        """The hypotheses of `split` when this run wrote them."""
        path = self.path / folders.hyps_file(split)
        return path if self.ok and path.is_file() else None


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _read_json(path: Path, numbers: Iterable[str]) -> dict[str, Any]:
    """Parse a JSON object, checking that the listed keys hold finite numbers when present."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
        raise ValueError(f"{path}: unreadable ({err})") from err
    if not isinstance(data, dict):
        raise ValueError(f"{path}: expected a JSON object, got {type(data).__name__}")
    _check_numbers(path, data, numbers)
    return data


def _check_numbers(path: Path, data: Mapping[str, Any], numbers: Iterable[str], prefix: str = "") -> None:
    for key in numbers:
        if data.get(key) is not None and not _is_number(data[key]):
            raise ValueError(f"{path}: key {prefix + key!r} is {data[key]!r}, not a finite number")


def read_eval(path: Path) -> dict[str, Any]:
    """An eval.json: its `dev` section (and `test`, when present) checked for the numbers the tables read."""
    data = _read_json(path, ())
    if not isinstance(data.get("dev"), dict):
        raise ValueError(
            f"{path}: no 'dev' section (written by an older evaluate stage?); rerun the evaluate "
            f"stage (dvc repro) to rewrite it"
        )
    for section, numbers in EVAL_NUMBERS.items():
        if data.get(section) is not None:
            if not isinstance(data[section], dict):
                raise ValueError(f"{path}: key {section!r} must be an object, got {data[section]!r}")
            _check_numbers(path, data[section], numbers, f"{section}.")
    return data


def _read_yaml(path: Path) -> dict[str, Any]:
    """A resolved run config as plain dicts (OmegaConf's loader, which also reads 1e18-style floats)."""
    try:
        data = OmegaConf.to_container(OmegaConf.load(path), resolve=True)
    except (OSError, UnicodeDecodeError, yaml.YAMLError, OmegaConfBaseException) as err:
        raise ValueError(f"{path}: unreadable ({err})") from err
    if not isinstance(data, dict):
        raise ValueError(f"{path}: expected a mapping at the top level")
    return {str(k): v for k, v in data.items()}


def read_run(spec: RunSpec, kept_root: Path | None = None) -> RunRecord:
    """Read one run (its eval.json from the evaluate stage's folder); problems become a failed record with the file
    and key named, never an exception.

    Reasons name files from the folders' own names down ("evals/A1/seed2/eval.json"), so the tables written
    from them do not depend on where the checkout lives. Where evals/ has no eval.json and `kept_root` (the kept
    seeds of this scale and data, aiayn.run.kept) has one, the kept seed is read.
    """
    path = spec.eval_dir
    eval_file = path / folders.EVAL
    if not eval_file.is_file() and kept_root is not None:
        kept = dataclasses.replace(spec, evals=kept_root)
        if (kept.eval_dir / folders.EVAL).is_file():
            record = read_run(kept)
            record.kept = record.ok
            return record

    def failed(reason: str) -> RunRecord:
        return RunRecord(spec.row, spec.seed, path, ok=False, reason=reason)

    if not eval_file.is_file():
        return failed(f"{spec.shown(eval_file)} is absent (not trained or not evaluated)")
    try:
        config = _read_yaml(path / folders.CONFIG) if (path / folders.CONFIG).is_file() else {}
        record = RunRecord(spec.row, spec.seed, path, ok=True, config=config, eval=read_eval(eval_file))
        if (path / folders.TRAIN_SUMMARY).is_file():
            record.train = _read_json(path / folders.TRAIN_SUMMARY, TRAIN_NUMBERS)
    except ValueError as err:
        return failed(str(err).replace(str(path), spec.shown(path)))
    return record


def row_settings(records: Iterable[RunRecord]) -> dict[str, Any]:
    """A row's metadata (name, description, tables, paper, average_last and its patch) from the config.yaml of the
    first of its runs that has one; {} when none has."""
    for rec in records:
        if isinstance(rec.config.get("row"), dict):
            return rec.config["row"]
    return {}


Seeds = Iterable[int] | Mapping[str, Iterable[int]]  # one list for every row, or each row's own


def seeds_by_row(rows: Iterable[str], seeds: Seeds) -> dict[str, list[int]]:
    """Each row's seeds: the one list for every row, or the row's entry of a mapping (none when it has none)."""
    if isinstance(seeds, Mapping):
        return {row: list(seeds.get(row, ())) for row in rows}
    seeds = list(seeds)
    return dict.fromkeys(rows, seeds)


def collect_runs(
    runs_dir: Path,
    rows: Iterable[str],
    seeds: Seeds,
    evals_dir: Path | None = None,
    variant: Mapping[str, Any] | None = None,
    kept_root: Path | None = None,
) -> list[RunRecord]:
    """Every (row, seed) of one variant in the given order, including missing and failed runs with their reasons.
    eval.json files are read from `evals_dir` (default: `runs_dir`), else from `kept_root`'s kept seeds."""
    return [
        read_run(RunSpec.for_row(row, seed, variant, runs_dir, evals_dir), kept_root)
        for row, row_seeds in seeds_by_row(rows, seeds).items()
        for seed in row_seeds
    ]
