"""Hydra submitit launchers: the SLURM job script (without a cluster) and a real local submitit sweep."""

from __future__ import annotations

import os
import stat
import sys
from pathlib import Path

import submitit
from hydra import compose, initialize_config_dir
from hydra.core.global_hydra import GlobalHydra
from hydra.core.hydra_config import HydraConfig
from hydra_plugins.hydra_submitit_launcher.config import BaseQueueConf
from omegaconf import OmegaConf

from aiayn.config.composition import CONF_DIR, register_configs

REPO = Path(__file__).resolve().parents[3]


def launcher_params(*overrides: str) -> dict:
    """hydra.launcher as the submitit plugin receives it, resolved."""
    register_configs()
    GlobalHydra.instance().clear()
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        cfg = compose("config", overrides=list(overrides), return_hydra_config=True)
    HydraConfig.instance().set_config(cfg)
    return OmegaConf.to_container(cfg.hydra.launcher, resolve=True)


def sbatch_script(params: dict, folder: Path, monkeypatch) -> str:
    """The sbatch file submitit would submit, built as the Hydra plugin builds its executor (a fake srun on PATH)."""
    fake = folder / "bin" / "srun"
    fake.parent.mkdir(parents=True)
    fake.write_text("#!/bin/sh\n")
    fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", f"{fake.parent}{os.pathsep}{os.environ['PATH']}")
    executor = submitit.AutoExecutor(folder=folder, cluster="slurm", slurm_max_num_timeout=params["max_num_timeout"])
    base = set(OmegaConf.structured(BaseQueueConf).keys())
    skip = {"submitit_folder", "max_num_timeout", "_target_"}
    executor.update_parameters(**{k if k in base else f"slurm_{k}": v for k, v in params.items() if k not in skip})
    return executor._executor._make_submission_file_text("python -u -m submitit.core._submit", "uid")


def test_slurm_job_sends_the_time_limit_signal_to_lightning_only(tmp_path: Path, monkeypatch) -> None:
    params = launcher_params("hydra/launcher=slurm", "hydra.launcher.partition=gpu", "hydra.launcher.gpus_per_node=4")
    assert params["max_num_timeout"] == 0  # submitit never resubmits: Lightning owns requeue
    script = sbatch_script(params, tmp_path, monkeypatch)
    lines = set(script.splitlines())
    assert "#SBATCH --signal=USR1@120" in lines  # Lightning's SLURMEnvironment requeue signal
    assert not any("USR2" in line for line in lines)  # submitit's own signal is never sent
    assert {
        "#SBATCH --partition=gpu",
        "#SBATCH --gpus-per-node=4",
        "#SBATCH --ntasks-per-node=4",
        "#SBATCH --requeue",
    } <= lines


def test_the_parallel_launcher_is_the_fork_launcher() -> None:
    params = launcher_params("hydra/launcher=parallel")
    assert params["_target_"].endswith("aiayn_launcher.fork_launcher.ForkLauncher") and params["n_jobs"] == 2


def test_local_launcher_config_composes() -> None:
    params = launcher_params("hydra/launcher=local")
    assert params["_target_"].endswith("LocalLauncher") and params["gpus_per_node"] == 0


def test_local_submitit_sweep_trains_one_run_per_seed(smoke_overrides, sh, tmp_path: Path) -> None:
    sh(
        [
            sys.executable,
            str(REPO / "pipeline" / "train.py"),
            "-m",
            "seed=1,2",
            "hydra/launcher=local",
            *smoke_overrides,
            "train.max_steps=4",
            f"paths.runs={tmp_path}/runs",
            f"hydra.sweep.dir={tmp_path}/sweep",
        ],
        cwd=tmp_path,
    )
    for seed in (1, 2):  # train.max_steps=4: a variant of base, in a folder of its own
        assert (tmp_path / "runs" / "base" / "max_steps=4" / f"seed{seed}" / "train.json").exists()
    assert len(list((tmp_path / "sweep" / ".submitit").glob("*/*_result.pkl"))) == 2  # two submitit jobs
