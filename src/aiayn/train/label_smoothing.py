"""Label-smoothed cross-entropy (section 5.4), summed over non-pad target tokens.

Dimensions: N target tokens (any leading shape, e.g. B x T, flattened), V vocabulary size.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor


def label_smoothed_nll_loss(logits: Tensor, target: Tensor, epsilon: float, pad_id: int) -> tuple[Tensor, Tensor]:
    """Return (loss_sum, nll_sum) over non-pad targets, the smoothed target being q = (1 - eps) on the
    gold token and eps / (V - 2) on every other token except pad, which gets 0 (section 5.4).

    Departure: see docs/departures.md#label-smoothing-variant. Spreading eps over V - 2 rather than V - 1 keeps
    all target mass off pad, which the model must never emit, and makes q a proper distribution whose minimiser
    is reachable with pad's probability -> 0.
    """
    vocab = logits.size(-1)
    if not 0.0 <= epsilon < 1.0:
        raise ValueError(f"label smoothing epsilon must be in [0, 1), got {epsilon!r}")
    if epsilon > 0.0 and vocab < 3:
        raise ValueError(f"label smoothing over V - 2 classes needs a vocabulary of at least 3, got V={vocab}")
    if logits.shape[:-1] != target.shape:
        raise ValueError(f"logits {tuple(logits.shape)} do not match target {tuple(target.shape)} plus a V axis")
    # float32 log-softmax even for half-precision logits: the sums below lose accuracy otherwise.
    lprobs = F.log_softmax(logits.reshape(-1, vocab), dim=-1, dtype=torch.float32)  # (N, V)
    return smoothed_nll_from_lprobs(lprobs, target.reshape(-1), epsilon, pad_id)


def smoothed_nll_from_lprobs(lprobs: Tensor, target: Tensor, epsilon: float, pad_id: int) -> tuple[Tensor, Tensor]:
    """(loss_sum, nll_sum) from float32 log-probabilities (N, V) and targets (N,): the body of
    `label_smoothed_nll_loss`, shared with the chunked loss (aiayn.train.chunked_loss)."""
    vocab = lprobs.size(-1)
    keep = target != pad_id  # (N,)
    nll = -lprobs.gather(-1, target[:, None]).squeeze(-1)  # (N,)
    nll_sum = nll.masked_fill(~keep, 0.0).sum()
    if epsilon == 0.0:
        return nll_sum, nll_sum
    # Sum of log-probs over all non-pad classes, from two slices (views) so pad's -inf can never enter.
    non_pad = lprobs[:, :pad_id].sum(-1) + lprobs[:, pad_id + 1 :].sum(-1)  # (N,)
    others = -non_pad - nll  # (N,) minus the log-probs of the V - 2 non-gold, non-pad classes
    loss = (1.0 - epsilon) * nll + epsilon / (vocab - 2) * others
    return loss.masked_fill(~keep, 0.0).sum(), nll_sum


def smoothed_nll_grad(lprobs: Tensor, target: Tensor, epsilon: float, pad_id: int) -> Tensor:
    """d loss_sum / d logits of the loss above: softmax - q for non-pad targets (q: 1 - eps on the gold token,
    eps / (V - 2) on every other token but pad, 0 on pad), 0 for pad targets; (N, V) float32."""
    vocab = lprobs.size(-1)
    grad = lprobs.exp()  # (N, V) softmax
    gold = -1.0
    if epsilon > 0.0:
        off = epsilon / (vocab - 2)
        grad -= off
        grad[:, pad_id] += off  # q_pad = 0
        gold = off - (1.0 - epsilon)  # q_gold = 1 - eps, of which off is already taken
    grad.scatter_add_(-1, target[:, None], torch.full((target.numel(), 1), gold, dtype=grad.dtype, device=grad.device))
    return grad.masked_fill_((target == pad_id)[:, None], 0.0)
