"""The Transformer of Vaswani et al. 2017 in plain PyTorch: attention, layers, embeddings, masks, cache."""

from aiayn.config.schema import ModelConfig
from aiayn.model.attention import MultiHeadAttention, scaled_dot_product_attention
from aiayn.model.cache import KVCache
from aiayn.model.masks import causal_mask, src_mask, tgt_mask
from aiayn.model.transformer import Transformer

__all__ = [
    "KVCache",
    "ModelConfig",
    "MultiHeadAttention",
    "Transformer",
    "causal_mask",
    "scaled_dot_product_attention",
    "src_mask",
    "tgt_mask",
]
