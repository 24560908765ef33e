"""Greedy decoding: the most probable next token at every step, batched over sentences.

As in beam search (aiayn.decode.beam), the outputs stay on the device; sentences that stopped leave the batch
every `compact_every` steps, the only steps on which the host waits for the device.
"""

from __future__ import annotations

import torch
from torch import Tensor

from aiayn.decode.step import Models, force_eos, max_output_lengths, stepper


def greedy_search(
    model: Models,
    src: Tensor,
    *,
    max_len_b: int,
    bos_id: int,
    eos_id: int,
    pad_id: int,
    incremental: bool = True,
    compact_every: int = 1,
    max_length: int | None = None,
) -> list[list[int]]:
    """Greedy output token ids of each source sentence (no BOS/EOS), in input order.

    `src` (B, S) ends each sentence with EOS and is right-padded with `pad_id`. A sentence stops at EOS or
    after input length + `max_len_b` tokens (section 6.1), at most `max_length` (None: no cap); stopped sentences
    leave the batch every `compact_every` steps.
    """
    if compact_every < 1:
        raise ValueError(f"compact_every must be >= 1, got {compact_every}")
    n_sent, device = src.size(0), src.device
    steps = stepper(model, src, pad_id=pad_id, bos_id=bos_id, repeats=1, incremental=incremental)
    limits = max_output_lengths(src, pad_id, max_len_b, max_length)  # (n,)
    last_step = int(limits.max())  # every sentence has stopped after this step: one read per batch
    sent_ids = torch.arange(n_sent, device=device)  # (n,) index in the input batch of each row
    searching = torch.ones(n_sent, dtype=torch.bool, device=device)  # (n,)
    tokens = torch.full((n_sent, 1), bos_id, dtype=torch.long, device=device)  # (n, t + 1)
    out = torch.zeros(n_sent, last_step + 1, dtype=torch.long, device=device)  # (B, L) each sentence's tokens
    lengths = torch.zeros(n_sent, dtype=torch.long, device=device)  # (B,) set when the sentence stops
    for step in range(last_step + 1):
        lprobs = force_eos(steps.log_probs(tokens), limits == step, eos_id)  # (n, V)
        best = lprobs.argmax(dim=-1)  # (n,)
        done = searching & (best == eos_id)  # (n,) forced at the limit, so every sentence ends by last_step
        out[sent_ids, step] = best  # positions from a sentence's length on are never read
        lengths[sent_ids] = torch.where(done, step, lengths[sent_ids])
        searching &= ~done
        tokens = torch.cat([tokens, best[:, None]], dim=1)  # (n, t + 2)
        if (step + 1) % compact_every == 0:
            keep = searching.nonzero().flatten()  # host read
            if keep.numel() == 0:
                break
            if keep.numel() < searching.numel():
                tokens, limits, sent_ids, searching = tokens[keep], limits[keep], sent_ids[keep], searching[keep]
                steps.select(keep, keep)
    return [row[:n] for row, n in zip(out.tolist(), lengths.tolist())]
