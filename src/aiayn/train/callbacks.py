"""Lightning callbacks of a training run: progress counters, the learning curve file, exact-resume RNG state.

Each keeps its state in the checkpoint, so a run killed and resumed reports the same totals and the same curve
as one that never stopped.
"""

from __future__ import annotations

import logging
import random
import time
from pathlib import Path
from typing import Any

import lightning as L
import numpy as np
import torch

from aiayn.io import atomic_write_text
from aiayn.progress import clock, eta
from aiayn.run import curve

log = logging.getLogger(__name__)


def ends_update(trainer: L.Trainer, batch_idx: int) -> bool:
    """Whether the micro-batch just trained ended an optimizer update (the last of its accumulation, or of the
    epoch), from Lightning's public counters."""
    return (batch_idx + 1) % trainer.accumulate_grad_batches == 0 or trainer.is_last_batch


class RunProgress(L.Callback):
    """Counts tokens and wall time, logs train/lr and train/tokens_per_s at each logging step, and writes a plain
    progress line (the run, step / max, loss, lr, tokens/s, elapsed, ETA) at a logging step when `every_s` seconds
    have passed since the last (0: at every one): the log of a run whose output goes to a file (dvc repro, SLURM),
    where no progress bar is drawn, a few lines a run however many seeds print into it."""

    def __init__(self, log_every_steps: int, every_s: float = 0.0, label: str = "") -> None:
        self.log_every_steps, self.every_s, self.label = log_every_steps, every_s, label
        self._last_line = time.perf_counter()
        self.tokens = {"src": 0, "tgt": 0}
        self.wall_time_s = 0.0  # across resumes
        self._t0 = self._window_t0 = time.perf_counter()
        self._window_tokens = 0
        self._train_loss: torch.Tensor | float = float("nan")  # the last step's; kept across resumes
        self._start_step = 0

    def on_train_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self._t0 = self._window_t0 = self._last_line = time.perf_counter()
        self._start_step = trainer.global_step  # a resumed run's ETA counts only the steps this process trains

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        n_src, n_tgt = int(batch["n_src_tokens"]), int(batch["n_tgt_tokens"])  # host ints from the collate
        self.tokens["src"] += n_src * trainer.world_size
        self.tokens["tgt"] += n_tgt * trainer.world_size
        self._window_tokens += n_src + n_tgt
        step = trainer.global_step
        if step % self.log_every_steps == 0 and ends_update(trainer, batch_idx):
            self._read_train_loss(trainer)
            now = time.perf_counter()
            tokens_per_s = self._window_tokens / max(now - self._window_t0, 1e-9)
            lr = trainer.optimizers[0].param_groups[0]["lr"]
            pl_module.log("train/tokens_per_s", tokens_per_s)
            pl_module.log("train/lr", lr)
            self._window_t0, self._window_tokens = now, 0
            if trainer.is_global_zero and now - self._last_line >= self.every_s:
                self._last_line, session = now, now - self._t0
                log.info(
                    "%sstep %d/%d  loss %.4f  lr %.3g  tokens/s %.0f  elapsed %s  ETA %s",
                    f"{self.label}: " if self.label else "",
                    step,
                    trainer.max_steps,
                    float(self._train_loss),
                    lr,
                    tokens_per_s,
                    clock(self.elapsed()),
                    eta(step - self._start_step, trainer.max_steps - self._start_step, session),
                )

    def on_train_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self._read_train_loss(trainer)

    def _read_train_loss(self, trainer: L.Trainer) -> None:
        """The loss the module logged last (it logs on these steps only). Only here: `trainer.callback_metrics`
        turns the progress-bar metrics into Python floats, a host-device sync on every access."""
        self._train_loss = trainer.callback_metrics.get("train/loss", self._train_loss)

    def elapsed(self) -> float:
        return self.wall_time_s + time.perf_counter() - self._t0

    def train_loss(self) -> float:
        """The last logged training loss, also after a resume that had nothing left to train."""
        return float(self._train_loss)

    def state_dict(self) -> dict[str, Any]:
        return {"tokens": dict(self.tokens), "wall_time_s": self.elapsed(), "train_loss": self.train_loss()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.tokens = dict(state["tokens"])
        self._train_loss = float(state.get("train_loss", float("nan")))  # absent in older checkpoints
        self.wall_time_s = float(state["wall_time_s"])
        self._t0 = time.perf_counter()


class CurveWriter(L.Callback):
    """Writes `curve.csv` (one line per logged step) for `dvc plots`; the rows travel in checkpoints."""

    def __init__(self, path: Path | str, log_every_steps: int) -> None:
        self.path = Path(path)
        self.log_every_steps = log_every_steps
        self.rows: list[dict[str, Any]] = []

    def _record(self, trainer: L.Trainer, keys: tuple[str, ...]) -> None:
        metrics = trainer.callback_metrics
        row: dict[str, float] = {"step": trainer.global_step}
        row.update({k: round(float(metrics[k]), 6) for k in keys if k in metrics})
        if self.rows and self.rows[-1]["step"] == row["step"]:
            self.rows[-1].update(row)
        else:
            self.rows.append(row)

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        if trainer.global_step % self.log_every_steps == 0:  # micro-batches of one step update one row
            self._record(trainer, curve.TRAIN_METRICS)

    def on_validation_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        if not trainer.sanity_checking:
            self._record(trainer, curve.VAL_METRICS)
            self.write()

    def on_train_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self.write()

    def write(self) -> None:
        atomic_write_text(self.path, curve.curve_text(self.rows))

    def state_dict(self) -> dict[str, Any]:
        return {"rows": list(self.rows)}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.rows = list(state["rows"])


class RngState(L.Callback):
    """Seeds torch before each training micro-batch from (seed, rank, epoch, batch index); saves the global states.

    Dropout masks then depend only on the batch's position, so a resumed run draws the same masks as one that never
    stopped, whatever consumed random numbers in between (a restart's new data iterator, validation's).
    """

    def __init__(self, seed: int) -> None:
        self.seed = seed

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx: int) -> None:
        key = [self.seed, trainer.global_rank, trainer.current_epoch, batch_idx]
        torch.manual_seed(int(np.random.SeedSequence(key).generate_state(1, np.uint64)[0] >> 1))

    def on_save_checkpoint(self, trainer, pl_module, checkpoint: dict[str, Any]) -> None:
        kind, keys, pos, has_gauss, gauss = np.random.get_state()  # the legacy tuple (the default)
        checkpoint["rng_states"] = {  # plain types and tensors only, so weights_only=True loads them
            "python": random.getstate(),
            "numpy": (kind, torch.from_numpy(np.asarray(keys, dtype=np.int64)), int(pos), int(has_gauss), float(gauss)),
            "torch": torch.get_rng_state(),
            "cuda": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else [],
        }

    def on_load_checkpoint(self, trainer, pl_module, checkpoint: dict[str, Any]) -> None:
        states = checkpoint.get("rng_states")
        if states is None:  # a checkpoint from before this callback existed: resume without exact RNG
            return
        random.setstate(tuple(states["python"]))
        kind, keys, pos, has_gauss, gauss = states["numpy"]
        np.random.set_state((kind, keys.numpy().astype(np.uint32), pos, has_gauss, gauss))
        torch.set_rng_state(states["torch"])
        if states["cuda"] and torch.cuda.is_available():
            torch.cuda.set_rng_state_all(states["cuda"])
