"""Token embeddings (section 3.4) and position signals (section 3.5, Table 3 row E, rotary).

Dimensions: B batch, H heads, L sequence length, V vocabulary size, D = d_model, P = max_positions, d_k key size.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor, nn

ADDITIVE = ("sinusoidal", "learned")  # added to the embeddings; rotary acts inside self-attention instead


def sinusoidal_table(n_positions: int, d_model: int, dtype: torch.dtype = torch.float32) -> Tensor:
    """PE(pos, 2i) = sin(pos / 10000^(2i/D)), PE(pos, 2i+1) = cos(...) (section 3.5), (P, D); D even
    (aiayn.model.config.check)."""
    # Built in float64 so that large positions keep full precision before the cast.
    pos = torch.arange(n_positions, dtype=torch.float64)[:, None]  # (P, 1)
    inv_freq = torch.exp(torch.arange(0, d_model, 2, dtype=torch.float64) * (-math.log(10000.0) / d_model))
    angles = pos * inv_freq  # (P, D/2)
    table = torch.stack([angles.sin(), angles.cos()], dim=-1)  # (P, D/2, 2)
    return table.reshape(n_positions, d_model).to(dtype)  # (P, D), sin/cos interleaved


def rotate(x: Tensor, cos: Tensor, sin: Tensor) -> Tensor:
    """Rotary position embedding (Su et al. 2021): each pair (x_i, x_{i + d/2}) of x (..., L, d) rotated by its
    position's angles; cos/sin (L, d/2). Then q_m . k_n depends on the positions only through m - n."""
    x1, x2 = x.chunk(2, dim=-1)  # (..., L, d/2) each
    cos, sin = cos.to(x.dtype), sin.to(x.dtype)  # the tables are float32; under autocast x may be bf16
    return torch.cat([x1 * cos - x2 * sin, x2 * cos + x1 * sin], dim=-1)


class PositionalEncoding(nn.Module):
    """Position signal: sinusoids or a learned table added to the embeddings, rotary angles for self-attention
    (queries and keys), or none."""

    table: Tensor  # a buffer (sinusoidal) or a Parameter (learned)
    cos: Tensor  # buffers of rotary positions
    sin: Tensor

    def __init__(self, kind: str, d_model: int, max_positions: int, d_k: int | None = None) -> None:
        super().__init__()
        self.kind, self.max_positions = kind, max_positions  # values checked by aiayn.model.config.check
        if kind == "sinusoidal":
            # Not persistent: it is a function of the shape, so checkpoints need not carry it.
            self.register_buffer("table", sinusoidal_table(max_positions, d_model), persistent=False)
        elif kind == "learned":  # Departure: see docs/departures.md#learned-positions
            self.table = nn.Parameter(torch.empty(max_positions, d_model))
            # Departure: see docs/departures.md#initialisation
            nn.init.normal_(self.table, mean=0.0, std=d_model**-0.5)
        elif kind == "rotary":
            d_k = d_model if d_k is None else d_k  # even (aiayn.model.config.check)
            # theta_i = 10000^(-2i/d_k), as the sinusoids of section 3.5 (and Su et al.); (P, d_k/2)
            inv_freq = torch.exp(torch.arange(0, d_k, 2, dtype=torch.float64) * (-math.log(10000.0) / d_k))
            angles = torch.arange(max_positions, dtype=torch.float64)[:, None] * inv_freq
            self.register_buffer("cos", angles.cos().float(), persistent=False)
            self.register_buffer("sin", angles.sin().float(), persistent=False)

    def _check(self, length: int, offset: int) -> None:
        if offset + length > self.max_positions:
            raise ValueError(
                f"position {offset + length - 1} is beyond max_positions={self.max_positions}; raise max_positions"
            )

    def forward(self, length: int, offset: int = 0) -> Tensor | None:
        """Additive encodings of positions offset .. offset+length-1, (1, L, D); None unless sinusoidal/learned."""
        if self.kind not in ADDITIVE:
            return None
        self._check(length, offset)
        return self.table[offset : offset + length][None]  # (1, L, D)

    def rotary(self, length: int, offset: int = 0) -> tuple[Tensor, Tensor] | None:
        """Rotary (cos, sin) of positions offset .. offset+length-1, each (L, d_k/2); None unless rotary."""
        if self.kind != "rotary":
            return None
        self._check(length, offset)
        return self.cos[offset : offset + length], self.sin[offset : offset + length]


class TokenEmbedding(nn.Module):
    """A (V, D) matrix used as an embedding (scaled by sqrt(d_model), section 3.4) and, where it is shared with the
    output, as the pre-softmax projection."""

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
        """Pre-softmax linear transformation with this weight, (B, L, D) -> logits (B, L, V)."""
        return F.linear(x, self.weight)
