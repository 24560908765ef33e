"""The Transformer encoder-decoder (section 3, Figure 1) with shared embeddings and incremental decoding.

Dimensions: B batch, S source length, T target length (new positions when decoding with a cache),
L cached target positions, D = d_model, V vocabulary size.
"""
from __future__ import annotations

from torch import Tensor, nn

from aiayn.model.attention import QKV_INIT_GAIN
from aiayn.model.cache import KVCache
from aiayn.model.embeddings import PositionalEncoding, SharedEmbedding
from aiayn.model.layers import DecoderLayer, EncoderLayer
from aiayn.model.masks import offset_causal_mask, src_mask, tgt_mask


def _check_sizes(**sizes: int) -> None:
    for name, value in sizes.items():
        if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
            raise ValueError(f"Transformer argument {name} must be a positive int, got {value!r}")


class Transformer(nn.Module):
    """Encoder-decoder Transformer, post-LN, one embedding matrix shared three ways (sections 3.1-3.5)."""

    def __init__(
        self,
        vocab_size: int,
        n_layers: int = 6,
        d_model: int = 512,
        d_ff: int = 2048,
        n_heads: int = 8,
        d_k: int = 64,
        d_v: int = 64,
        dropout: float = 0.1,
        pos_encoding: str = "sinusoidal",
        max_positions: int = 1024,
        pad_id: int = 0,
        qkv_init_gain: float = QKV_INIT_GAIN,
    ) -> None:
        super().__init__()
        _check_sizes(
            vocab_size=vocab_size, n_layers=n_layers, d_model=d_model, d_ff=d_ff,
            n_heads=n_heads, d_k=d_k, d_v=d_v, max_positions=max_positions,
        )  # fmt: skip
        if not 0.0 <= dropout < 1.0:
            raise ValueError(f"Transformer argument dropout must be in [0, 1), got {dropout!r}")
        if not 0 <= pad_id < vocab_size:
            raise ValueError(f"Transformer argument pad_id={pad_id} is outside the vocabulary [0, {vocab_size})")
        self.pad_id = pad_id
        self.embedding = SharedEmbedding(vocab_size, d_model)
        self.positions = PositionalEncoding(pos_encoding, d_model, max_positions)
        self.embed_drop = nn.Dropout(dropout)
        if not qkv_init_gain > 0.0:
            raise ValueError(f"Transformer argument qkv_init_gain must be positive, got {qkv_init_gain!r}")
        shape = (d_model, n_heads, d_k, d_v, d_ff, dropout, qkv_init_gain)
        self.encoder = nn.ModuleList(EncoderLayer(*shape) for _ in range(n_layers))
        self.decoder = nn.ModuleList(DecoderLayer(*shape) for _ in range(n_layers))

    def _embed(self, tokens: Tensor, offset: int = 0) -> Tensor:
        """Scaled token embeddings plus positions, then dropout on the sum (section 5.4), (B, L, D)."""
        if tokens.dim() != 2:
            raise ValueError(f"token ids must be (B, L), got shape {tuple(tokens.shape)}")
        x = self.embedding(tokens)
        pos = self.positions(tokens.size(1), offset)
        return self.embed_drop(x if pos is None else x + pos)

    def encode(self, src: Tensor, src_mask: Tensor | None) -> Tensor:
        """src (B, S) long, src_mask (B, 1, 1, S) bool -> memory (B, S, D)."""
        x = self._embed(src)
        for layer in self.encoder:
            x = layer(x, src_mask)
        return x

    def decode(
        self,
        tgt_in: Tensor,
        memory: Tensor,
        src_mask: Tensor | None,
        tgt_mask: Tensor | None,
        cache: KVCache | None = None,
    ) -> Tensor:
        """Logits (B, T, V) for tgt_in (B, T). With a cache, tgt_in holds only the new tokens.

        With a cache and tgt_mask None, the new tokens attend to every cached position and causally
        among themselves; a given tgt_mask must then be (B or 1, 1, T, L + T).
        """
        offset = 0 if cache is None else cache.length
        x = self._embed(tgt_in, offset)
        if cache is not None and tgt_mask is None and tgt_in.size(1) > 1:
            tgt_mask = offset_causal_mask(tgt_in.size(1), offset, tgt_in.device)  # (1, 1, T, L + T)
        for index, layer in enumerate(self.decoder):
            x = layer(x, memory, src_mask, tgt_mask, cache, index)
        return self.embedding.project(x)  # (B, T, V)

    def forward(self, src: Tensor, tgt_in: Tensor) -> Tensor:
        """Teacher-forced logits (B, T, V) for src (B, S) and tgt_in (B, T), masks built from pad_id."""
        s_mask = src_mask(src, self.pad_id)
        memory = self.encode(src, s_mask)
        return self.decode(tgt_in, memory, s_mask, tgt_mask(tgt_in, self.pad_id))

    def num_parameters(self) -> int:
        """Trainable parameters, the shared embedding counted once."""
        return sum(p.numel() for p in self.parameters() if p.requires_grad)
