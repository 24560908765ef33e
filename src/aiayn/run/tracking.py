"""wandb for every stage run: one run per job, offline without credentials, never able to stop the work.

The run folders, not wandb, are the source of truth for the tables; wandb is for browsing. Secrets never reach
a wandb config: `scrub` drops credential-like keys and any value equal to a credential in the environment.

A training run's wandb id is derived from its fingerprint (aiayn.train.fingerprint: row, seed, config, data, tokenizer,
code), so a killed, requeued or resumed run continues the same wandb run (resume="allow"), its history keyed by
trainer/global_step.
Lineage: train logs a checkpoint artifact (a reference to runs/.../checkpoints by path and checksum), evaluate uses
it and logs its hypotheses, aggregate uses the evaluations and logs the tables. wandb refuses `use_artifact` offline,
so every consumer also records its inputs (artifact name and digest) in its config, `inputs`, online or not.
"""

from __future__ import annotations

import logging
import netrc
import os
import re
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from aiayn.config.schema import SECRET_KEY, Config, refuse_credentials

log = logging.getLogger(__name__)

SECRET_ENV = ("WANDB_API_KEY", "HF_TOKEN", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN")


def _secrets() -> list[str]:
    return [v for k in SECRET_ENV if len(v := os.environ.get(k, "")) >= 8]


def scrub(obj: Any, secrets: list[str] | None = None) -> Any:
    """A copy of a plain container with credential-like keys removed and secret values masked."""
    secrets = _secrets() if secrets is None else secrets
    if isinstance(obj, dict):
        return {k: scrub(v, secrets) for k, v in obj.items() if not SECRET_KEY.search(str(k))}
    if isinstance(obj, (list, tuple)):
        return type(obj)(scrub(v, secrets) for v in obj)
    if isinstance(obj, str):
        for s in secrets:
            obj = obj.replace(s, "***")
    return obj


def refuse_secrets(cfg: Config) -> None:
    """Refuse a config holding a credential-like key (a variant's, say): it would be saved with the run
    (aiayn.config.schema.refuse_credentials; prepare checks the composed config the same way)."""
    refuse_credentials(asdict(cfg))


def has_credentials() -> bool:
    """True when wandb could log in: an API key in the environment or a netrc entry for the wandb host."""
    if os.environ.get("WANDB_API_KEY"):
        return True
    try:
        host = os.environ.get("WANDB_BASE_URL", "https://api.wandb.ai").split("//")[-1]
        return netrc.netrc().authenticators(host) is not None
    except (FileNotFoundError, netrc.NetrcParseError, OSError):
        return False


def resolve_mode(mode: str) -> str:
    """`auto` means online with credentials, offline without; WANDB_MODE in the environment wins."""
    if os.environ.get("WANDB_MODE"):
        return os.environ["WANDB_MODE"]
    if mode == "auto":
        return "online" if has_credentials() else "offline"
    return mode


def is_rank_zero() -> bool:
    """True in the launching process; False in the extra processes of a DDP or SLURM launch (they see a rank)."""
    return all(os.environ.get(k, "0") == "0" for k in ("RANK", "LOCAL_RANK", "NODE_RANK", "SLURM_PROCID"))


def run_name(cfg: Config, job_type: str = "train") -> str:
    """ "{row}-s{seed}", with the variant's folder name between for a variant (base-lr_factor=2-s1)."""
    from aiayn.run.folders import RunSpec

    return RunSpec.of(cfg).name(job_type)


def start_run(cfg: Config, job_type: str, name: str | None = None, group: str | None = None, run_id: str | None = None):
    """Start a wandb run for this job, or return None (with a warning) when wandb is off or fails. With `run_id`, a
    run of that id continues where it stopped (resume="allow"), its metrics against trainer/global_step.

    Only rank zero opens one: the other processes of a DDP job would otherwise each start a run of their own."""
    if cfg.logger.backend != "wandb" or not is_rank_zero():
        return None
    try:
        import wandb

        config = scrub(asdict(cfg))
        Path(cfg.logger.dir).mkdir(parents=True, exist_ok=True)
        run = wandb.init(
            project=cfg.logger.project,
            entity=cfg.logger.entity,
            group=group or cfg.row.name,
            job_type=job_type,
            name=name or run_name(cfg, job_type),
            config=config,
            tags=[f"scale:{cfg.scale.name}", f"data:{cfg.data.name}", *cfg.logger.tags],
            dir=cfg.logger.dir,
            mode=resolve_mode(cfg.logger.mode),  # type: ignore[arg-type]  # wandb checks it, naming the value
            reinit="finish_previous",
            id=run_id,
            resume="allow" if run_id else None,
            settings=wandb.Settings(silent=True, init_timeout=cfg.logger.init_timeout, console="off"),
        )
        if run_id:  # one x-axis across resumes: wandb's own step restarts in every offline segment
            run.define_metric("trainer/global_step")
            run.define_metric("*", step_metric="trainer/global_step", step_sync=True)
        return run
    except Exception as err:  # wandb is optional: a broken install, service or network must not stop the run
        log.warning("wandb disabled for this run: %s: %s", type(err).__name__, scrub(str(err)))
        return None


def lightning_logger(run):
    """Lightning's WandbLogger on `run`: a failing wandb call is logged once, then wandb is dropped; training goes
    on."""
    from lightning.pytorch.loggers import WandbLogger  # here, not at import: the other stages need no Lightning

    class GuardedWandbLogger(WandbLogger):
        failed = False

        def _guard(self, name: str, call, *args) -> None:
            if self.failed:
                return
            try:
                call(*args)
            except Exception as err:
                self.failed = True
                log.warning(
                    "wandb %s failed, no more wandb logging in this run (its folder keeps every metric): %s: %s",
                    name,
                    type(err).__name__,
                    scrub(str(err)),
                )

        def log_metrics(self, metrics, step=None) -> None:
            self._guard("log_metrics", super().log_metrics, metrics, step)

        def log_hyperparams(self, params, *args) -> None:
            self._guard("log_hyperparams", super().log_hyperparams, params, *args)

        def after_save_checkpoint(self, checkpoint_callback) -> None:
            self._guard("after_save_checkpoint", super().after_save_checkpoint, checkpoint_callback)

        def finalize(self, status: str) -> None:
            self._guard("finalize", super().finalize, status)

    return GuardedWandbLogger(experiment=run, log_model=False)


def finish(run) -> None:
    """Finish the run (each job its own run, multirun included); errors are logged, never raised."""
    if run is None:
        return
    try:
        run.finish()
    except Exception as err:
        log.warning("wandb finish failed: %s", scrub(str(err)))


def safe_log(run, data: dict[str, Any]) -> None:
    if run is None:
        return
    try:
        run.log(data)
    except Exception as err:
        log.warning("wandb log failed: %s", scrub(str(err)))


@dataclass(frozen=True)
class ArtifactSpec:
    """A wandb artifact of run files: a reference to `path` by URI and checksum (nothing copied), or its files
    themselves (`copy`, for small ones: hypotheses, tables)."""

    name: str
    kind: str
    path: Path
    copy: bool = False
    files: tuple[str, ...] = ()  # with copy: only these names under path (all files when empty)


def artifact_name(prefix: str, run: str) -> str:
    """ "checkpoints-base-s1", with the run's variant ("checkpoints-base-lr_factor_2-s1"), in wandb's alphabet."""
    return re.sub(r"[^A-Za-z0-9._-]", "_", f"{prefix}-{run}")


def _artifact(spec: ArtifactSpec):
    import wandb

    artifact = wandb.Artifact(spec.name, type=spec.kind)
    if not spec.copy:
        artifact.add_reference(Path(spec.path).resolve().as_uri())
    elif spec.files:
        for name in spec.files:
            if (Path(spec.path) / name).is_file():
                artifact.add_file(str(Path(spec.path) / name), name=name)
    else:
        artifact.add_dir(str(spec.path))
    return artifact


def log_output(run, spec: ArtifactSpec) -> str | None:
    """Log the artifact a run produced; its digest, or None when wandb is off or fails."""
    if run is None:
        return None
    try:
        artifact = _artifact(spec)
        run.log_artifact(artifact, aliases=["latest"])
        return artifact.manifest.digest()
    except Exception as err:
        log.warning("wandb could not log artifact %s: %s", spec.name, scrub(str(err)))
        return None


def use_inputs(run, specs: Iterable[ArtifactSpec]) -> dict[str, str]:
    """Record that `run` consumed these artifacts: `use_artifact` online (wandb's lineage graph), and always their
    names and digests in the run's config (`inputs`), which offline runs keep for `wandb sync`."""
    if run is None:
        return {}
    inputs: dict[str, str] = {}
    try:
        offline = run.settings.mode in ("offline", "dryrun")  # wandb raises on use_artifact offline
        for spec in specs:
            artifact = _artifact(spec)
            inputs[spec.name] = artifact.manifest.digest()
            if not offline:
                run.use_artifact(artifact)
        run.config.update({"inputs": inputs}, allow_val_change=True)
    except Exception as err:
        log.warning("wandb could not record the run's inputs: %s", scrub(str(err)))
    return inputs


def checkpoint_artifact(cfg: Config) -> ArtifactSpec:
    """A training run's output: its checkpoints folder, by reference unless logger.upload_checkpoints."""
    from aiayn.run.folders import RunSpec

    spec = RunSpec.of(cfg)
    return ArtifactSpec(
        artifact_name("checkpoints", spec.name("train")), "model", spec.checkpoints, copy=cfg.logger.upload_checkpoints
    )


def eval_artifact(spec) -> ArtifactSpec:
    """An evaluation's output (of an aiayn.run.folders.RunSpec): eval.json and the hypotheses (small files, copied);
    what the evaluate stage logs and the aggregate run records as its inputs."""
    from aiayn.run import folders

    return ArtifactSpec(
        artifact_name("eval", spec.name("eval")),
        "evaluation",
        spec.eval_dir,
        copy=True,
        files=(folders.EVAL, *(folders.hyps_file(split) for split in ("valid", "test"))),
    )
