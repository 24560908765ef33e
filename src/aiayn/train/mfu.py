"""Model FLOPs utilisation (MFU): counted model FLOPs per second (aiayn.cost.flops) over the device's peak rate.

Counted FLOPs are the model's matmuls for the real (non-pad) tokens of each micro-batch, 3 x forward for training;
the peak is the device's dense rate at the run's precision, from `trainer.peak_flops` or a small datasheet table.
Everything here works on host integers the collate already made, so it adds no host-device synchronisation.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

import lightning as L
import torch

from aiayn.cost.flops import peak_flops, training_flops
from aiayn.model.config import ModelConfig
from aiayn.train.callbacks import ends_update


def batch_flops(model: ModelConfig, vocab_size: int, batch: Mapping[str, Any]) -> float:
    """Counted training FLOPs of one micro-batch, from its host-side token counts and sentence count."""
    n_src, n_tgt = int(batch["n_src_tokens"]), int(batch["n_tgt_tokens"])
    sentences = max(int(batch["src"].shape[0]), 1)
    if n_src == 0 or n_tgt == 0:
        return 0.0
    return training_flops(model, vocab_size, n_src, n_tgt, n_src / sentences, n_tgt / sentences)


class MFUMonitor(L.Callback):
    """Logs `train/tflops` (counted model TFLOP/s per device) and `train/mfu` (over the peak, when one is known).

    Logged at the same steps as the loss; the window runs from one logged step to the next.
    """

    def __init__(
        self,
        model: ModelConfig,
        vocab_size: int,
        log_every_steps: int,
        precision: str,
        peak: float | None = None,
    ) -> None:
        if peak is not None and not peak > 0:
            raise ValueError(f"trainer.peak_flops must be positive or null, got {peak!r}")
        self.model, self.vocab_size = model, vocab_size
        self.log_every_steps, self.precision = log_every_steps, precision
        self.peak = peak
        self._flops, self._t0 = 0.0, time.perf_counter()

    def on_train_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        device = pl_module.device
        if self.peak is None and device.type == "cuda":
            self.peak = peak_flops(torch.cuda.get_device_name(device), self.precision)
        self._flops, self._t0 = 0.0, time.perf_counter()

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        self._flops += batch_flops(self.model, self.vocab_size, batch)
        if trainer.global_step % self.log_every_steps or not ends_update(trainer, batch_idx):
            return
        now = time.perf_counter()
        rate = self._flops / max(now - self._t0, 1e-9)  # this device's counted FLOP/s over the window
        pl_module.log("train/tflops", rate / 1e12)
        if self.peak is not None:
            pl_module.log("train/mfu", rate / self.peak)
        self._flops, self._t0 = 0.0, now
