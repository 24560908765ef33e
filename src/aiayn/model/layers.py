"""Position-wise feed-forward network (Eq. 2, section 3.3), the residual connection around every sub-layer, and the
encoder/decoder layers (section 3.1). Each block takes the model's config.

Dimensions: B batch, S source length, T target length (new positions when decoding with a cache),
D = d_model, F = d_ff.
"""

from __future__ import annotations

from collections.abc import Callable

import torch.nn.functional as F
from torch import Tensor, nn

from aiayn.model.attention import MultiHeadAttention, Rotary
from aiayn.model.cache import KVCache
from aiayn.model.config import ModelConfig
from aiayn.model.masks import Causal


class FeedForward(nn.Module):
    """FFN(x) = max(0, x W1 + b1) W2 + b2 (Eq. 2), applied to each position separately; GELU instead of max(0, .)
    with model.activation=gelu."""

    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        self.w_1 = nn.Linear(cfg.d_model, cfg.d_ff)
        self.w_2 = nn.Linear(cfg.d_ff, cfg.d_model)
        self.gelu = cfg.activation == "gelu"
        # Departure: see docs/departures.md#initialisation
        for linear in (self.w_1, self.w_2):
            nn.init.xavier_uniform_(linear.weight)
            nn.init.zeros_(linear.bias)

    def forward(self, x: Tensor) -> Tensor:
        hidden = self.w_1(x)  # (B, L, F)
        return self.w_2(F.gelu(hidden) if self.gelu else hidden.relu_())  # (B, L, D)


class Residual(nn.Module):
    """The connection around each sub-layer (section 3.1), with residual dropout (section 5.4):
    post-LN (the paper) LayerNorm(x + Dropout(Sublayer(x))), or pre-LN x + Dropout(Sublayer(LayerNorm(x)))."""

    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(cfg.d_model)
        self.drop = nn.Dropout(cfg.dropout)
        self.pre_norm = cfg.norm_position == "pre"

    def forward(self, x: Tensor, sublayer: Callable[[Tensor], Tensor]) -> Tensor:
        if self.pre_norm:
            return x + self.drop(sublayer(self.norm(x)))
        return self.norm(x + self.drop(sublayer(x)))


def _attention(cfg: ModelConfig) -> MultiHeadAttention:
    return MultiHeadAttention(
        cfg.d_model, cfg.n_heads, cfg.d_k, cfg.d_v, dropout=cfg.attention_dropout, qkv_init_gain=cfg.qkv_init_gain
    )


class EncoderLayer(nn.Module):
    """Self-attention then feed-forward, each inside a residual connection (section 3.1)."""

    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        self.self_attn = _attention(cfg)
        self.ffn = FeedForward(cfg)
        self.res_attn, self.res_ffn = Residual(cfg), Residual(cfg)

    def forward(self, x: Tensor, src_mask: Tensor | None, rotary: Rotary | None = None) -> Tensor:
        """x (B, S, D), src_mask (B, 1, 1, S) -> (B, S, D)."""
        x = self.res_attn(x, lambda h: self.self_attn(h, mask=src_mask, rotary=rotary))
        return self.res_ffn(x, self.ffn)


class DecoderLayer(nn.Module):
    """Masked self-attention, encoder-decoder attention, feed-forward, each inside a residual connection
    (section 3.1)."""

    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        self.self_attn = _attention(cfg)
        self.cross_attn = _attention(cfg)
        self.ffn = FeedForward(cfg)
        self.res_self, self.res_cross, self.res_ffn = Residual(cfg), Residual(cfg), Residual(cfg)

    def forward(
        self,
        x: Tensor,
        memory: Tensor,
        src_mask: Tensor | None,
        tgt_mask: Tensor | Causal | None,
        cache: KVCache | None = None,
        layer: int = 0,
        rotary: Rotary | None = None,
    ) -> Tensor:
        """x (B, T, D), memory (B, S, D) -> (B, T, D); with a cache, x holds only the new positions (and `rotary`
        their positions' angles), and memory and src_mask one row per sentence (B / cache.group)."""

        def self_attention(h: Tensor) -> Tensor:
            q, k, v = self.self_attn.project_qkv(h, rotary)
            if cache is not None:
                k, v = cache.append_self(layer, k, v)  # (B, H, L + T, d_k), (B, H, L + T, d_v)
            return self.self_attn.attend(q, k, v, tgt_mask)

        def cross_attention(h: Tensor) -> Tensor:
            # Rotary positions act in self-attention only: source and target positions share no frame.
            q = self.cross_attn.project_q(h)
            if cache is None:
                return self.cross_attn.attend(q, *self.cross_attn.project_kv(memory), src_mask)
            k, v = cache.cross(layer, lambda: self.cross_attn.project_kv(memory))  # one row per sentence
            return self.cross_attn.attend(q, k, v, src_mask, group=cache.group)

        x = self.res_self(x, self_attention)
        x = self.res_cross(x, cross_attention)
        return self.res_ffn(x, self.ffn)
