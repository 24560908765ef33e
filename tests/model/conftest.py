"""A tiny Transformer factory for the model tests (eval mode, dropout 0 unless asked)."""

from __future__ import annotations

import pytest
import torch

from aiayn.model.config import ModelConfig
from aiayn.model.transformer import Transformer

VOCAB, PAD = 23, 0


@pytest.fixture
def make_model():
    def make(seed: int = 0, **overrides) -> Transformer:
        torch.manual_seed(seed)
        shape = dict(n_layers=2, d_model=32, d_ff=64, n_heads=4, d_k=8, d_v=6, dropout=0.0)
        return Transformer(ModelConfig(**(shape | overrides)), VOCAB, PAD).eval()

    return make


@pytest.fixture
def tokens():
    """Random non-pad token ids (B, L) from a fixed generator."""

    def draw(batch: int, length: int, seed: int = 0) -> torch.Tensor:
        return torch.randint(1, VOCAB, (batch, length), generator=torch.Generator().manual_seed(seed))

    return draw
