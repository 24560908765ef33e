"""A training step's parts in plain PyTorch, shared by the Lightning module (aiayn.train.module) and
gpu/gpu_check.py, which times steps on a GPU machine without Lightning: the loss of a batch and the optimizer
with the paper's schedule (section 5.3)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping

import torch
from torch import Tensor

from aiayn.config.schema import TrainConfig
from aiayn.model.transformer import Transformer
from aiayn.train.chunked_loss import chunked_label_smoothed_nll_loss
from aiayn.train.label_smoothing import label_smoothed_nll_loss
from aiayn.train.schedule import learning_rate

ModelLoss = Callable[[Tensor, Tensor, Tensor, float], tuple[Tensor, Tensor]]


def model_loss(model: Transformer, pad_id: int) -> ModelLoss:
    """The forward pass and the label-smoothed loss as one function of (src, tgt_in, tgt_out, epsilon), returning
    the summed loss and NLL: what train.compile compiles, so the log-softmax and the sums fuse over the logits."""

    def loss(src: Tensor, tgt_in: Tensor, tgt_out: Tensor, epsilon: float) -> tuple[Tensor, Tensor]:
        return label_smoothed_nll_loss(model(src, tgt_in), tgt_out, epsilon, pad_id)  # logits (B, T, V)

    return loss


def batch_loss(
    model: Transformer,
    batch: Mapping[str, Tensor],
    epsilon: float,
    pad_id: int,
    chunk: int,
    whole: ModelLoss,
    skip_pad: bool = False,
) -> tuple[Tensor, Tensor]:
    """The summed label-smoothed loss and NLL of a batch: through `whole` (model_loss, compiled or not), or with
    train.loss_chunk_tokens the projection and loss `chunk` target tokens at a time, the logits never whole (with
    train.loss_skip_pad, over the non-pad targets alone)."""
    if chunk:
        states = model.features(batch["src"], batch["tgt_in"])  # (B, T, D)
        return chunked_label_smoothed_nll_loss(
            states, model.output_weight, batch["tgt_out"], epsilon, pad_id, chunk, skip_pad=skip_pad
        )
    return whole(batch["src"], batch["tgt_in"], batch["tgt_out"], epsilon)


def optimizer_and_schedule(
    parameters: Iterable[Tensor], train: TrainConfig, d_model: int, device: torch.device
) -> tuple[torch.optim.Adam, torch.optim.lr_scheduler.LambdaLR]:
    """Adam with the train config's betas and eps, and train.lr_schedule (Eq. 3 by default) per update: LambdaLR
    multiplies lr=1.0, so the lambda is the learning rate itself, and optimizer step k uses the schedule's rate at
    k+1. One fused kernel over all parameters where the device has one (train.fused_adam)."""
    fused = device.type in ("cuda", "cpu") and train.fused_adam
    optimizer = torch.optim.Adam(
        parameters, lr=1.0, betas=(train.adam_beta1, train.adam_beta2), eps=train.adam_eps, fused=fused
    )
    schedule = torch.optim.lr_scheduler.LambdaLR(
        optimizer,
        lambda k: learning_rate(
            train.lr_schedule, k + 1, d_model, train.warmup_steps, train.max_steps, train.lr_factor
        ),
    )
    return optimizer, schedule
