"""Decoding on a CUDA device gives what it gives on the CPU (skipped without a GPU)."""

from __future__ import annotations

import copy

import pytest
import torch

from aiayn.decode.beam import beam_search
from aiayn.decode.greedy import greedy_search
from aiayn.decode.search import translate

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")]
SPECIAL = dict(bos_id=2, eos_id=3, pad_id=0)


class DigitTokenizer:
    pad_id, unk_id, bos_id, eos_id, vocab_size = 0, 1, 2, 3, 12

    def encode(self, lines):
        return [[4 + int(ch) for ch in line] for line in lines]

    def decode(self, ids):
        return ["".join(str(i - 4) for i in seq) for seq in ids]


@pytest.fixture(scope="module")
def gpu_model(tiny_transformer):
    return copy.deepcopy(tiny_transformer).cuda()


@torch.inference_mode()
@pytest.mark.parametrize("incremental", [True, False])
def test_beam_search_on_gpu_matches_cpu(tiny_transformer, gpu_model, sources, incremental):
    cpu = beam_search(tiny_transformer, sources, beam_size=4, alpha=0.6, max_len_b=6, **SPECIAL)
    gpu = beam_search(
        gpu_model, sources.cuda(), beam_size=4, alpha=0.6, max_len_b=6, incremental=incremental, **SPECIAL
    )
    assert [[h.tokens for h in hyps] for hyps in gpu] == [[h.tokens for h in hyps] for hyps in cpu]
    for got, ref in zip(gpu, cpu):
        assert [h.score for h in got] == pytest.approx([h.score for h in ref], abs=1e-4)


@torch.inference_mode()
def test_greedy_and_translate_on_gpu_match_cpu(tiny_transformer, gpu_model, sources):
    cpu = greedy_search(tiny_transformer, sources, max_len_b=6, **SPECIAL)
    assert greedy_search(gpu_model, sources.cuda(), max_len_b=6, **SPECIAL) == cpu
    lines = ["0123", "7", "4567123", "55"]
    kwargs = dict(beam_size=4, alpha=0.6, max_len_b=5, batch_tokens=8)
    on_cpu = translate(tiny_transformer, DigitTokenizer(), lines, **kwargs)
    assert translate(gpu_model, DigitTokenizer(), lines, device="cuda", **kwargs) == on_cpu


@torch.inference_mode()
def test_beam_search_under_bf16_autocast_runs_in_bf16_and_mostly_agrees(gpu_model, sources, monkeypatch):
    from aiayn.decode.search import autocast
    from aiayn.model.cache import KVCache

    seen = []
    append = KVCache.append_self

    def spy(self, layer, k, v):  # the cached keys are what the decoder computed: bf16 under autocast
        seen.append(k.dtype)
        return append(self, layer, k, v)

    fp32 = beam_search(gpu_model, sources.cuda(), beam_size=4, alpha=0.6, max_len_b=6, **SPECIAL)
    monkeypatch.setattr(KVCache, "append_self", spy)
    with autocast("bf16-mixed", "cuda"):
        bf16 = beam_search(gpu_model, sources.cuda(), beam_size=4, alpha=0.6, max_len_b=6, **SPECIAL)
    assert seen and set(seen) == {torch.bfloat16}
    same = sum(a[0].tokens == b[0].tokens for a, b in zip(bf16, fp32))
    assert same >= len(fp32) - 1, (same, len(fp32))
