"""The train stage: one run of one row and seed, written to its folder (aiayn.run.folders:
runs/{row}/{variant}/seed{seed}): the Lightning Trainer with its callbacks, the run, and its summary. Its checkpoints
(cadence, snapshots, resume, atomic writes, the folder's lock) are aiayn.train.checkpointing's.

Writes config.yaml (first, so a crashed run still says what it was), checkpoints/ (resumed when the fingerprint
matches), curve.csv and, at the end, train.json.
"""

from __future__ import annotations

import dataclasses
import logging
import math
import shutil
from pathlib import Path
from typing import Any, NamedTuple

import lightning as L
import torch
from lightning.pytorch.callbacks import EarlyStopping
from omegaconf import OmegaConf

from aiayn.checkpoint.reader import stored_step
from aiayn.config.schema import Config, TrainConfig, TrainerConfig
from aiayn.data.datamodule import TranslationDataModule
from aiayn.data.tokenizer import Tokenizer
from aiayn.io import atomic_path, atomic_write_json, atomic_write_text, read_json
from aiayn.progress import clock, on_terminal
from aiayn.run import floatpath, folders, kept, tracking
from aiayn.run.folders import RunSpec
from aiayn.train import fingerprint
from aiayn.train.callbacks import CurveWriter, RngState, RunProgress
from aiayn.train.checkpointing import AtomicCheckpointIO, Checkpointer, lock_run_dir, resume_checkpoint
from aiayn.train.mfu import MFUMonitor
from aiayn.train.module import TranslationModule

log = logging.getLogger(__name__)


class Batching(NamedTuple):
    accumulate: int  # micro-batches per update on each device
    micro_tokens: int  # token budget of one micro-batch (source and target each, padding included)


def batching(trainer: TrainerConfig, t: TrainConfig) -> Batching:
    """Micro-batches per update and their size, so that an update of all devices sees about train.batch_tokens.

    accumulate = ceil(batch_tokens / (max_tokens x devices)); then each micro-batch gets
    ceil(batch_tokens / (devices x accumulate)) <= max_tokens tokens, so that more devices split the paper's update
    instead of multiplying it (8 GPUs at max_tokens 12500 would otherwise update on 100k tokens, 4x the paper's
    25k; they get 3125 each, as the paper's 8 P100s did). On one device with batch_tokens a multiple of max_tokens
    (every shipped scale) the micro-batch is max_tokens. Devices are counted as Lightning will count them: an int,
    -1 (all), "auto", "0,1" or a list of GPU indices.
    """
    from lightning.pytorch.accelerators import CPUAccelerator, CUDAAccelerator

    accelerator, devices = trainer.accelerator, trainer.devices
    gpu = accelerator in ("gpu", "cuda") or (accelerator == "auto" and CUDAAccelerator.is_available())
    kind = CUDAAccelerator if gpu else CPUAccelerator
    if devices == "auto":
        devices = kind.auto_device_count()
    parsed: Any = kind.parse_devices(devices)  # an int or a list of indices, as get_parallel_devices takes it
    world = len(kind.get_parallel_devices(parsed)) * trainer.num_nodes
    accumulate = max(1, math.ceil(t.batch_tokens / (t.max_tokens * world)))
    return Batching(accumulate, min(t.max_tokens, math.ceil(t.batch_tokens / (world * accumulate))))


def train(cfg: Config) -> dict[str, Any]:
    """Train `cfg.row` with `cfg.seed`; return (and write) the train.json summary."""
    tracking.refuse_secrets(cfg)
    spec = RunSpec.of(cfg)
    kept_folder = kept.kept_instead(cfg)
    if kept_folder is not None:
        log.info("%s: kept in %s (trained and evaluated before); not trained here", spec.name(), kept_folder)
        spec.run_dir.parent.mkdir(parents=True, exist_ok=True)  # the row's folder, DVC's output, when all are kept
        return read_json(kept_folder / folders.TRAIN_SUMMARY)
    spec.run_dir.mkdir(parents=True, exist_ok=True)
    lock = lock_run_dir(spec.run_dir)
    try:
        return _train(cfg, spec)
    finally:
        if lock is not None:
            lock.close()


def _train(cfg: Config, spec: RunSpec) -> dict[str, Any]:
    run_dir, bpe_dir, ckpt_dir = spec.run_dir, Path(cfg.paths.bpe), spec.checkpoints
    float_path = floatpath.pin_stage(cfg.trainer, cfg.trainer.precision)
    atomic_write_text(run_dir / folders.CONFIG, OmegaConf.to_yaml(tracking.scrub(dataclasses.asdict(cfg))))
    L.seed_everything(cfg.seed, workers=True)
    tokenizer = Tokenizer(bpe_dir / folders.TOKENIZER)
    _carry_tokenizer(bpe_dir / folders.TOKENIZER, run_dir / folders.TOKENIZER)
    batches = batching(cfg.trainer, cfg.train)
    datamodule = TranslationDataModule(
        bpe_dir,
        max_tokens=batches.micro_tokens,
        seed=cfg.seed,
        num_workers=cfg.train.num_workers,
        val_max_tokens=cfg.train.max_tokens,
        length_bucket=cfg.train.length_bucket,
        batch_order=cfg.train.batch_order,
        batch_budget=cfg.train.batch_budget,
    )
    module = TranslationModule(cfg.model, cfg.train, tokenizer.vocab_size, tokenizer.pad_id)
    if cfg.train.compile:
        module.compile_step()  # model and loss together; checkpoint keys stay `model.*`
    ident = fingerprint.fingerprint(cfg, bpe_dir)
    ckpt_path = resume_checkpoint(ckpt_dir, ident, cfg.train.resume)
    summary_file = run_dir / folders.TRAIN_SUMMARY
    if (
        ckpt_path is not None
        and summary_file.is_file()
        and _finished(read_json(summary_file), stored_step(ckpt_path), cfg)
    ):
        log.info(
            "%s: already trained to step %d; skipping (train.resume=false retrains)", run_dir, stored_step(ckpt_path)
        )
        return read_json(summary_file)
    if ckpt_path is not None:
        log.info("%s: resuming from %s at step %d", run_dir, ckpt_path, stored_step(ckpt_path))
    # Each process's stretch of the run and its float path: a run resumed on another machine says so in train.json
    segments = floatpath.record_segment(
        run_dir / folders.SEGMENTS, stored_step(ckpt_path) if ckpt_path is not None else 0, float_path
    )
    progress = RunProgress(cfg.train.log_every_steps, cfg.train.progress_every_s, str(run_dir))
    curve = CurveWriter(run_dir / folders.CURVE, cfg.train.log_every_steps)
    accumulate = batches.accumulate
    # The same wandb run for the same fingerprint: a killed or requeued run continues its history.
    wandb_run = tracking.start_run(cfg, job_type="train", run_id=fingerprint.wandb_id(ident))
    loggers = [tracking.lightning_logger(wandb_run)] if wandb_run is not None else False
    trainer = L.Trainer(
        accelerator=cfg.trainer.accelerator,
        devices=cfg.trainer.devices,
        num_nodes=cfg.trainer.num_nodes,
        strategy=cfg.trainer.strategy,
        precision=cfg.trainer.precision,  # type: ignore[arg-type]  # Lightning checks it, naming the value
        deterministic=cfg.trainer.deterministic,
        max_steps=cfg.train.max_steps,
        accumulate_grad_batches=accumulate,
        val_check_interval=cfg.train.val_every_steps * accumulate,
        check_val_every_n_epoch=None,
        log_every_n_steps=cfg.train.log_every_steps,
        gradient_clip_val=cfg.train.grad_clip or None,
        # A progress bar only for a person at a terminal; a log file gets RunProgress's lines instead.
        enable_progress_bar=cfg.trainer.enable_progress_bar and on_terminal(),
        enable_model_summary=False,
        logger=loggers,
        # Checkpointer is a Lightning Checkpoint callback, so Lightning adds no checkpointing of its own.
        callbacks=[
            *_early_stopping(cfg.train.patience),
            Checkpointer(ckpt_dir, cfg.train, ident),
            progress,
            curve,
            RngState(cfg.seed),
            MFUMonitor(
                cfg.model,
                tokenizer.vocab_size,
                cfg.train.log_every_steps,
                str(cfg.trainer.precision),
                cfg.trainer.peak_flops,
            ),
        ],
        num_sanity_val_steps=0,
        default_root_dir=run_dir,
        plugins=[AtomicCheckpointIO()],
        use_distributed_sampler=False,  # TokenBatchSampler shards by rank itself
    )
    # train.deterministic_fill: whether new tensors are filled under trainer.deterministic (this process's setting
    # while it trains, restored after)
    fill = torch.utils.deterministic.fill_uninitialized_memory  # type: ignore[attr-defined]
    torch.utils.deterministic.fill_uninitialized_memory = cfg.train.deterministic_fill  # type: ignore[attr-defined]
    try:
        trainer.fit(module, datamodule=datamodule, ckpt_path=ckpt_path)
        summary = _summary(cfg, trainer, module, datamodule, progress, tokenizer, batches) | {
            "float_path": float_path,
            "segments": segments,
            "mixed_float_paths": floatpath.mixed(segments),
        }
        if trainer.is_global_zero:
            atomic_write_json(summary_file, summary)
            log.info(
                "%s: trained %d steps, dev PPL %.4g, loss %.4f, %s (%.0f tokens/s)",
                run_dir,
                summary["steps"],
                summary.get("val_ppl") or float("nan"),
                summary.get("train_loss") or float("nan"),
                clock(summary["wall_time_s"]),
                (summary["tokens_seen"]["src"] + summary["tokens_seen"]["tgt"]) / max(summary["wall_time_s"], 1e-9),
            )
            tracking.safe_log(wandb_run, {f"final/{k}": v for k, v in summary.items() if isinstance(v, float)})
            tracking.log_output(wandb_run, tracking.checkpoint_artifact(cfg))
    finally:
        torch.utils.deterministic.fill_uninitialized_memory = fill  # type: ignore[attr-defined]
        tracking.finish(wandb_run)
    return summary


def _carry_tokenizer(source: Path, dest: Path) -> None:
    """The run folder's own copy of its tokenizer, as a Hugging Face model folder carries its own: a copied run
    folder translates and exports anywhere (aiayn.inference.trained.tokenizer_dir), checked against the checkpoints'
    fingerprint there. Written once, atomically; a copy of another tokenizer is replaced."""
    if dest.is_file() and dest.read_bytes() == source.read_bytes():
        return
    with atomic_path(dest) as tmp:
        shutil.copyfile(source, tmp)


def _early_stopping(patience: int) -> list[EarlyStopping]:
    """fairseq's --patience as Lightning's EarlyStopping: after each validation (not at epoch ends: the sampler's
    epochs are not the run's), stop once `patience` validations in a row found no lower val/loss. Its counters are
    saved in last.ckpt, so a resumed run keeps counting."""
    if not patience:
        return []
    return [
        EarlyStopping(monitor="val/loss", mode="min", patience=patience, check_on_train_epoch_end=False, strict=True)
    ]


def _finished(summary: dict[str, Any], step: int, cfg: Config) -> bool:
    """Whether train.json says the run ended at `step`, the step of the checkpoint it would resume from: at
    max_steps, or stopped there by train.patience."""
    return step >= cfg.train.max_steps or (summary.get("stopped") == "patience" and summary.get("steps") == step)


def _summary(cfg: Config, trainer, module, datamodule, progress, tokenizer, batches: Batching) -> dict[str, Any]:
    metrics = trainer.callback_metrics
    stop = next((c for c in trainer.callbacks if isinstance(c, EarlyStopping)), None)
    stopped = "patience" if stop is not None and trainer.global_step < cfg.train.max_steps else "max_steps"
    if "val/ppl" not in metrics or trainer.global_step % cfg.train.val_every_steps:
        trainer.validate(module, datamodule=datamodule, verbose=False)  # the final weights' validation
        metrics = trainer.callback_metrics
    return {
        "steps": int(trainer.global_step),
        "tokens_seen": dict(progress.tokens),
        "wall_time_s": round(progress.elapsed(), 3),
        "train_loss": progress.train_loss(),  # not callback_metrics: validate() above clears it
        "val_loss": float(metrics["val/loss"]),
        "val_ppl": float(metrics["val/ppl"]),
        "params": module.model.num_parameters(),
        "vocab_size": tokenizer.vocab_size,
        "accumulate_grad_batches": batches.accumulate,
        "micro_batch_tokens": batches.micro_tokens,
        "device": {
            "accelerator": cfg.trainer.accelerator,
            "count": int(trainer.world_size),
            "name": torch.cuda.get_device_name(0) if torch.cuda.is_available() else "cpu",
        },
        "precision": str(cfg.trainer.precision),
        # why training ended; with train.patience the lowest dev loss it saw (best_val_loss)
        "stopped": stopped,
        **({"best_val_loss": float(stop.best_score)} if stop is not None else {}),
    }
