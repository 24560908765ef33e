"""Scaled dot-product attention (Eq. 1, section 3.2.1) and multi-head attention (section 3.2.2).

Dimensions: B batch, H heads, T query length, S key/value length, d_k query/key size, d_v value size,
D = d_model. Masks are boolean, True = "may attend", broadcastable to (B, H, T, S).
"""

from __future__ import annotations

import math

import torch.nn.functional as F
from torch import Tensor, nn

from aiayn.model.config import ModelConfig
from aiayn.model.embeddings import rotate
from aiayn.model.masks import CAUSAL, Causal, causal_mask

Rotary = tuple[Tensor, Tensor]  # (cos, sin) of the positions, each (L, d_k/2): PositionalEncoding.rotary

# Xavier gain of W_Q, W_K, W_V: nn.MultiheadAttention's packed init, fairseq's (1/sqrt(2), the schema's default).
# Departure: see docs/departures.md#initialisation
QKV_INIT_GAIN = ModelConfig.qkv_init_gain


def _guard_empty_rows(mask: Tensor) -> tuple[Tensor, Tensor]:
    """Let fully masked query rows (e.g. padding queries) attend everywhere; report which rows had a key.

    Without this, softmax over a row of -inf is NaN (and older fused kernels return NaN too); such rows
    are given a zero output instead.
    """
    has_key = mask.any(dim=-1, keepdim=True)  # (..., T, 1)
    return mask | ~has_key, has_key


def attention_weights(q: Tensor, k: Tensor, mask: Tensor | None = None) -> Tensor:
    """softmax(Q K^T / sqrt(d_k)) explicitly (Eq. 1); masked weights are exactly 0, empty rows all 0."""
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))  # (..., T, S)
    if mask is None:
        return scores.softmax(dim=-1)
    safe_mask, has_key = _guard_empty_rows(mask)
    weights = scores.masked_fill(~safe_mask, float("-inf")).softmax(dim=-1)
    return weights.masked_fill(~(mask & has_key), 0.0)


def scaled_dot_product_attention(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    mask: Tensor | Causal | None = None,
    dropout_p: float = 0.0,
    *,
    reference: bool = False,
) -> Tensor:
    """Eq. 1, section 3.2.1 over (..., T, d_k), (..., S, d_k), (..., S, d_v); returns (..., T, d_v).

    `mask`: a boolean tensor (True = may attend), None (everything), or `CAUSAL` (t attends to <= t, T = S).

    The default path is PyTorch's fused kernel; `reference=True` computes the weights explicitly.
    """
    if reference:
        if isinstance(mask, Causal):
            mask = causal_mask(q.size(-2), q.device)
        weights = attention_weights(q, k, mask)
        if dropout_p > 0.0:
            weights = F.dropout(weights, p=dropout_p)
        return weights @ v
    if mask is None or isinstance(mask, Causal):
        return F.scaled_dot_product_attention(q, k, v, dropout_p=dropout_p, is_causal=mask is not None)
    safe_mask, has_key = _guard_empty_rows(mask)
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=safe_mask, dropout_p=dropout_p)
    return out.masked_fill(~has_key, 0.0)


class MultiHeadAttention(nn.Module):
    """Multi-head attention (section 3.2.2) with independent d_k and d_v (Table 3 rows A and B).

    W_Q, W_K (D -> H*d_k) and W_V (D -> H*d_v) are stored as one packed matrix so that self-attention
    projects with a single matmul; cross-attention uses slices (views) of it. Each is Xavier-initialised with gain
    `qkv_init_gain` (1/sqrt(2) by default, as `nn.MultiheadAttention`'s packed init and fairseq). `dropout` acts on the
    attention weights; the paper uses none there (model.attention_dropout, default 0.0).

    `capture` is off (None) by default; a list there (aiayn.model.capture.capture_attention sets one) receives the
    attention weights (B, H, T, S) of every call, as `attention_weights` computes them from the same q, k and mask
    the output's kernel read, before dropout; the output itself is computed as without it.
    """

    def __init__(
        self, d_model: int, n_heads: int, d_k: int, d_v: int, dropout: float = 0.0, qkv_init_gain: float = QKV_INIT_GAIN
    ) -> None:
        super().__init__()
        self.n_heads, self.d_k, self.d_v = n_heads, d_k, d_v
        self.dropout, self.qkv_init_gain = dropout, qkv_init_gain
        self.capture: list[Tensor] | None = None
        # Departure: see docs/departures.md#attention-biases (the paper's W^Q, W^K, W^V, W^O have no bias)
        self.w_qkv = nn.Linear(d_model, n_heads * (2 * d_k + d_v))
        self.w_o = nn.Linear(n_heads * d_v, d_model)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Xavier-uniform per projection matrix, W_Q, W_K and W_V scaled by `qkv_init_gain`, and zero biases; the
        paper gives no init."""
        # Departure: see docs/departures.md#initialisation
        hk = self.n_heads * self.d_k
        for block in self.w_qkv.weight.data.split([hk, hk, self.n_heads * self.d_v], dim=0):
            nn.init.xavier_uniform_(block, gain=self.qkv_init_gain)
        nn.init.xavier_uniform_(self.w_o.weight)
        nn.init.zeros_(self.w_qkv.bias)
        nn.init.zeros_(self.w_o.bias)

    def _split(self, x: Tensor, d_head: int) -> Tensor:
        batch, length, _ = x.shape
        return x.view(batch, length, self.n_heads, d_head).transpose(1, 2)  # (B, H, L, d_head)

    def project_qkv(self, x: Tensor, rotary: Rotary | None = None) -> tuple[Tensor, Tensor, Tensor]:
        """Self-attention projections of x (B, T, D) -> q, k (B, H, T, d_k) and v (B, H, T, d_v); with `rotary`,
        q and k rotated by their positions."""
        hk = self.n_heads * self.d_k
        q, k, v = self.w_qkv(x).split([hk, hk, self.n_heads * self.d_v], dim=-1)
        q, k, v = self._split(q, self.d_k), self._split(k, self.d_k), self._split(v, self.d_v)
        if rotary is not None:
            q, k = rotate(q, *rotary), rotate(k, *rotary)
        return q, k, v

    def project_q(self, x: Tensor) -> Tensor:
        """Query projection only, (B, T, D) -> (B, H, T, d_k)."""
        hk = self.n_heads * self.d_k
        return self._split(F.linear(x, self.w_qkv.weight[:hk], self.w_qkv.bias[:hk]), self.d_k)

    def project_kv(self, memory: Tensor) -> tuple[Tensor, Tensor]:
        """Key and value projections, (B, S, D) -> (B, H, S, d_k), (B, H, S, d_v)."""
        hk = self.n_heads * self.d_k
        kv = F.linear(memory, self.w_qkv.weight[hk:], self.w_qkv.bias[hk:])
        k, v = kv.split([hk, self.n_heads * self.d_v], dim=-1)
        return self._split(k, self.d_k), self._split(v, self.d_v)

    def attend(self, q: Tensor, k: Tensor, v: Tensor, mask: Tensor | Causal | None = None, group: int = 1) -> Tensor:
        """Attention per head, heads concatenated and projected by W_O -> (B, T, D).

        With `group` G > 1, k, v and a tensor mask hold one row per G consecutive query rows, (B / G, H, S, d),
        as the beams of a sentence share its source (aiayn.model.cache.KVCache): the G rows' queries attend as one
        row of G * T queries, so the shared keys and values are read once and never copied per beam.
        """
        dropout_p = self.dropout if self.training else 0.0
        batch, heads, length, d_k = q.shape
        if group > 1:
            if mask is CAUSAL or batch != k.size(0) * group:
                raise ValueError(
                    f"grouped attention takes {group} query rows per key row and a padding mask, got "
                    f"{batch} query rows for {k.size(0)} key rows"
                )
            q = q.view(-1, group, heads, length, d_k).transpose(1, 2).reshape(-1, heads, group * length, d_k)
        out = scaled_dot_product_attention(q, k, v, mask, dropout_p)  # (B / G, H, G * T, d_v)
        if self.capture is not None:
            dense = causal_mask(q.size(-2), q.device) if isinstance(mask, Causal) else mask
            weights = attention_weights(q, k, dense).detach()  # (B / G, H, G * T, S)
            self.capture.append(weights.view(-1, heads, group, length, k.size(-2)).transpose(1, 2).flatten(0, 1))
        # -> (B, T, H, d_v): heads next to each other for W_O, each group's rows back in order
        out = out.view(-1, heads, group, length, self.d_v).permute(0, 2, 3, 1, 4)
        return self.w_o(out.reshape(batch, length, heads * self.d_v))  # (B, T, D)

    def forward(
        self, x: Tensor, memory: Tensor | None = None, mask: Tensor | None = None, rotary: Rotary | None = None
    ) -> Tensor:
        """Self-attention over x when memory is None (positions rotated with `rotary`), otherwise x attends to
        memory."""
        if memory is None:
            q, k, v = self.project_qkv(x, rotary)
        else:
            q = self.project_q(x)
            k, v = self.project_kv(memory)
        return self.attend(q, k, v, mask)
