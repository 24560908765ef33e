"""Shared token embeddings (section 3.4) and positional encodings (section 3.5, Table 3 row E).

Dimensions: B batch, L sequence length, V vocabulary size, D = d_model, P = max_positions.
"""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor, nn

POS_ENCODINGS = ("sinusoidal", "learned", "none")


def sinusoidal_table(n_positions: int, d_model: int, dtype: torch.dtype = torch.float32) -> Tensor:
    """PE(pos, 2i) = sin(pos / 10000^(2i/D)), PE(pos, 2i+1) = cos(...) (section 3.5), (P, D)."""
    if d_model % 2:
        raise ValueError(f"sinusoidal positions need an even d_model, got d_model={d_model}")
    # Built in float64 so that large positions keep full precision before the cast.
    pos = torch.arange(n_positions, dtype=torch.float64)[:, None]  # (P, 1)
    inv_freq = torch.exp(torch.arange(0, d_model, 2, dtype=torch.float64) * (-math.log(10000.0) / d_model))
    angles = pos * inv_freq  # (P, D/2)
    table = torch.stack([angles.sin(), angles.cos()], dim=-1)  # (P, D/2, 2)
    return table.reshape(n_positions, d_model).to(dtype)  # (P, D), sin/cos interleaved


class PositionalEncoding(nn.Module):
    """Position signal added to the embeddings: fixed sinusoids, learned (Table 3 row E) or none."""

    def __init__(self, kind: str, d_model: int, max_positions: int) -> None:
        super().__init__()
        if kind not in POS_ENCODINGS:
            raise ValueError(f"pos_encoding must be one of {POS_ENCODINGS}, got {kind!r}")
        self.kind, self.max_positions = kind, max_positions
        if kind == "sinusoidal":
            # Not persistent: it is a function of the shape, so checkpoints need not carry it.
            self.register_buffer("table", sinusoidal_table(max_positions, d_model), persistent=False)
        elif kind == "learned":  # Departure: see docs/departures.md#learned-positions
            self.table = nn.Parameter(torch.empty(max_positions, d_model))
            # Departure: see docs/departures.md#initialisation
            nn.init.normal_(self.table, mean=0.0, std=d_model**-0.5)

    def forward(self, length: int, offset: int = 0) -> Tensor | None:
        """Encodings of positions offset .. offset+length-1, (1, L, D); None when kind is "none"."""
        if self.kind == "none":
            return None
        if offset + length > self.max_positions:
            raise ValueError(
                f"position {offset + length - 1} is beyond max_positions={self.max_positions}; raise max_positions"
            )
        return self.table[offset : offset + length][None]  # (1, L, D)


class SharedEmbedding(nn.Module):
    """One matrix for source and target embeddings and the pre-softmax projection (section 3.4)."""

    def __init__(self, vocab_size: int, d_model: int) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.empty(vocab_size, d_model))
        self.scale = math.sqrt(d_model)
        # Departure: see docs/departures.md#initialisation
        # std D^-0.5 makes the scaled embeddings (x sqrt(D)) unit-variance, as tensor2tensor and fairseq do.
        nn.init.normal_(self.weight, mean=0.0, std=d_model**-0.5)

    def forward(self, tokens: Tensor) -> Tensor:
        """Token ids (B, L) -> embeddings multiplied by sqrt(d_model), (B, L, D)."""
        return F.embedding(tokens, self.weight) * self.scale

    def project(self, x: Tensor) -> Tensor:
        """Pre-softmax linear transformation with the shared weight, (B, L, D) -> logits (B, L, V)."""
        return F.linear(x, self.weight)
