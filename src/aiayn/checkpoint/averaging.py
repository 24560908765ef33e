"""Checkpoint averaging (section 6.1: the base model averages the last 5 checkpoints, the big model the last 20)."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path

from torch import Tensor

from aiayn.checkpoint.reader import checkpoint_step, model_weights, read_checkpoint, snapshot_step
from aiayn.run import folders

log = logging.getLogger(__name__)


def average_checkpoints(paths: Sequence[str | Path], prefix: str = "model.") -> dict[str, Tensor]:
    """Element-wise mean of the model parameters of several checkpoints, as a model state dict.

    Floating tensors are summed in float64 and cast back to their dtype; integer buffers come from the last file.
    """
    files = [Path(p) for p in paths]
    if not files:
        raise ValueError("average_checkpoints needs at least one checkpoint path")
    first = model_weights(files[0], prefix)
    sums = {k: v.double() if v.is_floating_point() else v for k, v in first.items()}
    for path in files[1:]:
        weights = model_weights(path, prefix)
        missing, extra = sorted(first.keys() - weights.keys()), sorted(weights.keys() - first.keys())
        if missing or extra:
            raise KeyError(f"{path}: keys differ from {files[0]}: missing {missing[:5]}, unexpected {extra[:5]}")
        for key, value in weights.items():
            if value.shape != first[key].shape:
                raise ValueError(
                    f"{path}: {key!r} has shape {tuple(value.shape)}, {files[0]} has {tuple(first[key].shape)}"
                )
            sums[key] = (sums[key] + value.double()) if value.is_floating_point() else value
    return {k: (v / len(files)).to(first[k].dtype) if first[k].is_floating_point() else v for k, v in sums.items()}


def select_last(ckpt_dir: str | Path, k: int) -> list[Path]:
    """The last max(k, 1) checkpoints of a run's folder by training step, oldest first.

    A checkpoint at a step already covered by a snapshot (folders.SNAPSHOT; typically `last.ckpt`) is skipped; an
    unreadable last.ckpt, whose step it reads, is an error naming the file. Fewer than k (a run shorter than k
    snapshots, or one trained keeping fewer: train.keep_last) are returned with a warning naming the folder; eval.json
    lists those used.
    """
    ckpt_dir = Path(ckpt_dir)
    if k < 0:
        raise ValueError(f"k must be >= 0, got {k}")
    if (ckpt_dir / folders.LAST_CHECKPOINT).exists():
        read_checkpoint(ckpt_dir / folders.LAST_CHECKPOINT)
    files = sorted(ckpt_dir.glob("*.ckpt"), key=lambda p: (snapshot_step(p) is None, p.name))
    if not files:
        raise FileNotFoundError(f"{ckpt_dir}: no *.ckpt files")
    by_step: dict[int, Path] = {}
    for path in files:  # snapshots first, so they win over an unnamed copy of the same step
        by_step.setdefault(checkpoint_step(path), path)
    paths = [by_step[step] for step in sorted(by_step)[-max(k, 1) :]]
    if len(paths) < k:
        log.warning(
            "%s: %d checkpoints asked for, %d there (%s to %s); averaging those",
            ckpt_dir,
            k,
            len(paths),
            paths[0].name,
            paths[-1].name,
        )
    return paths
