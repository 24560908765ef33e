"""Models for the decoding tests: a scripted fake with hand-written next-token probabilities, and a tiny Transformer."""

from __future__ import annotations

import math

import pytest
import torch
from torch import Tensor, nn

from aiayn.model.cache import KVCache
from aiayn.model.config import ModelConfig
from aiayn.model.transformer import Transformer

PAD, UNK, BOS, EOS, A, B = 0, 1, 2, 3, 4, 5
VOCAB = 6

Table = dict[int, dict[tuple[int, ...], dict[int, float]]]


class ScriptedModel(nn.Module):
    """Next-token probabilities looked up by (first source token, output prefix without BOS).

    Prefixes missing from the table use `default`. With a cache, the prefix is kept in the cache's
    first-layer self-attention slot, so `KVCache.reorder` moves it with the beams like real keys.
    """

    def __init__(self, table: Table, default: dict[int, float]) -> None:
        super().__init__()
        self.table, self.default = table, default
        self.calls = 0
        self.queried: list[tuple[int, ...]] = []

    def encode(self, src: Tensor, src_mask: Tensor) -> Tensor:
        return src[:, :1].float()[:, :, None]  # (B, 1, 1): the sentence's key

    def decode(
        self, tgt_in: Tensor, memory: Tensor, src_mask: Tensor, tgt_mask: Tensor | None, cache: KVCache | None = None
    ) -> Tensor:
        self.calls += 1
        if cache is not None:
            stored = tgt_in[:, None, :, None].float()  # (B, 1, 1, 1)
            prefix, _ = cache.append_self(0, stored, stored)
            prefixes, n_new = prefix[:, 0, :, 0].long(), 1  # (B, L)
        else:
            prefixes, n_new = tgt_in, tgt_in.size(1)
        logits = torch.full((tgt_in.size(0), n_new, VOCAB), -math.inf)
        for row in range(tgt_in.size(0)):
            key = int(memory[row // (1 if cache is None else cache.group), 0, 0])  # cached: a row per sentence
            for out, end in enumerate(range(prefixes.size(1) - n_new + 1, prefixes.size(1) + 1)):
                prefix = tuple(prefixes[row, 1:end].tolist())
                self.queried.append(prefix)
                for token, prob in self.table.get(key, {}).get(prefix, self.default).items():
                    logits[row, out, token] = math.log(prob)
        return logits


@pytest.fixture
def scripted():
    """Factory for ScriptedModel(table, default)."""
    return ScriptedModel


@pytest.fixture(scope="module")
def tiny_transformer() -> Transformer:
    """A random tiny Transformer in eval mode (12 tokens; ids 0-3 special)."""
    torch.manual_seed(0)
    model = Transformer(
        ModelConfig(
            n_layers=2,
            d_model=32,
            d_ff=64,
            n_heads=4,
            d_k=8,
            d_v=8,
            dropout=0.0,
            pos_encoding="sinusoidal",
            max_positions=128,
        ),
        vocab_size=12,
        pad_id=PAD,
    )
    return model.eval()


@pytest.fixture(scope="module")
def sources() -> Tensor:
    """Five source sentences of different lengths, each ending in EOS, right-padded, (5, 7)."""
    rows = [[4, 5, 6, 7, 8, 9, EOS], [7, 7, EOS], [10, 11, 4, EOS], [5, EOS], [6, 9, 8, 11, 10, EOS]]
    src = torch.full((len(rows), max(map(len, rows))), PAD, dtype=torch.long)
    for i, row in enumerate(rows):
        src[i, : len(row)] = torch.tensor(row)
    return src
