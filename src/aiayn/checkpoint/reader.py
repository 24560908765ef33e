"""Reading what aiayn.train.checkpointing writes, without Lightning: the one `torch.load` of the project's
checkpoints (weights_only=True, memory-mapped, so that a step or a fingerprint is read without the weights and the
optimiser state), and the one error a bad file gets. Resuming (train), decoding (eval) and averaging (Table 2's
weights) all read checkpoints here; snapshot names are folders.SNAPSHOT's, as the writer names them.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

from aiayn.run import folders


def read_checkpoint(path: str | Path) -> dict[str, Any]:
    """A checkpoint as the dict Lightning saved; a truncated, corrupt or foreign file is a ValueError naming it."""
    try:
        ckpt = torch.load(path, map_location="cpu", weights_only=True, mmap=True)
    except Exception as err:  # truncated, not a zip, unpicklable: name the file, never start over silently
        raise ValueError(
            f"{path}: unreadable checkpoint ({type(err).__name__}: {err}); delete it and rerun the train stage "
            f"(train.resume=false moves the run's checkpoints aside and starts over)"
        ) from err
    if not isinstance(ckpt, dict):
        raise ValueError(f"{path}: not a checkpoint of this project (a {type(ckpt).__name__}, not a dict)")
    return ckpt


def stored_step(path: str | Path) -> int:
    """The global step a checkpoint was written at (-1 when it does not say)."""
    return int(read_checkpoint(path).get("global_step", -1))


def stored_fingerprint(path: str | Path) -> dict[str, Any]:
    """The fingerprint (aiayn.train.fingerprint) the run that wrote a checkpoint stored in it; {} when it stored
    none."""
    return read_checkpoint(path).get(folders.FINGERPRINT) or {}


def model_weights(path: str | Path, prefix: str = "model.") -> dict[str, Tensor]:
    """The entries of a checkpoint's state_dict under `prefix`, with the prefix stripped."""
    ckpt = read_checkpoint(path)
    if "state_dict" not in ckpt:
        raise KeyError(f"{path}: not a Lightning checkpoint (no 'state_dict' key)")
    weights = {k[len(prefix) :]: v for k, v in ckpt["state_dict"].items() if k.startswith(prefix)}
    if not weights:
        raise KeyError(f"{path}: no state_dict keys start with {prefix!r}")
    return weights


_SNAPSHOT = re.compile(re.escape(folders.SNAPSHOT).replace(r"\{step:08d\}", r"(\d+)"))


def snapshot_step(path: str | Path) -> int | None:
    """The step an averaging snapshot's name says (step-00000200.ckpt -> 200); None for another name."""
    match = _SNAPSHOT.fullmatch(Path(path).stem)
    return int(match.group(1)) if match else None


def checkpoint_step(path: str | Path) -> int:
    """A checkpoint's training step: from its snapshot name, else its `global_step` entry."""
    step = snapshot_step(path)
    if step is not None:
        return step
    ckpt = read_checkpoint(path)
    if "global_step" not in ckpt:
        raise KeyError(f"{path}: the name carries no step and the checkpoint has no 'global_step' key")
    return int(ckpt["global_step"])
