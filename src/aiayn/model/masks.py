"""Boolean attention masks, True = "may attend" (the one mask convention of the project).

Dimensions: B batch, S source length, T target length; masks are (B or 1, 1, T or 1, S or T) so they
broadcast over the head dimension H.
"""

from __future__ import annotations

import torch
from torch import Tensor


def _check_tokens(tokens: Tensor, name: str) -> None:
    if tokens.dim() != 2:
        raise ValueError(f"{name} must be (B, L) token ids, got shape {tuple(tokens.shape)}")


def src_mask(src: Tensor, pad_id: int) -> Tensor:
    """Key-not-pad mask for attention over the source, (B, 1, 1, S)."""
    _check_tokens(src, "src")
    return (src != pad_id)[:, None, None, :]  # (B, 1, 1, S)


def causal_mask(length: int, device: torch.device | str | None = None) -> Tensor:
    """Position t may attend to positions <= t (decoder self-attention, section 3.2.3), (1, 1, T, T)."""
    if length < 1:
        raise ValueError(f"causal_mask length must be positive, got {length}")
    return torch.ones(length, length, dtype=torch.bool, device=device).tril_()[None, None]


def tgt_mask(tgt_in: Tensor, pad_id: int) -> Tensor:
    """Causal AND key-not-pad mask for decoder self-attention, (B, 1, T, T)."""
    _check_tokens(tgt_in, "tgt_in")
    keys = (tgt_in != pad_id)[:, None, None, :]  # (B, 1, 1, T)
    return causal_mask(tgt_in.size(1), tgt_in.device) & keys  # (B, 1, T, T)


def offset_causal_mask(n_new: int, n_cached: int, device: torch.device | str | None = None) -> Tensor:
    """Causal mask for n_new queries that follow n_cached cached positions, (1, 1, n_new, n_cached + n_new)."""
    query_pos = torch.arange(n_cached, n_cached + n_new, device=device)[:, None]
    key_pos = torch.arange(n_cached + n_new, device=device)[None, :]
    return (key_pos <= query_pos)[None, None]


class Causal:
    """The mask of teacher-forced decoder self-attention, left to the attention kernel (`is_causal=True`) instead of
    built: position t attends to positions <= t. No key-padding term is needed: targets are right-padded, so for
    every real query the positions <= t are all real, and padded queries' outputs only meet padded targets, which
    the loss leaves out. Without a mask tensor, fused attention can take its fastest (FlashAttention) kernel, and no
    (B, 1, T, T) mask is built and checked for empty rows per layer."""

    def __repr__(self) -> str:
        return "CAUSAL"


CAUSAL = Causal()
