"""The LightningModule: builds the Transformer from its ModelConfig, trains it with the paper's recipe.

Section 5: Adam (beta1 0.9, beta2 0.98, eps 1e-9), the Eq. 3 learning-rate schedule stepped per optimizer update,
label-smoothed cross-entropy. Logging of throughput, checkpoints and wandb live in callbacks (callbacks.py).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import lightning as L
import torch
from lightning.pytorch.utilities.types import OptimizerLRScheduler

from aiayn.config.schema import TrainConfig
from aiayn.model.config import ModelConfig, recorded
from aiayn.model.transformer import Transformer
from aiayn.train.callbacks import ends_update
from aiayn.train.step import ModelLoss, batch_loss, model_loss, optimizer_and_schedule


class TranslationModule(L.LightningModule):
    """One encoder-decoder translation task, built from the run's `model` and `train` config groups; its
    checkpoints' hyperparameters hold them as plain dicts, so that a checkpoint loads with weights_only=True
    (`from_hyperparameters` builds the module back)."""

    first_bad_step: torch.Tensor  # a buffer (register_buffer)

    def __init__(self, model: ModelConfig, train: TrainConfig, vocab_size: int, pad_id: int) -> None:
        super().__init__()
        hparams = {"model": dataclasses.asdict(model), "train": dataclasses.asdict(train)}
        self.save_hyperparameters(hparams | {"vocab_size": vocab_size, "pad_id": pad_id})
        self.model = Transformer(model, vocab_size, pad_id)
        self.train_cfg = train
        self.pad_id = pad_id
        self._val_sums = torch.zeros(3)  # label-smoothed loss, nll, target tokens over the validation set
        # First step whose loss was not finite (-1: none). Kept on the device so the check costs no sync per step.
        self.register_buffer("first_bad_step", torch.tensor(-1, dtype=torch.long), persistent=False)
        self._model_loss: ModelLoss = model_loss(self.model, pad_id)  # the forward pass and the loss together

    @classmethod
    def from_hyperparameters(cls, hparams: dict[str, Any]) -> TranslationModule:
        """The module a checkpoint's `hyper_parameters` describe (its weights still to load): the model as this
        version reads a recorded one (aiayn.model.config.recorded)."""
        model, train = recorded(hparams["model"]), TrainConfig(**hparams["train"])
        return cls(model, train, int(hparams["vocab_size"]), int(hparams["pad_id"]))

    def _losses(self, batch: dict[str, torch.Tensor], epsilon: float) -> tuple[torch.Tensor, torch.Tensor]:
        chunk = self.train_cfg.loss_chunk_tokens
        skip_pad = self.train_cfg.loss_skip_pad
        return batch_loss(self.model, batch, epsilon, self.pad_id, chunk, self._model_loss, skip_pad)

    def compile_step(self, **options: Any) -> None:
        """train.compile: torch.compile the forward pass together with the loss, so that the log-softmax and the
        label-smoothed sums are fused over the logits instead of writing (N, V) float32 log-probabilities and
        reading them back. The chunked loss (train.loss_chunk_tokens) stays eager. Checkpoint keys do not change.
        """
        self._model_loss = torch.compile(self._model_loss, **options)

    def training_step(self, batch: dict[str, torch.Tensor], batch_idx: int) -> torch.Tensor:
        loss_sum, nll_sum = self._losses(batch, self.train_cfg.label_smoothing)
        n_tokens = max(int(batch["n_tgt_tokens"]), 1)
        # Per-token mean of this micro-batch; Lightning divides by the accumulation count, so an update averages
        # over about batch_tokens target tokens. Departure: see docs/departures.md#loss-normalisation
        loss = loss_sum / n_tokens
        self._flag_if_not_finite(loss)
        if self._logging_step():
            # Lightning turns progress-bar metrics into Python floats after every batch, a host-device sync per
            # step, so the loss goes to the bar only when one is drawn (a terminal); logs and loggers get it anyway.
            self.log("train/loss", loss.detach(), prog_bar=self.trainer.progress_bar_callback is not None)
            self.log("train/nll", nll_sum.detach() / n_tokens)
        return loss

    def _logging_step(self) -> bool:
        """True on the steps Lightning sends to its loggers (every log_every_n_steps-th update). A `self.log` call
        costs a noticeable share of a small model's step on CPU (bench/lightning_overhead.py), so the other steps
        skip it."""
        return (self.global_step + 1) % self.trainer.log_every_n_steps == 0  # type: ignore[attr-defined]

    def on_validation_epoch_start(self) -> None:
        self._val_sums = torch.zeros(3, dtype=torch.float64, device=self.device)

    def validation_step(self, batch: dict[str, torch.Tensor], batch_idx: int) -> None:
        loss_sum, nll_sum = self._losses(batch, self.train_cfg.label_smoothing)
        n = (batch["tgt_out"] != self.pad_id).sum()
        self._val_sums += torch.stack([loss_sum.detach(), nll_sum.detach(), n]).to(self._val_sums)

    def on_validation_epoch_end(self) -> None:
        sums = self.trainer.strategy.reduce(self._val_sums, reduce_op="sum")
        loss, nll = (sums[:2] / sums[2].clamp(min=1)).float()
        self.log("val/loss", loss, sync_dist=False)
        self.log("val/nll", nll, sync_dist=False)
        # Per-subword-token perplexity, Table 3's PPL column (no label smoothing in it).
        self.log("val/ppl", torch.exp(nll), prog_bar=True, sync_dist=False)

    def on_before_optimizer_step(self, optimizer: torch.optim.Optimizer) -> None:
        grads = [p.grad for p in self.parameters() if p.grad is not None]
        if grads:
            norm = torch.nn.utils.get_total_norm(grads)
            # A finite loss can still give an infinite gradient, and Adam would turn the weights to NaN.
            self._flag_if_not_finite(norm)
            if self._logging_step():
                self.log("train/grad_norm", norm)

    def _flag_if_not_finite(self, value: torch.Tensor) -> None:
        """Record the current step in `first_bad_step` if `value` is NaN or infinite (on the device: no sync)."""
        # In place with the step as a Python scalar: no new tensor from the host (on a GPU, torch.tensor(step,
        # device=...) is a copy that waits for the device), no buffer reassignment.
        self.first_bad_step.masked_fill_(~torch.isfinite(value) & (self.first_bad_step < 0), self.global_step)

    def check_finite(self) -> None:
        """Raise with the step number if any loss so far was NaN or infinite (one host sync)."""
        step = int(self.first_bad_step)
        if step >= 0:
            raise FloatingPointError(
                f"non-finite training loss or gradient at step {step}; stopping. The last good checkpoint is kept; "
                f"lower train.lr_factor or set train.grad_clip and resume."
            )

    def on_train_batch_end(self, outputs: Any, batch: Any, batch_idx: int) -> None:
        """Stop on a non-finite loss or gradient at each logging step (one host read; other steps read nothing)."""
        if self.global_step % self.trainer.log_every_n_steps == 0 and ends_update(self.trainer, batch_idx):  # type: ignore[attr-defined]
            self.check_finite()

    def on_save_checkpoint(self, checkpoint: dict[str, Any]) -> None:
        self.check_finite()  # never write a checkpoint of weights trained on a NaN

    def configure_optimizers(self) -> OptimizerLRScheduler:
        d_model = self.hparams["model"]["d_model"]
        optimizer, schedule = optimizer_and_schedule(self.parameters(), self.train_cfg, d_model, self.device)
        return {"optimizer": optimizer, "lr_scheduler": {"scheduler": schedule, "interval": "step"}}
