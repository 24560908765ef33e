"""Per-subword perplexity on held-out data (Table 3's PPL column: per wordpiece, no label smoothing)."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping

import torch
import torch.nn.functional as F
from torch import Tensor, nn


def dev_perplexity(model: nn.Module, batches: Iterable[Mapping[str, Tensor]], pad_id: int) -> float:
    """exp(total NLL / number of non-pad target tokens), model in eval mode (restored afterwards).

    Each batch holds `src`, `tgt_in`, `tgt_out` (B, T) long tensors; the model's forward(src, tgt_in) gives logits.
    """
    device = next(model.parameters()).device
    total_nll, n_tokens = 0.0, 0
    was_training = model.training
    model.eval()
    try:
        with torch.inference_mode():
            for i, batch in enumerate(batches):
                missing = {"src", "tgt_in", "tgt_out"} - batch.keys()
                if missing:
                    raise KeyError(f"batch {i} lacks {sorted(missing)}")
                src, tgt_in, tgt_out = (batch[k].to(device) for k in ("src", "tgt_in", "tgt_out"))
                logits = model(src, tgt_in).float()  # (B, T, V); float32 so the sum is not rounded in half
                total_nll += F.cross_entropy(
                    logits.flatten(0, 1), tgt_out.flatten(), ignore_index=pad_id, reduction="sum"
                ).item()
                n_tokens += int((tgt_out != pad_id).sum())
    finally:
        model.train(was_training)
    if n_tokens == 0:
        raise ValueError("no target tokens in the batches: perplexity is undefined")
    return math.exp(total_nll / n_tokens)
