"""The decoding Stepper keeps the source once per sentence: beams changing parents never copy it."""

from __future__ import annotations

import torch

from aiayn.decode.step import Stepper

from .conftest import BOS, PAD


def _not_cached():
    raise AssertionError("the encoder-decoder K/V should have been cached on the first step")


def _cross(stepper: Stepper, layer: int):
    return stepper.cache.cross(layer, _not_cached)


def test_beams_changing_parents_leave_the_source_and_its_keys_in_place(tiny_transformer, sources):
    beams = 3
    with torch.inference_mode():
        stepper = Stepper(tiny_transformer, sources, pad_id=PAD, bos_id=BOS, repeats=beams, incremental=True)
        tokens = torch.full((sources.size(0) * beams, 1), BOS)
        first = stepper.log_probs(tokens)
        assert first.shape == (sources.size(0) * beams, 12)
        memory, cross = stepper.memory, [_cross(stepper, layer) for layer in range(2)]
        assert memory.size(0) == cross[0][0].size(0) == sources.size(0)  # one row per sentence, not per beam

        parents = (torch.arange(sources.size(0))[:, None] * beams + torch.tensor([2, 0, 0])).flatten()
        stepper.select(parents, None)
        assert stepper.memory is memory
        assert all(_cross(stepper, layer) is kv for layer, kv in enumerate(cross))  # not even copied

        keep = torch.tensor([4, 1])  # sentences 4 and 1 stay, in that order
        stepper.select((keep[:, None] * beams + torch.arange(beams)).flatten(), keep)
        assert torch.equal(stepper.memory, memory[keep])
        assert torch.equal(_cross(stepper, 1)[0], cross[1][0][keep])
        assert stepper.log_probs(tokens[: 2 * beams]).shape == (2 * beams, 12)
