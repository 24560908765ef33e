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


class _PadFreeChunkedLoss(torch.autograd.Function):
    """The same loss and gradients over the non-pad targets only (pad targets add 0 to both), in fewer passes over
    each chunk's (C, V) logits: the log-softmax, one sum, the softmax in place, and the smoothed target's constant
    part (-eps / (V - 2) off the pad column, -(1 - eps) more on the gold one) applied after the matmuls, once per
    batch for the weight's gradient."""

    @staticmethod
    def forward(
        ctx, hidden: Tensor, weight: Tensor, target: Tensor, epsilon: float, pad_id: int, chunk: int
    ) -> tuple[Tensor, Tensor]:
        grad_h, grad_w = ctx.needs_input_grad[0], ctx.needs_input_grad[1]
        vocab = weight.size(0)
        rows = (target != pad_id).nonzero().squeeze(1)  # (M,) the non-pad targets
        h_all, y_all = hidden.index_select(0, rows), target.index_select(0, rows)  # (M, D), (M,)
        off = epsilon / (vocab - 2) if epsilon > 0.0 else 0.0  # q on a non-gold, non-pad class
        gold = off - (1.0 - epsilon)  # q_gold = 1 - eps, of which off is already taken
        loss_sum = torch.zeros((), dtype=torch.float32, device=hidden.device)
        nll_sum = torch.zeros((), dtype=torch.float32, device=hidden.device)
        acc = torch.promote_types(weight.dtype, torch.float32)
        d_rows: Any = torch.empty(h_all.shape, dtype=acc, device=hidden.device) if grad_h else None  # (M, D)
        d_weight: Any = torch.zeros(weight.shape, dtype=acc, device=weight.device) if grad_w else None  # (V, D)
        w = weight.to(acc)
        for start in range(0, h_all.size(0), chunk):
            h, y = h_all[start : start + chunk], y_all[start : start + chunk]  # (C, D), (C,)
            logits = F.linear(h, weight)  # (C, V), in autocast's dtype when autocast is on
            lprobs = F.log_softmax(logits, dim=-1, dtype=torch.float32)  # (C, V)
            nll = -lprobs.gather(-1, y[:, None]).squeeze(-1)  # (C,)
            nll_sum += nll.sum()
            if epsilon > 0.0:
                non_pad = lprobs.sum(-1) - lprobs[:, pad_id]  # (C,)
                loss_sum += ((1.0 - epsilon) * nll + off * (-non_pad - nll)).sum()
            else:
                loss_sum += nll.sum()
            if grad_h or grad_w:
                p = lprobs.exp_().to(logits.dtype)  # (C, V) softmax, in place (float32 logits)
                if grad_h:
                    d_rows[start : start + chunk] = p @ weight.to(p.dtype)  # (C, D); q's constant part below
                if grad_w:
                    if p.dtype == acc:
                        d_weight.addmm_(p.t(), h.to(acc))  # (V, D)
                    else:
                        d_weight += p.t() @ h.to(p.dtype)  # accumulated in float32 (or wider)
        if grad_h:
            # q's constant part: -off on every column but pad's, gold more on the gold one
            d_rows -= off * (w.sum(0) - w[pad_id])
            d_rows += gold * w.index_select(0, y_all)
            d_hidden = torch.zeros(hidden.shape, dtype=acc, device=hidden.device)
            d_hidden.index_copy_(0, rows, d_rows)
        if grad_w:
            h_sum = h_all.to(acc).sum(0)  # (D,)
            pad_row = d_weight[pad_id].clone()
            d_weight -= off * h_sum
            d_weight[pad_id] = pad_row
            d_weight.index_add_(0, y_all, h_all.to(acc), alpha=gold)
        ctx.save_for_backward(*(t for t in (d_hidden if grad_h else None, d_weight) if t is not None))
        ctx.grads, ctx.dtypes = (grad_h, grad_w), (hidden.dtype, weight.dtype)
        ctx.mark_non_differentiable(nll_sum)
        return loss_sum, nll_sum

    @staticmethod
    def backward(ctx, grad_loss: Tensor, grad_nll: Tensor):
        saved = list(ctx.saved_tensors)
        d_hidden = (saved.pop(0) * grad_loss).to(ctx.dtypes[0]) if ctx.grads[0] else None
        d_weight = (saved.pop(0) * grad_loss).to(ctx.dtypes[1]) if ctx.grads[1] else None
        return d_hidden, d_weight, None, None, None, None


def chunked_label_smoothed_nll_loss(
    hidden: Tensor,
    weight: Tensor,
    target: Tensor,
    epsilon: float,
    pad_id: int,
    chunk_tokens: int,
    skip_pad: bool = False,
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
    function = _PadFreeChunkedLoss if skip_pad else _ChunkedLoss
    return function.apply(
        hidden.reshape(-1, hidden.size(-1)), weight, target.reshape(-1), float(epsilon), int(pad_id), int(chunk_tokens)
    )
