"""A training run's checkpoints, in one place: what is written when, how, and which one a run resumes from.

- `Checkpointer` (a Lightning callback on the public API: `trainer.save_checkpoint`, `strategy.remove_checkpoint`)
  writes the full `last.ckpt` a run resumes from every `train.ckpt_every_steps` steps (or `ckpt_every_minutes`, the
  paper's 10 minutes) and weights-only snapshots `step-*.ckpt` for averaging (Table 2: base 5, big 20), keeping the
  last `train.keep_last`; a checkpoint due at a validation step is written after that validation, so a run resumed
  from it does not skip it. Every checkpoint carries the run's fingerprint (aiayn.train.fingerprint);
  aiayn.checkpoint.reader reads them back.
- `AtomicCheckpointIO` writes each file beside its name, synced, then renames it; reads with weights_only=True.
- `resume_checkpoint` picks the checkpoint of this run's fingerprint to resume from and moves any other aside.
- `lock_run_dir`: one run in a folder at a time.

Which snapshots an evaluation averages is aiayn.checkpoint.averaging's (the evaluate stage imports no Lightning).
"""

from __future__ import annotations

import errno
import fcntl
import logging
import os
import shutil
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import lightning as L
import torch
from lightning.pytorch.callbacks import Checkpoint
from lightning.pytorch.plugins.io import TorchCheckpointIO

from aiayn.checkpoint.reader import stored_fingerprint, stored_step
from aiayn.config.schema import TrainConfig
from aiayn.io import atomic_path
from aiayn.run import folders, tracking
from aiayn.run.folders import CHECKPOINTS, FINGERPRINT, LAST_CHECKPOINT, LOCK, STALE
from aiayn.train.callbacks import ends_update

log = logging.getLogger(__name__)

LAST, SNAPSHOT = "last", "snapshot"  # what a due step writes


class Checkpointer(Checkpoint):
    """Writes last.ckpt at the checkpoint cadence and the last `keep_last` weights-only snapshots at the snapshot
    cadence (`snapshot_every_steps`, else the checkpoint cadence), each after the step's validation when one is due.

    With a step cadence a snapshot that would fall out of the last `keep_last` before the run ends is not written at
    all. A subclass of Lightning's `Checkpoint`, so the Trainer calls it after the other callbacks: the curve and
    counters it saves include the step it saves.
    """

    def __init__(self, ckpt_dir: Path, train: TrainConfig, fingerprint: Mapping[str, Any]) -> None:
        self.dir, self.fingerprint = Path(ckpt_dir), dict(fingerprint)
        self.every_steps, self.every_s = train.ckpt_every_steps, 60.0 * train.ckpt_every_minutes
        self.keep, self.val_every = train.keep_last or 0, train.val_every_steps
        self.snapshot_every = train.snapshot_every_steps or self.every_steps
        self.max_steps = train.max_steps
        # A run that may stop early (train.patience) cannot know its last snapshots in advance: it writes them all.
        self.first_snapshot = (
            self.max_steps - (self.keep - 1) * self.snapshot_every if self.snapshot_every and not train.patience else 0
        )
        self._last_time = time.monotonic()
        self._pending: set[str] = set()

    def _due(self, trainer: L.Trainer) -> set[str]:
        step, due = trainer.global_step, set()
        if self.every_steps:
            if step % self.every_steps == 0:
                due.add(LAST)
        elif self.every_s:
            # Every rank must decide alike: rank zero's clock decides. The final step is always written, so the
            # run's last weights are what is evaluated and a rerun finds the run finished.
            elapsed = time.monotonic() - self._last_time >= self.every_s
            if step >= self.max_steps or trainer.strategy.broadcast(elapsed):
                due.add(LAST)
        if self.keep > 0:
            if self.snapshot_every:
                if step % self.snapshot_every == 0 and step >= self.first_snapshot:
                    due.add(SNAPSHOT)
            elif LAST in due:  # a time cadence: a snapshot with each last.ckpt
                due.add(SNAPSHOT)
        return due

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        if not ends_update(trainer, batch_idx):
            return
        due = self._due(trainer)
        if due and trainer.global_step % self.val_every == 0:
            self._pending = due  # validation runs right after this batch: save then, with its metrics
        elif due:
            self._save(trainer, due)

    def on_validation_end(self, trainer, pl_module) -> None:
        if trainer.sanity_checking:
            return
        if trainer.should_stop and trainer.global_step < self.max_steps:
            # Stopped early (EarlyStopping ran before this callback): the final weights are saved whatever the cadence,
            # last.ckpt for a rerun to see where the run ended, a snapshot for averaging.
            self._pending |= {LAST, SNAPSHOT} if self.keep > 0 else {LAST}
        if self._pending:
            self._save(trainer, self._pending)
            self._pending = set()

    def _save(self, trainer: L.Trainer, due: set[str]) -> None:
        if LAST in due:
            trainer.save_checkpoint(self.dir / LAST_CHECKPOINT, weights_only=False)  # all of it, to resume from
            self._last_time = time.monotonic()
        if SNAPSHOT in due:
            trainer.save_checkpoint(
                self.dir / f"{folders.SNAPSHOT.format(step=trainer.global_step)}.ckpt", weights_only=True
            )
            for old in sorted(self.dir.glob(folders.SNAPSHOT_GLOB))[: -self.keep]:  # zero-padded: sorted by step
                trainer.strategy.remove_checkpoint(old)

    def on_save_checkpoint(self, trainer, pl_module, checkpoint: dict[str, Any]) -> None:
        checkpoint[FINGERPRINT] = self.fingerprint  # what the run is, for a safe resume


_NEARLY_FULL = 1 << 20  # bytes free below which a failed checkpoint write is taken for a full disk


class AtomicCheckpointIO(TorchCheckpointIO):
    """Checkpoints written to a temporary file beside their name, synced, then renamed; read with weights_only=True.

    Lightning stages a checkpoint in the system temp folder and moves it, which is a copy when that folder is on
    another disk: a kill mid-copy would leave a half-written last.ckpt for the next run to resume from.
    """

    def save_checkpoint(self, checkpoint: dict[str, Any], path, storage_options: Any = None) -> None:
        if storage_options is not None:
            raise TypeError(f"{type(self).__name__} takes no storage_options")
        with atomic_path(path) as tmp, open(tmp, "wb") as f:
            try:
                torch.save(checkpoint, f)
            except RuntimeError as err:
                # torch's zip writer reports a write cut short by a full disk as a RuntimeError ("unexpected pos"),
                # not as ENOSPC: said as what it is, so the run stops with the full disk's one line.
                if shutil.disk_usage(tmp.parent).free < _NEARLY_FULL:
                    raise OSError(errno.ENOSPC, f"No space left on device ({err})") from err
                raise
            f.flush()
            os.fsync(f.fileno())  # the rename must not reach the disk before the bytes do

    def load_checkpoint(self, path, map_location: Any = None, weights_only: bool | None = None) -> dict[str, Any]:
        return super().load_checkpoint(path, map_location=lambda storage, loc: storage, weights_only=True)


def _diff(old: Any, new: Any, prefix: str = "") -> list[str]:
    if isinstance(old, dict) and isinstance(new, dict):
        return [d for k in sorted(set(old) | set(new)) for d in _diff(old.get(k), new.get(k), f"{prefix}{k}.")]
    return [] if old == new else [f"{prefix.rstrip('.')}: checkpoint {old!r} != now {new!r}"]


def resume_checkpoint(ckpt_dir: Path, current: dict[str, Any], resume: bool) -> Path | None:
    """The newest checkpoint of this run's fingerprint to resume from: `last.ckpt`, or a newer `hpc_ckpt_*.ckpt`
    that Lightning wrote beside it when SLURM pre-empted the job. Checkpoints of another fingerprint are moved aside
    (`stale-checkpoints-<time>/`), never loaded, never deleted."""
    run_dir = ckpt_dir.parent
    candidates = [p for p in (ckpt_dir / LAST_CHECKPOINT, *sorted(run_dir.glob("hpc_ckpt_*.ckpt"))) if p.exists()]
    if not candidates:
        return None
    differences: list[str] = []
    if resume:
        newest = max(candidates, key=stored_step)
        differences = _diff(stored_fingerprint(newest), current)
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
