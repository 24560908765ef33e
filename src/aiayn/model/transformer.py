"""The Transformer encoder-decoder (section 3, Figure 1) with shared embeddings and incremental decoding.

Built from a `ModelConfig` (aiayn.model.config), whose defaults are the paper's base model; its switches
(norm_position, share_embeddings, activation, attention_dropout, pos_encoding) are the variants later work ablates.

Dimensions: B batch, S source length, T target length (new positions when decoding with a cache),
L cached target positions, D = d_model, V vocabulary size.
"""

from __future__ import annotations

from torch import Tensor, nn

from aiayn.model.cache import KVCache
from aiayn.model.config import ModelConfig, check
from aiayn.model.embeddings import PositionalEncoding, TokenEmbedding
from aiayn.model.layers import DecoderLayer, EncoderLayer
from aiayn.model.masks import CAUSAL, Causal, offset_causal_mask, src_mask


class Transformer(nn.Module):
    """Encoder-decoder Transformer; by default post-LN with one embedding matrix shared three ways (sections
    3.1-3.5)."""

    def __init__(self, cfg: ModelConfig, vocab_size: int, pad_id: int = 0) -> None:
        super().__init__()
        check(cfg, vocab_size, pad_id, where="Transformer argument ")
        self.cfg, self.pad_id = cfg, pad_id
        # The target embedding; also the pre-softmax projection unless share_embeddings is "none" (section 3.4).
        self.embedding = TokenEmbedding(vocab_size, cfg.d_model)
        self.positions = PositionalEncoding(cfg.pos_encoding, cfg.d_model, cfg.max_positions, cfg.d_k)
        self.embed_drop = nn.Dropout(cfg.dropout)
        self.encoder = nn.ModuleList(EncoderLayer(cfg) for _ in range(cfg.n_layers))
        self.decoder = nn.ModuleList(DecoderLayer(cfg) for _ in range(cfg.n_layers))
        # Pre-LN leaves each stack's output unnormalised: a final LayerNorm per stack (Wang et al. 2019).
        pre = cfg.norm_position == "pre"
        self.encoder_norm = nn.LayerNorm(cfg.d_model) if pre else None
        self.decoder_norm = nn.LayerNorm(cfg.d_model) if pre else None
        self.src_embedding = TokenEmbedding(vocab_size, cfg.d_model) if cfg.share_embeddings != "all" else None
        self.output = TokenEmbedding(vocab_size, cfg.d_model) if cfg.share_embeddings == "none" else None

    def _embed(self, embedding: TokenEmbedding, tokens: Tensor, offset: int = 0) -> Tensor:
        """Scaled token embeddings plus positions, then dropout on the sum (section 5.4), (B, L, D)."""
        if tokens.dim() != 2:
            raise ValueError(f"token ids must be (B, L), got shape {tuple(tokens.shape)}")
        x = embedding(tokens)
        pos = self.positions(tokens.size(1), offset)
        return self.embed_drop(x if pos is None else x + pos)

    def encode(self, src: Tensor, src_mask: Tensor | None) -> Tensor:
        """src (B, S) long, src_mask (B, 1, 1, S) bool -> memory (B, S, D)."""
        x = self._embed(self.embedding if self.src_embedding is None else self.src_embedding, src)
        rotary = self.positions.rotary(src.size(1))
        for layer in self.encoder:
            x = layer(x, src_mask, rotary)
        return x if self.encoder_norm is None else self.encoder_norm(x)

    def decode(
        self,
        tgt_in: Tensor,
        memory: Tensor,
        src_mask: Tensor | None,
        tgt_mask: Tensor | Causal | None,
        cache: KVCache | None = None,
    ) -> Tensor:
        """Logits (B, T, V) for tgt_in (B, T). With a cache, tgt_in holds only the new tokens.

        With a cache and tgt_mask None, the new tokens attend to every cached position and causally
        among themselves; a given tgt_mask must then be (B or 1, 1, T, L + T).
        """
        return self.output_embedding.project(self.decoder_states(tgt_in, memory, src_mask, tgt_mask, cache))

    def decoder_states(
        self,
        tgt_in: Tensor,
        memory: Tensor,
        src_mask: Tensor | None,
        tgt_mask: Tensor | Causal | None,
        cache: KVCache | None = None,
    ) -> Tensor:
        """The decoder's output (B, T, D) before the pre-softmax projection; `decode` without its last step."""
        offset = 0 if cache is None else cache.length
        x = self._embed(self.embedding, tgt_in, offset)
        rotary = self.positions.rotary(tgt_in.size(1), offset)
        if cache is not None and (tgt_mask is None or tgt_mask is CAUSAL):  # keys: L cached + T new positions
            tgt_mask = offset_causal_mask(tgt_in.size(1), offset, tgt_in.device) if tgt_in.size(1) > 1 else None
        for index, layer in enumerate(self.decoder):
            x = layer(x, memory, src_mask, tgt_mask, cache, index, rotary)
        return x if self.decoder_norm is None else self.decoder_norm(x)

    @property
    def output_embedding(self) -> TokenEmbedding:
        """The pre-softmax linear transformation (section 3.4): the shared embedding unless untied."""
        return self.embedding if self.output is None else self.output

    @property
    def output_weight(self) -> Tensor:
        """Its weight (V, D), for losses that apply it themselves (aiayn.train.chunked_loss)."""
        return self.output_embedding.weight

    def forward(self, src: Tensor, tgt_in: Tensor) -> Tensor:
        """Teacher-forced logits (B, T, V) for src (B, S) and tgt_in (B, T), masks built from pad_id."""
        return self.output_embedding.project(self.features(src, tgt_in))

    def features(self, src: Tensor, tgt_in: Tensor) -> Tensor:
        """Teacher-forced decoder states (B, T, D), before the output projection (for the chunked loss)."""
        s_mask = src_mask(src, self.pad_id)
        memory = self.encode(src, s_mask)
        return self.decoder_states(tgt_in, memory, s_mask, CAUSAL)  # right-padded targets: see masks.Causal

    def num_parameters(self) -> int:
        """Trainable parameters, a shared embedding counted once."""
        return sum(p.numel() for p in self.parameters() if p.requires_grad)
