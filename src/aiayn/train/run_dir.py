"""The lifecycle of a run folder (aiayn.runspec names it): who may use it (a lock), which checkpoint it resumes from
(the one whose fingerprint, aiayn.runspec.fingerprint, matches this run's), and what is moved aside (checkpoints of
another config, never loaded, never deleted)."""

from __future__ import annotations

import fcntl
import logging
import os
import shutil
import time
from pathlib import Path
from typing import Any

import torch

from aiayn import tracking
from aiayn.runspec import CHECKPOINTS, LAST_CHECKPOINT, LOCK, STALE

log = logging.getLogger(__name__)


def _diff(old: Any, new: Any, prefix: str = "") -> list[str]:
    if isinstance(old, dict) and isinstance(new, dict):
        return [d for k in sorted(set(old) | set(new)) for d in _diff(old.get(k), new.get(k), f"{prefix}{k}.")]
    return [] if old == new else [f"{prefix.rstrip('.')}: checkpoint {old!r} != now {new!r}"]


def resume_checkpoint(ckpt_dir: Path, current: dict[str, Any], resume: bool) -> Path | None:
    """The newest checkpoint of this config to resume from: `last.ckpt`, or a newer `hpc_ckpt_*.ckpt` that
    Lightning wrote beside it when SLURM pre-empted the job. Checkpoints of another config are moved aside, never
    loaded."""
    run_dir = ckpt_dir.parent
    candidates = [p for p in (ckpt_dir / LAST_CHECKPOINT, *sorted(run_dir.glob("hpc_ckpt_*.ckpt"))) if p.exists()]
    if not candidates:
        return None
    if resume:
        stored = {p: _stored(p) for p in candidates}
        newest = max(candidates, key=lambda p: stored[p][1])
        differences = _diff(stored[newest][0], current)
        if not differences:
            return newest
    aside = run_dir / f"{STALE}{time.strftime('%Y%m%d-%H%M%S')}"
    reason = "train.resume=false" if not resume else "config differs:\n  " + "\n  ".join(differences)
    log.warning("not resuming from %s (%s); moved to %s", candidates[0], reason, aside)
    if ckpt_dir.exists():
        shutil.move(str(ckpt_dir), aside)
    aside.mkdir(exist_ok=True)
    for path in run_dir.glob("hpc_ckpt_*.ckpt"):
        shutil.move(str(path), aside / path.name)
    return None


def _stored(path: Path) -> tuple[dict[str, Any], int]:
    """A checkpoint's fingerprint and global step, read without loading the weights and optimizer state."""
    try:
        ckpt = torch.load(path, map_location="cpu", weights_only=True, mmap=True)
    except Exception as err:  # truncated, not a zip, unpicklable: name the file, never start over silently
        raise ValueError(
            f"{path}: unreadable checkpoint ({type(err).__name__}: {err}); delete it, or rerun with "
            f"train.resume=false to move the checkpoints aside and start over"
        ) from err
    return ckpt.get("aiayn_fingerprint") or {}, int(ckpt.get("global_step", -1))


def lock_run_dir(run_dir: Path):
    """Hold `run_dir/.lock` for this process's lifetime (the open file); a second run of the folder is refused.

    Only the launching process locks: DDP ranks it starts (which see RANK/LOCAL_RANK/NODE_RANK) share its folder.
    """
    if not tracking.is_rank_zero():
        return None
    handle = open(run_dir / LOCK, "a+", encoding="utf-8")  # noqa: SIM115 (the open file is the lock)
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        handle.seek(0)
        owner = handle.read().strip() or "unknown"
        handle.close()
        raise RuntimeError(
            f"{run_dir} is in use by another run (pid {owner}, lock {run_dir / LOCK}); wait for "
            f"it to finish, or give this run another seed or paths.runs"
        ) from None
    handle.truncate(0)
    handle.write(f"{os.getpid()}\n")
    handle.flush()
    for leftover in [*run_dir.glob(".*.tmp"), *(run_dir / CHECKPOINTS).glob(".*.tmp")]:
        leftover.unlink()  # an atomic write cut short by a kill: never renamed, never read
        log.info("removed %s, left by an interrupted write", leftover)
    return handle


def stored_step(path: Path) -> int:
    """The global step a checkpoint was written at (-1 when it does not say), read without loading its weights."""
    return _stored(path)[1]
