"""Per-subword perplexity: exp(total NLL / target tokens), padding ignored."""

from __future__ import annotations

import math

import pytest
import torch
from torch import nn

from aiayn.eval.perplexity import dev_perplexity

PAD = 0


class FixedLogits(nn.Module):
    """Returns the same logits vector at every target position, whatever the input."""

    def __init__(self, logits: torch.Tensor) -> None:
        super().__init__()
        self.logits = nn.Parameter(logits)

    def forward(self, src, tgt_in):
        return self.logits.expand(*tgt_in.shape, -1)  # (B, T, V)


def _batch(tgt_out: list[list[int]]) -> dict[str, torch.Tensor]:
    tgt_out = torch.tensor(tgt_out)
    return {"src": torch.ones_like(tgt_out), "tgt_in": torch.ones_like(tgt_out), "tgt_out": tgt_out}


def test_uniform_model_has_perplexity_equal_to_the_vocabulary_size():
    vocab = 37
    model = FixedLogits(torch.zeros(vocab))
    batches = [_batch([[5, 6, 7, PAD], [8, 9, PAD, PAD]]), _batch([[3, 3, 3, 3]])]
    assert dev_perplexity(model, batches, pad_id=PAD) == pytest.approx(vocab)


def test_padding_is_not_counted():
    # Token 4 has probability 1/2, every other token 1/14: targets 4 give PPL 2 however much padding follows.
    logits = torch.full((8,), math.log(1 / 14))
    logits[4] = math.log(1 / 2)
    model = FixedLogits(logits)
    assert dev_perplexity(model, [_batch([[4, 4, PAD, PAD, PAD]]), _batch([[4]])], pad_id=PAD) == pytest.approx(2)
    assert dev_perplexity(model, [_batch([[4, 5]])], pad_id=PAD) == pytest.approx(math.sqrt(2 * 14))


def test_mode_is_restored_and_empty_input_rejected():
    model = FixedLogits(torch.zeros(5)).train()
    dev_perplexity(model, [_batch([[1, 2]])], pad_id=PAD)
    assert model.training
    with pytest.raises(ValueError, match="no target tokens"):
        dev_perplexity(model, [_batch([[PAD, PAD]])], pad_id=PAD)
    with pytest.raises(KeyError, match="batch 0 lacks \\['tgt_out'\\]"):
        dev_perplexity(model, [{"src": torch.ones(1, 2), "tgt_in": torch.ones(1, 2)}], pad_id=PAD)
