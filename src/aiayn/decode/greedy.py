"""Greedy decoding: the most probable next token at every step, batched over sentences."""
from __future__ import annotations

import torch
from torch import Tensor, nn

from aiayn.decode.step import Stepper, force_eos, max_output_lengths


def greedy_search(model: nn.Module, src: Tensor, *, max_len_b: int, bos_id: int, eos_id: int, pad_id: int,
                  incremental: bool = True) -> list[list[int]]:
    """Greedy output token ids of each source sentence (no BOS/EOS), in input order.

    `src` (B, S) ends each sentence with EOS and is right-padded with `pad_id`. A sentence stops at EOS or
    after input length + `max_len_b` tokens (section 6.1); finished sentences leave the batch.
    """
    n_sent = src.size(0)
    stepper = Stepper(model, src, pad_id=pad_id, bos_id=bos_id, repeats=1, incremental=incremental)
    limits = max_output_lengths(src, pad_id, max_len_b)  # (B,)
    sent_ids = torch.arange(n_sent, device=src.device)  # original index of each live row
    tokens = torch.full((n_sent, 1), bos_id, dtype=torch.long, device=src.device)  # (B, 1)
    outputs: list[list[int]] = [[] for _ in range(n_sent)]
    step = 0
    while sent_ids.numel() > 0:
        lprobs = force_eos(stepper.log_probs(tokens), limits == step, eos_id)  # (n, V)
        best = lprobs.argmax(dim=-1)  # (n,)
        done = best == eos_id
        for row in done.nonzero().flatten().tolist():
            outputs[sent_ids[row]] = tokens[row, 1:].tolist()
        tokens = torch.cat([tokens, best[:, None]], dim=1)  # (n, t + 1)
        if bool(done.any()):
            keep = (~done).nonzero().flatten()
            tokens, limits, sent_ids = tokens[keep], limits[keep], sent_ids[keep]
            if keep.numel() > 0:
                stepper.select(keep)
        step += 1
    return outputs
