"""Checkpoint averaging (section 6.1: the base model averages the last 5 checkpoints, the big model the last 20)."""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path

import torch
from torch import Tensor

# Lightning-style names carry the step: "step=000123.ckpt", "step-00000123.ckpt", "epoch=1-step=500.ckpt".
_STEP_IN_NAME = re.compile(r"step[=_-]?(\d+)")


def _load_state_dict(path: Path) -> dict[str, Tensor]:
    """The `state_dict` of a Lightning checkpoint, read with weights_only=True."""
    ckpt = torch.load(path, map_location="cpu", weights_only=True)
    if not isinstance(ckpt, dict) or "state_dict" not in ckpt:
        raise KeyError(f"{path}: not a Lightning checkpoint (no 'state_dict' key)")
    return ckpt["state_dict"]


def _model_weights(path: Path, prefix: str) -> dict[str, Tensor]:
    """The entries of a checkpoint's state_dict under `prefix`, with the prefix stripped."""
    weights = {k[len(prefix) :]: v for k, v in _load_state_dict(path).items() if k.startswith(prefix)}
    if not weights:
        raise KeyError(f"{path}: no state_dict keys start with {prefix!r}")
    return weights


def average_checkpoints(paths: Sequence[str | Path], prefix: str = "model.") -> dict[str, Tensor]:
    """Element-wise mean of the model parameters of several checkpoints, as a model state dict.

    Floating tensors are summed in float64 and cast back to their dtype; integer buffers come from the last file.
    """
    files = [Path(p) for p in paths]
    if not files:
        raise ValueError("average_checkpoints needs at least one checkpoint path")
    first = _model_weights(files[0], prefix)
    sums = {k: v.double() if v.is_floating_point() else v for k, v in first.items()}
    for path in files[1:]:
        weights = _model_weights(path, prefix)
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


def checkpoint_step(path: str | Path) -> int:
    """Training step of a checkpoint: from its name when it carries one, else its `global_step` entry."""
    path = Path(path)
    match = _STEP_IN_NAME.search(path.stem)
    if match:
        return int(match.group(1))
    # mmap avoids reading optimiser state just to learn the step.
    ckpt = torch.load(path, map_location="cpu", weights_only=True, mmap=True)
    if not isinstance(ckpt, dict) or "global_step" not in ckpt:
        raise KeyError(f"{path}: the name carries no step and the checkpoint has no 'global_step' key")
    return int(ckpt["global_step"])


def select_last(ckpt_dir: str | Path, k: int) -> list[Path]:
    """The last max(k, 1) checkpoints of a folder by training step, oldest first.

    A checkpoint at a step already covered by a step-named file (typically `last.ckpt`) is skipped.
    """
    ckpt_dir = Path(ckpt_dir)
    if k < 0:
        raise ValueError(f"k must be >= 0, got {k}")
    files = sorted(ckpt_dir.glob("*.ckpt"), key=lambda p: (_STEP_IN_NAME.search(p.stem) is None, p.name))
    if not files:
        raise FileNotFoundError(f"{ckpt_dir}: no *.ckpt files")
    by_step: dict[int, Path] = {}
    for path in files:  # step-named files first, so they win over an unnamed copy of the same step
        by_step.setdefault(checkpoint_step(path), path)
    return [by_step[step] for step in sorted(by_step)[-max(k, 1) :]]
