"""Lightning callbacks of a training run: progress counters, the learning curve file, exact-resume RNG state.

Each keeps its state in the checkpoint, so a run killed and resumed reports the same totals and the same curve
as one that never stopped.
"""
from __future__ import annotations

import csv
import io
import random
import time
from pathlib import Path
from typing import Any

import lightning as L
import numpy as np
import torch

from aiayn.io import atomic_write_text

CURVE_FIELDS = ("step", "train/loss", "train/nll", "train/lr", "train/tokens_per_s", "val/loss", "val/ppl")


class RunProgress(L.Callback):
    """Counts tokens and wall time, logs train/lr and train/tokens_per_s, checks the loss is finite at log steps."""

    def __init__(self, log_every_steps: int) -> None:
        self.log_every_steps = log_every_steps
        self.tokens = {"src": 0, "tgt": 0}
        self.wall_time_s = 0.0  # across resumes
        self._t0 = self._window_t0 = time.perf_counter()
        self._window_tokens = 0

    def on_train_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self._t0 = self._window_t0 = time.perf_counter()

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        n_src, n_tgt = int(batch["n_src_tokens"]), int(batch["n_tgt_tokens"])  # host ints from the collate
        self.tokens["src"] += n_src * trainer.world_size
        self.tokens["tgt"] += n_tgt * trainer.world_size
        self._window_tokens += n_src + n_tgt
        step = trainer.global_step
        if step % self.log_every_steps == 0 and trainer.fit_loop._should_accumulate() is False:
            now = time.perf_counter()
            pl_module.log("train/tokens_per_s", self._window_tokens / max(now - self._window_t0, 1e-9))
            pl_module.log("train/lr", trainer.optimizers[0].param_groups[0]["lr"])
            self._window_t0, self._window_tokens = now, 0
            pl_module.check_finite()

    def elapsed(self) -> float:
        return self.wall_time_s + time.perf_counter() - self._t0

    def state_dict(self) -> dict[str, Any]:
        return {"tokens": dict(self.tokens), "wall_time_s": self.elapsed()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.tokens = dict(state["tokens"])
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
        row = {"step": trainer.global_step}
        row.update({k: round(float(metrics[k]), 6) for k in keys if k in metrics})
        if self.rows and self.rows[-1]["step"] == row["step"]:
            self.rows[-1].update(row)
        else:
            self.rows.append(row)

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        if trainer.global_step % self.log_every_steps == 0 and not trainer.fit_loop._should_accumulate():
            self._record(trainer, CURVE_FIELDS[1:5])

    def on_validation_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        if not trainer.sanity_checking:
            self._record(trainer, CURVE_FIELDS[5:])
            self.write()

    def on_train_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self.write()

    def write(self) -> None:
        buf = io.StringIO()
        writer = csv.DictWriter(buf, fieldnames=[f.replace("/", "_") for f in CURVE_FIELDS], lineterminator="\n")
        writer.writeheader()
        for row in self.rows:
            writer.writerow({k.replace("/", "_"): v for k, v in row.items()})
        atomic_write_text(self.path, buf.getvalue())

    def state_dict(self) -> dict[str, Any]:
        return {"rows": list(self.rows)}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.rows = list(state["rows"])


class RngState(L.Callback):
    """Saves and restores the Python, NumPy and torch random states, so dropout after a resume is the same."""

    def on_save_checkpoint(self, trainer, pl_module, checkpoint: dict[str, Any]) -> None:
        kind, keys, pos, has_gauss, gauss = np.random.get_state()
        checkpoint["rng_states"] = {  # plain types and tensors only, so weights_only=True loads them
            "python": random.getstate(),
            "numpy": (kind, torch.from_numpy(keys.astype(np.int64)), int(pos), int(has_gauss), float(gauss)),
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


class RunIdentity(L.Callback):
    """Stamps each checkpoint with what the run is (config that shapes results, tokenizer hash), for safe resume."""

    def __init__(self, fingerprint: dict[str, Any]) -> None:
        self.fingerprint = fingerprint

    def on_save_checkpoint(self, trainer, pl_module, checkpoint: dict[str, Any]) -> None:
        checkpoint["aiayn_fingerprint"] = self.fingerprint
