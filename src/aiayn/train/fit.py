"""The train stage: one run of one row and seed, written to its stable folder `runs/{row}/seed{seed}/`.

Writes config.yaml (first, so a crashed run still says what it was), checkpoints/ (resumed when the config
matches), curve.csv and, at the end, train.json.
"""
from __future__ import annotations

import hashlib
import logging
import math
import shutil
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

import lightning as L
import torch
from lightning.pytorch.callbacks import ModelCheckpoint
from omegaconf import DictConfig, OmegaConf

from aiayn import tracking
from aiayn.data.datamodule import TranslationDataModule
from aiayn.data.tokenizer import Tokenizer
from aiayn.io import atomic_write_json, atomic_write_text
from aiayn.train.callbacks import CurveWriter, RngState, RunIdentity, RunProgress
from aiayn.train.module import TranslationModule

log = logging.getLogger(__name__)

# Train settings that change how a run is observed, not what it computes: a resume may differ in these.
OBSERVATIONAL = {"val_every_steps", "log_every_steps", "ckpt_every_steps", "ckpt_every_minutes", "keep_last",
                 "resume", "num_workers", "max_steps"}


def fingerprint(cfg: DictConfig, tokenizer_path: Path) -> dict[str, Any]:
    """What a checkpoint must share with this run to be resumed by it."""
    train = {k: v for k, v in OmegaConf.to_container(cfg.train).items() if k not in OBSERVATIONAL}
    return {
        "row": cfg.row.name,
        "seed": int(cfg.seed),
        "model": OmegaConf.to_container(cfg.model),
        "train": train,
        "data": cfg.data.name,
        "tokenizer_sha256": hashlib.sha256(tokenizer_path.read_bytes()).hexdigest(),
    }


def _diff(old: Any, new: Any, prefix: str = "") -> list[str]:
    if isinstance(old, dict) and isinstance(new, dict):
        return [d for k in sorted(set(old) | set(new)) for d in _diff(old.get(k), new.get(k), f"{prefix}{k}.")]
    return [] if old == new else [f"{prefix.rstrip('.')}: checkpoint {old!r} != now {new!r}"]


def resume_checkpoint(ckpt_dir: Path, current: dict[str, Any], resume: bool) -> Path | None:
    """`last.ckpt` when it belongs to this config; a checkpoint of another config is moved aside, never loaded."""
    last = ckpt_dir / "last.ckpt"
    if not last.exists():
        return None
    stored = torch.load(last, map_location="cpu", weights_only=True).get("aiayn_fingerprint")
    differences = _diff(stored or {}, current)
    if resume and not differences:
        return last
    aside = ckpt_dir.parent / f"stale-checkpoints-{time.strftime('%Y%m%d-%H%M%S')}"
    reason = "train.resume=false" if not differences else "config differs:\n  " + "\n  ".join(differences)
    log.warning("not resuming from %s (%s); moved to %s", last, reason, aside)
    shutil.move(str(ckpt_dir), aside)
    return None


def checkpoint_callback(cfg: DictConfig, ckpt_dir: Path) -> ModelCheckpoint:
    """Every K steps or every M minutes (the paper: 10 minutes), keeping the last `keep_last` for averaging."""
    t = cfg.train
    if t.ckpt_every_steps and t.ckpt_every_minutes:
        raise ValueError("set one of train.ckpt_every_steps and train.ckpt_every_minutes, not both (0 = off)")
    cadence = (
        {"every_n_train_steps": t.ckpt_every_steps}
        if t.ckpt_every_steps
        else {"train_time_interval": timedelta(minutes=t.ckpt_every_minutes)}
    )
    return ModelCheckpoint(
        dirpath=ckpt_dir, filename="step-{step:08d}", auto_insert_metric_name=False, monitor="step", mode="max",
        save_top_k=t.keep_last, save_last=True, **cadence,
    )


def accumulation(cfg: DictConfig) -> int:
    """Micro-batches per update so that an update sees about train.batch_tokens tokens on any device count."""
    devices = cfg.trainer.devices if isinstance(cfg.trainer.devices, int) and cfg.trainer.devices > 0 else (
        torch.cuda.device_count() or 1)
    return max(1, math.ceil(cfg.train.batch_tokens / (cfg.train.max_tokens * devices * cfg.trainer.num_nodes)))


def train(cfg: DictConfig) -> dict[str, Any]:
    """Train `cfg.row` with `cfg.seed`; return (and write) the train.json summary."""
    run_dir, bpe_dir = Path(cfg.paths.run_dir), Path(cfg.paths.bpe)
    ckpt_dir = run_dir / "checkpoints"
    run_dir.mkdir(parents=True, exist_ok=True)
    atomic_write_text(run_dir / "config.yaml", OmegaConf.to_yaml(tracking.scrub(OmegaConf.to_container(cfg))))
    L.seed_everything(cfg.seed, workers=True)
    tokenizer = Tokenizer(bpe_dir / "spm.model")
    datamodule = TranslationDataModule(bpe_dir, max_tokens=cfg.train.max_tokens, seed=cfg.seed,
                                       num_workers=cfg.train.num_workers)
    module = TranslationModule(model=OmegaConf.to_container(cfg.model), train=OmegaConf.to_container(cfg.train),
                               vocab_size=tokenizer.vocab_size, pad_id=tokenizer.pad_id)
    if cfg.train.compile:
        module.model.compile()  # in place: checkpoint keys stay `model.*`
    ident = fingerprint(cfg, bpe_dir / "spm.model")
    ckpt_path = resume_checkpoint(ckpt_dir, ident, cfg.train.resume)
    progress = RunProgress(cfg.train.log_every_steps)
    curve = CurveWriter(run_dir / "curve.csv", cfg.train.log_every_steps)
    accumulate = accumulation(cfg)
    wandb_run = tracking.start_run(cfg, job_type="train")
    loggers = [_wandb_logger(wandb_run)] if wandb_run is not None else False
    trainer = L.Trainer(
        accelerator=cfg.trainer.accelerator, devices=cfg.trainer.devices, num_nodes=cfg.trainer.num_nodes,
        strategy=cfg.trainer.strategy, precision=cfg.trainer.precision, deterministic=cfg.trainer.deterministic,
        max_steps=cfg.train.max_steps, accumulate_grad_batches=accumulate,
        val_check_interval=cfg.train.val_every_steps * accumulate, check_val_every_n_epoch=None,
        log_every_n_steps=cfg.train.log_every_steps, gradient_clip_val=cfg.train.grad_clip or None,
        enable_progress_bar=cfg.trainer.enable_progress_bar, enable_model_summary=False, logger=loggers,
        callbacks=[checkpoint_callback(cfg, ckpt_dir), progress, curve, RngState(), RunIdentity(ident)],
        num_sanity_val_steps=0, default_root_dir=run_dir,
        use_distributed_sampler=False,  # TokenBatchSampler shards by rank itself
    )
    try:
        trainer.fit(module, datamodule=datamodule, ckpt_path=ckpt_path)
        summary = _summary(cfg, trainer, module, datamodule, progress, tokenizer, accumulate)
        if trainer.is_global_zero:
            atomic_write_json(run_dir / "train.json", summary)
            tracking.safe_log(wandb_run, {f"final/{k}": v for k, v in summary.items() if isinstance(v, float)})
    finally:
        tracking.finish(wandb_run)
    return summary


def _wandb_logger(run):
    from lightning.pytorch.loggers import WandbLogger

    return WandbLogger(experiment=run, log_model=False)


def _summary(cfg, trainer, module, datamodule, progress, tokenizer, accumulate) -> dict[str, Any]:
    metrics = trainer.callback_metrics
    if "val/ppl" not in metrics or trainer.global_step % cfg.train.val_every_steps:
        trainer.validate(module, datamodule=datamodule, verbose=False)  # the final weights' validation
        metrics = trainer.callback_metrics
    return {
        "steps": int(trainer.global_step),
        "tokens_seen": dict(progress.tokens),
        "wall_time_s": round(progress.elapsed(), 3),
        "train_loss": float(metrics.get("train/loss", float("nan"))),
        "val_loss": float(metrics["val/loss"]),
        "val_ppl": float(metrics["val/ppl"]),
        "params": module.model.num_parameters(),
        "vocab_size": tokenizer.vocab_size,
        "accumulate_grad_batches": accumulate,
        "device": {"accelerator": cfg.trainer.accelerator, "count": int(trainer.world_size),
                   "name": torch.cuda.get_device_name(0) if torch.cuda.is_available() else "cpu"},
        "precision": str(cfg.trainer.precision),
    }
