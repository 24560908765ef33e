"""Finished seeds kept in the repository: what Table 2 and Table 3 read of a seed (its evaluation folder: eval.json,
the hypotheses, the run's config.yaml, train.json and curve.csv; never a checkpoint), committed under
`kept/{scale}/{data}/`, laid out as evals/ (`base/seed4`, `base/lr_factor=2/seed1`).

A seed that trains longer than a machine lives (a CPU seed of the Multi30k recipes) is trained, evaluated and kept,
then committed; on the next machine the train and evaluate stages skip it, and the aggregate stage reads it where
evals/ has none, so a table grows across machines and a lost machine loses only the seed in progress
(docs/usage.md#experiments-with-dvc-any-config-key, "Seeds that outlive their machines"). A kept seed counts only
for a config whose recipe it shares (`differences`: every model and train setting but how a run is watched); one
trained otherwise is named and not read.

    aiayn-keep evals/base/seed4 [more evaluation folders] [--kept kept] [--replace]
"""

from __future__ import annotations

import argparse
import dataclasses
import filecmp
import logging
import os
import shutil
import sys
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

from aiayn.config.schema import Config, TrainConfig
from aiayn.io import read_json, umask
from aiayn.marks import marked
from aiayn.model.config import ModelConfig
from aiayn.run import folders
from aiayn.run.folders import RunSpec

log = logging.getLogger(__name__)

KEPT = "kept"  # the root of kept seeds in a checkout (paths.kept)
README = "README.md"  # kept/'s own, so that the folder exists (a DVC dependency) before any seed is kept


class KeepError(ValueError):
    """A folder that cannot be kept, or a kept seed that would be overwritten: the message names it."""


def data_label(data: Mapping[str, Any]) -> str:
    """The data's folder name under a scale: its name, with its form where it is not raw text
    ("multi30k-lc.norm.tok")."""
    form = data.get("form") or "raw"
    return str(data["name"]) if form == "raw" else f"{data['name']}-{form}"


def kept_root(kept: Path | str, scale: str, data: Mapping[str, Any]) -> Path:
    """Where a scale's seeds on one data set are kept: kept/{scale}/{data_label}."""
    return Path(kept) / scale / data_label(data)


def kept_spec(cfg: Config) -> RunSpec:
    """The run's folders with its evaluation folder under the kept root (no run folder: nothing trains there)."""
    spec = RunSpec.of(cfg)
    root = kept_root(cfg.paths.kept, cfg.scale.name, dataclasses.asdict(cfg.data))
    return dataclasses.replace(spec, evals=root)


def _settings(config: Mapping[str, Any]) -> dict[str, Any]:
    """A run's recipe from its config (a Config's asdict or a config.yaml): the model's settings and every train
    setting but those of how a run is watched (schema `observed`) and how many snapshots it keeps on disk
    (train.keep_last: the config's check makes it at least what the row averages, which is the row's)."""
    skip = {*marked(TrainConfig, "observed"), "keep_last"}
    model, train = config.get("model") or {}, config.get("train") or {}
    return {
        **{f"model.{f.name}": model.get(f.name) for f in dataclasses.fields(ModelConfig)},
        **{f"train.{f.name}": train.get(f.name) for f in dataclasses.fields(TrainConfig) if f.name not in skip},
    }


def differences(kept_config: Mapping[str, Any], cfg: Config) -> list[str]:
    """How a kept seed's recipe differs from cfg's ("train.max_steps: kept 1600, here 2000"); [] when it is the same.
    A setting the kept run's version of the schema did not have differs only where cfg's value is not its default."""
    ours, theirs = _settings(dataclasses.asdict(cfg)), _settings(kept_config)
    defaults = _settings({"model": dataclasses.asdict(ModelConfig()), "train": dataclasses.asdict(TrainConfig())})
    out = []
    for key, value in ours.items():
        kept = theirs.get(key)
        if kept is None and value == defaults.get(key):
            continue
        if kept != value:
            out.append(f"{key}: kept {kept!r}, here {value!r}")
    return out


def kept_run(cfg: Config) -> Path | None:
    """The kept evaluation folder of cfg's run (row, seed, variant) when one is kept and shares its recipe; None
    otherwise (a kept seed of another recipe is named in a warning)."""
    folder = kept_spec(cfg).eval_dir
    if not (folder / folders.EVAL).is_file():
        return None
    config_file = folder / folders.CONFIG
    try:
        config = yaml.safe_load(config_file.read_text(encoding="utf-8")) if config_file.is_file() else None
    except yaml.YAMLError as err:
        log.warning("%s: unreadable (%s); the kept seed is not used", config_file, err)
        return None
    if not isinstance(config, dict):
        log.warning("%s: no config.yaml mapping; the kept seed is not used", folder)
        return None
    changed = differences(config, cfg)
    if changed:
        log.warning("%s: kept with another recipe (%s); not used", folder, "; ".join(changed))
        return None
    return folder


def kept_instead(cfg: Config) -> Path | None:
    """The kept folder that stands for cfg's seed in this checkout (kept_run), unless the checkout trained the seed
    itself (its run folder holds a train.json): the train and evaluate stages then skip it."""
    folder = kept_run(cfg)
    return folder if folder is not None and not (RunSpec.of(cfg).run_dir / folders.TRAIN_SUMMARY).is_file() else None


def idle(cfg: Config) -> str | None:
    """Why a train or evaluate job of cfg would do nothing here (its seed is kept), else None: hydra/launcher=parallel
    asks before it shares out the cores (aiayn.config.cli.hydra_main), so a kept seed takes none."""
    folder = kept_instead(cfg)
    return None if folder is None else f"kept in {folder}"


def keep(eval_dir: Path | str, kept: Path | str = KEPT, replace: bool = False) -> Path:
    """Copy a finished evaluation folder (the evaluate stage's evals/{row}/[{variant}/]seed{N}) into the kept tree,
    as a whole folder put in place at once; return where. A kept seed whose files differ is refused unless
    `replace`."""
    source = Path(eval_dir)
    for name in (folders.EVAL, folders.CONFIG, folders.TRAIN_SUMMARY):
        if not (source / name).is_file():
            raise KeepError(
                f"{source}: no {name}; give an evaluate stage's folder of a finished run, such as evals/base/seed1"
            )
    evaluation = read_json(source / folders.EVAL)
    config = yaml.safe_load((source / folders.CONFIG).read_text(encoding="utf-8"))
    try:
        row, seed = str(config["row"]["name"]), int(config["seed"])
        root = kept_root(kept, str(config["scale"]["name"]), config["data"])
    except (KeyError, TypeError, ValueError) as err:
        raise KeepError(f"{source / folders.CONFIG}: no {err} (row.name, seed, scale.name, data.name)") from err
    if folders.seed_of(source) != seed:
        raise KeepError(f"{source}: its config.yaml says seed {seed}; the folder's name does not")
    variant = evaluation.get("variant") or {}
    target = RunSpec.for_row(row, seed, variant, root, root).eval_dir
    files = sorted(p.name for p in source.iterdir() if p.is_file() and not p.name.startswith("."))
    if target.is_dir():
        same = filecmp.cmpfiles(source, target, files, shallow=False)[0]
        theirs = sorted(p.name for p in target.iterdir() if p.is_file())
        if sorted(same) == files == theirs:
            log.info("%s: already kept, the same files", target)
            return target
        if not replace:
            raise KeepError(
                f"{target} holds another evaluation of {row} seed {seed}; --replace puts {source}'s in its place"
            )
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent))
    try:
        for name in files:
            shutil.copyfile(source / name, tmp / name)
        tmp.chmod(0o777 & ~umask())  # mkdtemp's 0700 would hide the seed from the rest of a shared group
        if target.is_dir():  # --replace: the old folder goes once the new one is whole
            shutil.rmtree(target)
        os.replace(tmp, target)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return target


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="aiayn-keep",
        description="Keep finished seeds' evaluation folders (no checkpoints) in the repository, where the train "
        "and evaluate stages skip them and the aggregate stage reads them; then commit kept/.",
    )
    parser.add_argument("evals", nargs="+", type=Path, help="evaluation folders, such as evals/base/seed4")
    parser.add_argument("--kept", type=Path, default=Path(KEPT), help="the kept root (default: kept)")
    parser.add_argument("--replace", action="store_true", help="replace a kept seed whose files differ")
    args = parser.parse_args(argv)
    try:
        for folder in args.evals:
            target = keep(folder, args.kept, args.replace)
            print(f"{folder} -> {target}")
    except (KeepError, OSError, yaml.YAMLError) as err:
        print(f"aiayn-keep: {err}", file=sys.stderr)
        return 2
    print(f"commit it: git add {args.kept} && git commit -m 'kept: ...'")
    return 0


if __name__ == "__main__":
    sys.exit(main())
