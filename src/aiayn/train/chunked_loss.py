"""The output projection and the label-smoothed loss in chunks of target tokens, the (N, V) logits never whole.

For base at the paper's batch the logits are ~0.9 G elements a step (1.85 GB in bf16, with their float32
log-softmax and gradient several times that): the largest tensors of the step. `chunked_label_smoothed_nll_loss`
computes, one chunk of C target tokens at a time, the logits (C, V), the loss (the same function as
`label_smoothed_nll_loss`, section 5.4) and, when gradients are wanted, the loss's gradient with respect to the
hidden states and the projection weight, in the forward pass: the gradient of the smoothed cross-entropy with
respect to the logits is softmax(z) - q, so no chunk's logits are kept for the backward pass, which only scales
the stored gradients by the upstream one (the loss is a scalar). The approach of Liger Kernel's fused linear
cross-entropy, in plain PyTorch ops. Switched on by train.loss_chunk_tokens (0, the default: the plain loss).

Dimensions: N target tokens (flattened), C tokens per chunk, D = d_model, V vocabulary size.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor

from aiayn.train.label_smoothing import smoothed_nll_from_lprobs, smoothed_nll_grad


class _ChunkedLoss(torch.autograd.Function):
    @staticmethod
    def forward(
        ctx, hidden: Tensor, weight: Tensor, target: Tensor, epsilon: float, pad_id: int, chunk: int
    ) -> tuple[Tensor, Tensor]:
        grad_h, grad_w = ctx.needs_input_grad[0], ctx.needs_input_grad[1]
        loss_sum = torch.zeros((), dtype=torch.float32, device=hidden.device)
        nll_sum = torch.zeros((), dtype=torch.float32, device=hidden.device)
        d_hidden: Any = torch.empty_like(hidden) if grad_h else None  # (N, D)
        acc = torch.promote_types(weight.dtype, torch.float32)  # float32 at least, also for bf16 weights
        d_weight: Any = torch.zeros(weight.shape, dtype=acc, device=weight.device) if grad_w else None  # (V, D)
        for start in range(0, hidden.size(0), chunk):
            h, y = hidden[start : start + chunk], target[start : start + chunk]  # (C, D), (C,)
            logits = F.linear(h, weight)  # (C, V), in autocast's dtype when autocast is on
            lprobs = F.log_softmax(logits, dim=-1, dtype=torch.float32)  # (C, V)
            loss, nll = smoothed_nll_from_lprobs(lprobs, y, epsilon, pad_id)
            loss_sum += loss
            nll_sum += nll
            if grad_h or grad_w:
                g = smoothed_nll_grad(lprobs, y, epsilon, pad_id).to(logits.dtype)  # (C, V)
                if grad_h:
                    d_hidden[start : start + chunk] = g @ weight.to(g.dtype)  # (C, D)
                if grad_w:
                    d_weight += g.t() @ h.to(g.dtype)  # (V, D), accumulated in float32 (or wider)
        ctx.save_for_backward(*(t for t in (d_hidden, d_weight) if t is not None))
        ctx.grads, ctx.weight_dtype = (grad_h, grad_w), weight.dtype
        ctx.mark_non_differentiable(nll_sum)
        return loss_sum, nll_sum

    @staticmethod
    def backward(ctx, grad_loss: Tensor, grad_nll: Tensor):
        saved = list(ctx.saved_tensors)
        d_hidden = saved.pop(0) * grad_loss if ctx.grads[0] else None
        d_weight = (saved.pop(0) * grad_loss).to(ctx.weight_dtype) if ctx.grads[1] else None
        return d_hidden, d_weight, None, None, None, None


def chunked_label_smoothed_nll_loss(
    hidden: Tensor, weight: Tensor, target: Tensor, epsilon: float, pad_id: int, chunk_tokens: int
) -> tuple[Tensor, Tensor]:
    """(loss_sum, nll_sum) of `label_smoothed_nll_loss(F.linear(hidden, weight), target, ...)`, `chunk_tokens`
    target tokens at a time. hidden (..., D) before the output projection, weight (V, D), target (...); nll_sum
    carries no gradient (it is logged, not trained on)."""
    if chunk_tokens < 1:
        raise ValueError(f"train.loss_chunk_tokens must be >= 1 here, got {chunk_tokens}")
    if hidden.shape[:-1] != target.shape:
        raise ValueError(f"hidden {tuple(hidden.shape)} does not match target {tuple(target.shape)} plus a D axis")
    vocab = weight.size(0)
    if not 0.0 <= epsilon < 1.0:
        raise ValueError(f"label smoothing epsilon must be in [0, 1), got {epsilon!r}")
    if epsilon > 0.0 and vocab < 3:
        raise ValueError(f"label smoothing over V - 2 classes needs a vocabulary of at least 3, got V={vocab}")
    return _ChunkedLoss.apply(
        hidden.reshape(-1, hidden.size(-1)), weight, target.reshape(-1), float(epsilon), int(pad_id), int(chunk_tokens)
    )
