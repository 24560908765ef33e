"""Position-wise feed-forward network (Eq. 2, section 3.3) and the encoder/decoder layers (section 3.1).

Dimensions: B batch, S source length, T target length (new positions when decoding with a cache),
D = d_model, F = d_ff. Post-LN: LayerNorm(x + Dropout(Sublayer(x))) (sections 3.1 and 5.4).
"""
from __future__ import annotations

from torch import Tensor, nn

from aiayn.model.attention import MultiHeadAttention
from aiayn.model.cache import KVCache


class FeedForward(nn.Module):
    """FFN(x) = max(0, x W1 + b1) W2 + b2 (Eq. 2), applied to each position separately."""

    def __init__(self, d_model: int, d_ff: int) -> None:
        super().__init__()
        self.w_1 = nn.Linear(d_model, d_ff)
        self.w_2 = nn.Linear(d_ff, d_model)
        # Departure: see docs/departures.md#initialisation
        for linear in (self.w_1, self.w_2):
            nn.init.xavier_uniform_(linear.weight)
            nn.init.zeros_(linear.bias)

    def forward(self, x: Tensor) -> Tensor:
        return self.w_2(self.w_1(x).relu_())  # (B, L, D)


class EncoderLayer(nn.Module):
    """Self-attention then feed-forward, each wrapped in residual dropout, add and LayerNorm (section 3.1)."""

    def __init__(self, d_model: int, n_heads: int, d_k: int, d_v: int, d_ff: int, dropout: float,
                 qkv_init_gain: float) -> None:
        super().__init__()
        # The paper puts no dropout on attention weights (section 5.4 names only residual and embedding dropout).
        self.self_attn = MultiHeadAttention(d_model, n_heads, d_k, d_v, dropout=0.0, qkv_init_gain=qkv_init_gain)
        self.ffn = FeedForward(d_model, d_ff)
        self.norm_1, self.norm_2 = nn.LayerNorm(d_model), nn.LayerNorm(d_model)
        self.drop = nn.Dropout(dropout)

    def forward(self, x: Tensor, src_mask: Tensor | None) -> Tensor:
        """x (B, S, D), src_mask (B, 1, 1, S) -> (B, S, D)."""
        x = self.norm_1(x + self.drop(self.self_attn(x, mask=src_mask)))
        return self.norm_2(x + self.drop(self.ffn(x)))


class DecoderLayer(nn.Module):
    """Masked self-attention, encoder-decoder attention, feed-forward, each with add and norm (section 3.1)."""

    def __init__(self, d_model: int, n_heads: int, d_k: int, d_v: int, d_ff: int, dropout: float,
                 qkv_init_gain: float) -> None:
        super().__init__()
        self.self_attn = MultiHeadAttention(d_model, n_heads, d_k, d_v, dropout=0.0, qkv_init_gain=qkv_init_gain)
        self.cross_attn = MultiHeadAttention(d_model, n_heads, d_k, d_v, dropout=0.0, qkv_init_gain=qkv_init_gain)
        self.ffn = FeedForward(d_model, d_ff)
        self.norm_1, self.norm_2, self.norm_3 = (nn.LayerNorm(d_model) for _ in range(3))
        self.drop = nn.Dropout(dropout)

    def forward(
        self,
        x: Tensor,
        memory: Tensor,
        src_mask: Tensor | None,
        tgt_mask: Tensor | None,
        cache: KVCache | None = None,
        layer: int = 0,
    ) -> Tensor:
        """x (B, T, D), memory (B, S, D) -> (B, T, D); with a cache, x holds only the new positions."""
        q, k, v = self.self_attn.project_qkv(x)
        if cache is not None:
            k, v = cache.append_self(layer, k, v)  # (B, H, L + T, d_k), (B, H, L + T, d_v)
        x = self.norm_1(x + self.drop(self.self_attn.attend(q, k, v, tgt_mask)))

        q = self.cross_attn.project_q(x)
        if cache is None:
            k, v = self.cross_attn.project_kv(memory)
        else:
            k, v = cache.cross(layer, lambda: self.cross_attn.project_kv(memory))
        x = self.norm_2(x + self.drop(self.cross_attn.attend(q, k, v, src_mask)))
        return self.norm_3(x + self.drop(self.ffn(x)))
