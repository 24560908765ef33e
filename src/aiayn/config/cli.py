"""The entry point shared by every pipeline script: register the schemas, then run it as a Hydra app."""

from __future__ import annotations

import copy
import dataclasses
import logging
import sys
from collections.abc import Callable
from typing import Any

import hydra
from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig, open_dict, read_write

from aiayn.config.composition import (
    CONF_DIR,
    ROOT_CONFIG,
    check_row_overrides,
    override_key,
    override_values,
    register_configs,
    with_variant,
)
from aiayn.config.keys import unknown_key, valid_keys
from aiayn.config.params import Params
from aiayn.config.resolve import prepare
from aiayn.config.schema import SECRET_KEY, Config, ConfigError
from aiayn.io import OneLineError
from aiayn.progress import quiet_third_parties

log = logging.getLogger(__name__)

SEEDS_FROM = "seeds_from="
OVERRIDES_FROM = "overrides_from="


def refuse_secret_overrides(argv: list[str]) -> None:
    """Stop before Hydra saves the command line (.hydra/overrides.yaml) if it carries a credential-like key."""
    for key in map(override_key, argv):
        if key and SECRET_KEY.search(key.rsplit(".", 1)[-1]):
            sys.exit(
                f"error: override {key}=... looks like a credential; pass credentials through the environment "
                f"(WANDB_API_KEY) or `wandb login`, never on the command line, which Hydra saves with the run"
            )


def check_override_keys(argv: list[str]) -> None:
    """Refuse an override of a key the schema does not have (`train.lr_factr=2`, `+train.lr_factr=2`) with the same
    message params.yaml's misspelt keys get, naming the key most likely meant, before Hydra composes anything. Group
    choices (`row=A1`, `+tune=decode`, `hydra/launcher=slurm`), Hydra's own keys and the free-form `variant` pass."""
    groups = {f.name for f in dataclasses.fields(Config)} | {d.name for d in CONF_DIR.iterdir() if d.is_dir()}
    keys = valid_keys(Config)
    for arg in argv:
        key = override_key(arg)
        if not key or "/" in key or key.split(".", 1)[0] in ("hydra", "variant") or key in groups or key in keys:
            continue
        raise ConfigError(unknown_key("the command line", key, keys))


def expand_seeds_from(argv: list[str]) -> list[str]:
    """`seeds_from=FILE` stands for a multirun over FILE's `seeds` list: `--multirun seed=1,2,3`; with one `row=X`
    on the command line, FILE's `extra_seeds.X` follow (what `aiayn-extend` added for that row).

    DVC cannot put a list into a stage's command, so dvc.yaml passes `seeds_from=seeds/{row}.yaml` (the seeds stage
    writes one per row from params.yaml) and the seeds keep one home. Each seed is then a job of the Hydra launcher
    in use: in turn in this process (basic), in parallel processes (hydra/launcher=parallel) or as SLURM jobs
    (hydra/launcher=slurm).
    """
    given = [arg for arg in argv if arg.startswith(SEEDS_FROM)]
    if not given:
        return list(argv)
    if len(given) > 1 or override_values(argv, "seed"):
        sys.exit("error: give either seed=... or one seeds_from=FILE, not both")
    path, row = given[0][len(SEEDS_FROM) :], (override_values(argv, "row") or [""])[-1]
    if row and "," not in row:
        seeds = Params.read(path).seeds_per_row([row])[row]
    else:
        seeds = Params.read(path).seeds()
    out = [f"seed={','.join(map(str, seeds))}" if arg == given[0] else arg for arg in argv]
    return out if {"-m", "--multirun"} & set(out) else ["--multirun", *out]


def seeds_listed(argv: list[str]) -> tuple[list[str], list[int]]:
    """`seeds_from=FILE` read as one list (the seeds a single job uses together, such as an ensemble's) rather than
    a multirun: argv without it, with `seed=` the first (the job's own config), and the row's seeds."""
    given = [arg for arg in argv if arg.startswith(SEEDS_FROM)]
    if not given:
        return list(argv), []
    if len(given) > 1 or override_values(argv, "seed"):
        sys.exit("error: give either seed=... or one seeds_from=FILE, not both")
    path, row = given[0][len(SEEDS_FROM) :], (override_values(argv, "row") or ["base"])[-1]
    seeds = Params.read(path).seeds_per_row([row])[row]
    return [arg for arg in argv if arg != given[0]] + [f"seed={seeds[0]}"], seeds


def expand_overrides_from(argv: list[str]) -> list[str]:
    """`overrides_from=FILE` stands for FILE's non-null `model`, `train` and `decode` settings as overrides
    (`train.lr_factor=2`), placed where it stands: what `dvc exp run -S train.lr_factor=2` sets in params.yaml
    reaches every stage that passes it (dvc.yaml), before each row's own patch. Overrides after it win."""
    out = []
    for arg in argv:
        out += Params.read(arg[len(OVERRIDES_FROM) :]).overrides() if arg.startswith(OVERRIDES_FROM) else [arg]
    return out


def hydra_main(run: Callable[[Config], Any], idle: Callable[[Config], str | None] | None = None) -> None:
    """Run `run(cfg)` under `@hydra.main` on conf/config.yaml (overrides, multirun and launchers included), `cfg`
    each job's config as aiayn.config.resolve.prepare makes it (typed, its row applied, checked), carrying its
    variant (aiayn.config.composition), derived from that job's overrides.

    `idle(cfg)` says why a job would do nothing (a kept seed), else None: hydra/launcher=parallel asks it of every
    job before it shares out the cores, so that only jobs with work count (hydra_plugins.aiayn_launcher)."""
    try:
        sys.argv[1:] = expand_seeds_from(expand_overrides_from(sys.argv[1:]))
    except (FileNotFoundError, ValueError) as err:
        sys.exit(f"error: {err}")
    refuse_secret_overrides(sys.argv[1:])
    try:
        check_override_keys(sys.argv[1:])
        check_row_overrides(sys.argv[1:], CONF_DIR)
    except ConfigError as err:
        sys.exit(f"error: {err}")
    register_configs()
    quiet_third_parties()

    def job(cfg: DictConfig) -> Any:
        try:
            return run(prepare(with_variant(cfg, list(HydraConfig.get().overrides.task), CONF_DIR)))
        except OneLineError as err:  # a full disk, a failed download: one line naming the file; no traceback
            sys.exit(f"error: {err}")

    if idle is not None:

        def pending(sweep_config: DictConfig, overrides: list[str]) -> bool:
            cfg, current = copy.deepcopy(sweep_config), HydraConfig.instance()
            previous = current.cfg
            try:
                # the job's own Hydra config, as run_job sets it: a variant's second composition runs inside it
                current.set_config(cfg)
                with read_write(cfg), open_dict(cfg):
                    del cfg["hydra"]  # as run_job hands a job its config
                return idle(prepare(with_variant(cfg, overrides, CONF_DIR))) is None
            except Exception as err:  # a bad config: pending, so that the job itself reports it
                log.debug("%s: counted as pending (%s)", " ".join(overrides), err)
                return True
            finally:
                current.cfg = previous

        job.pending = pending  # type: ignore[attr-defined]

    hydra.main(config_path=str(CONF_DIR), config_name=ROOT_CONFIG, version_base="1.3")(job)()
