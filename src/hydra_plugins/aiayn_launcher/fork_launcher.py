"""A Hydra launcher that runs a multirun's jobs side by side in processes forked from the launching one.

Hydra's joblib launcher starts each worker as a fresh interpreter (loky), which then imports torch, Lightning and
wandb again: on 2 CPU cores, three workers doing that at once cost seconds per stage. This launcher runs each job
in a fork of the launching process, which has imported them once: the pipeline scripts import their stage's module
at the top, before any thread pool exists. The workers are the standard library's ProcessPoolExecutor with the
"fork" start method (with more jobs than workers a worker runs several in turn, as joblib's do), each with an equal
share of the cores as intra-op threads, `cpu_count // min(n_jobs, jobs with work)` (at least 1), unless the stage
pins its own (`trainer.threads`: the cpu trainer's 1, aiayn.run.floatpath). Jobs with work: where the task function
has a `pending(config, overrides)` attribute (aiayn.config.cli: the train and evaluate stages' seeds kept in the
repository answer False), the jobs it calls pending, so the one seed left of eight trains on every core rather than
on half of them beside seven that return at once; else every job. The share is set once, at launch: three seeds to
train with n_jobs 2 each get half the cores, the third too. The joblib fallback shares them as joblib does,
`cpu_count // n_jobs` for every job.

    python pipeline/train.py -m seed=1,2,3 hydra/launcher=parallel     # conf/hydra/launcher/parallel.yaml

Where fork is not available (Windows, or macOS where it is unsafe), or the launching process already runs threads,
it runs the jobs through the joblib launcher instead, and says so.
"""

from __future__ import annotations

import logging
import multiprocessing
import os
import sys
import threading
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

from hydra.core.hydra_config import HydraConfig
from hydra.core.utils import JobReturn, configure_log, filter_overrides, run_job, setup_globals
from hydra.plugins.launcher import Launcher
from hydra.types import HydraContext, TaskFunction
from omegaconf import DictConfig, open_dict

from hydra_plugins.aiayn_launcher._conf import JOBS

log = logging.getLogger(__name__)


def _run(idx: int, job_idx: int, overrides: Sequence[str]) -> JobReturn:
    """One job in a forked worker: the sweep config of `overrides`, then Hydra's own run_job. Hydra's globals and
    singletons are the launching process's, inherited (restoring them, as a fresh interpreter must, would scan the
    plugins again)."""
    import torch

    state = dict(JOBS)
    torch.set_num_threads(state["threads"])
    context: HydraContext = state["context"]
    loaded = state["configs"]  # composed by the launching process where it asked the task which jobs are pending
    sweep_config = loaded[idx] if loaded else context.config_loader.load_sweep_config(state["config"], list(overrides))
    with open_dict(sweep_config):
        sweep_config.hydra.job.id = f"{sweep_config.hydra.job.name}_{job_idx}"
        sweep_config.hydra.job.num = job_idx
    HydraConfig.instance().set_config(sweep_config)
    return run_job(
        hydra_context=context,
        config=sweep_config,
        task_function=state["task"],
        job_dir_key="hydra.sweep.dir",
        job_subdir_key="hydra.sweep.subdir",
    )


def can_fork() -> str | None:
    """None when forking the launching process is safe here, else why not."""
    if "fork" not in multiprocessing.get_all_start_methods() or sys.platform == "darwin":
        return f"fork is not a safe start method on {sys.platform}"
    if threading.active_count() > 1:
        return f"{threading.active_count() - 1} thread(s) already run in the launching process"
    return None


class ForkLauncher(Launcher):
    def __init__(self, n_jobs: int = 1) -> None:
        self.n_jobs = max(1, int(n_jobs))
        self.config: DictConfig | None = None
        self.task_function: TaskFunction | None = None
        self.hydra_context: HydraContext | None = None

    def setup(self, *, hydra_context: HydraContext, task_function: TaskFunction, config: DictConfig) -> None:
        self.config, self.task_function, self.hydra_context = config, task_function, hydra_context

    def launch(self, job_overrides: Sequence[Sequence[str]], initial_job_idx: int) -> Sequence[JobReturn]:
        assert self.config is not None and self.task_function is not None and self.hydra_context is not None
        setup_globals()
        configure_log(self.config.hydra.hydra_logging, self.config.hydra.verbose)
        sweep_dir = Path(str(self.config.hydra.sweep.dir))
        sweep_dir.mkdir(parents=True, exist_ok=True)
        why_not = can_fork()
        if why_not is not None:
            return self._joblib(job_overrides, initial_job_idx, why_not)
        configs, idle = self._pending(job_overrides)
        jobs = min(self.n_jobs, max(1, len(job_overrides) - idle))
        # At DEBUG: each job names itself in its own lines (a training run's progress and summary, an evaluation's
        # scores), and under DVC the stage's command says which seeds; a default `dvc repro` has 40 such sweeps.
        differ = [
            " ".join(o for o in filter_overrides(overrides) if not all(o in other for other in job_overrides))
            for overrides in job_overrides
        ]
        log.debug(
            f"Forking {len(job_overrides)} job(s), {jobs} at a time"
            + (f" ({idle} with nothing to do)" if idle else "")
            + f" ({', '.join(differ)}) into {sweep_dir}"
        )
        for idx, overrides in enumerate(job_overrides):
            log.debug(f"\t#{initial_job_idx + idx} : {' '.join(filter_overrides(overrides))}")
        JOBS.update(
            context=self.hydra_context,
            config=self.config,
            task=self.task_function,
            configs=configs,
            threads=max(1, (os.cpu_count() or 1) // jobs),
        )
        try:
            context = multiprocessing.get_context("fork")
            with ProcessPoolExecutor(jobs, mp_context=context) as pool:
                futures = [
                    pool.submit(_run, idx, initial_job_idx + idx, list(overrides))
                    for idx, overrides in enumerate(job_overrides)
                ]
                return [future.result() for future in futures]
        finally:
            JOBS.clear()

    def _pending(self, job_overrides: Sequence[Sequence[str]]) -> tuple[list[DictConfig], int]:
        """Where the task function has `pending(config, overrides)`: every job's config, composed here once (its
        worker uses it), and how many jobs it calls not pending; else ([], 0). The task's warnings are held back
        here: each job says them again when it runs."""
        pending = getattr(self.task_function, "pending", None)
        if pending is None:
            return [], 0
        assert self.hydra_context is not None and self.config is not None
        loader = self.hydra_context.config_loader
        configs = [loader.load_sweep_config(self.config, list(o)) for o in job_overrides]
        disabled = logging.root.manager.disable
        logging.disable(max(disabled, logging.WARNING))
        try:
            return configs, sum(not pending(c, list(o)) for c, o in zip(configs, job_overrides, strict=True))
        finally:
            logging.disable(disabled)

    def _joblib(self, job_overrides: Sequence[Sequence[str]], initial_job_idx: int, why: str) -> Sequence[JobReturn]:
        from hydra_plugins.hydra_joblib_launcher.joblib_launcher import JoblibLauncher

        log.warning(f"running the jobs through joblib (fresh interpreters) instead of forking: {why}")
        launcher = JoblibLauncher(n_jobs=self.n_jobs)
        assert self.config is not None and self.task_function is not None and self.hydra_context is not None
        launcher.setup(hydra_context=self.hydra_context, task_function=self.task_function, config=self.config)
        return launcher.launch(job_overrides, initial_job_idx)
