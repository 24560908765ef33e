"""The attention weights a Transformer's forward pass used, recorded per layer (for figures and inspection).

Capturing is off by default: each MultiHeadAttention's `capture` is None and its fused kernel runs alone. Inside
`capture_attention(model)` every attention module also computes its weights explicitly from the same queries, keys
and mask, and appends them, one tensor per call, to the record; the model's outputs are computed exactly as
without it.

Dimensions: B batch, H heads, S source length, T target length.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from torch import Tensor, nn

from aiayn.model.attention import MultiHeadAttention
from aiayn.model.transformer import Transformer


@dataclass
class AttentionRecord:
    """Per layer (first to last), the weights of every call of that attention, in call order: a teacher-forced
    forward pass calls each once; incremental decoding once per step, with only the new positions' rows."""

    encoder: list[list[Tensor]] = field(default_factory=list)  # self-attention, (B, H, S, S) per call
    decoder: list[list[Tensor]] = field(default_factory=list)  # masked self-attention, (B, H, T, T or L + T)
    cross: list[list[Tensor]] = field(default_factory=list)  # encoder-decoder attention, (B, H, T, S)


@contextmanager
def capture_attention(model: Transformer) -> Iterator[AttentionRecord]:
    """Record the attention weights of every forward pass of `model` inside the block; capturing is off again
    (and the modules hold nothing) after it, even when the block raises."""
    record = AttentionRecord([[] for _ in model.encoder], [[] for _ in model.decoder], [[] for _ in model.decoder])
    modules = [
        *((_attention(layer, "self_attn"), calls) for layer, calls in zip(model.encoder, record.encoder)),
        *((_attention(layer, "self_attn"), calls) for layer, calls in zip(model.decoder, record.decoder)),
        *((_attention(layer, "cross_attn"), calls) for layer, calls in zip(model.decoder, record.cross)),
    ]
    for module, calls in modules:
        module.capture = calls
    try:
        yield record
    finally:
        for module, _ in modules:
            module.capture = None


def _attention(layer: nn.Module, name: str) -> MultiHeadAttention:
    module = getattr(layer, name)
    assert isinstance(module, MultiHeadAttention), f"{type(layer).__name__}.{name} is a MultiHeadAttention"
    return module
