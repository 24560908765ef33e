"""Incremental decoding with a KVCache equals full recomputation; reorder follows the beams."""

from __future__ import annotations

import pytest
import torch

from aiayn.model.cache import KVCache
from aiayn.model.masks import causal_mask, src_mask

PAD = 0


def _encoded(model, src):
    """The source mask and the encoder output of src."""
    mask = src_mask(src, PAD)
    return mask, model.encode(src, mask)


def _full_logits(model, src, tgt_in):
    mask, memory = _encoded(model, src)
    return model.decode(tgt_in, memory, mask, causal_mask(tgt_in.size(1)))


def _incremental_logits(model, src, tgt_in, first: int = 1):
    """Decode the first `first` tokens in one cached call, then one token per call."""
    mask, memory = _encoded(model, src)
    cache = KVCache()
    steps = [model.decode(tgt_in[:, :first], memory, mask, None, cache=cache)]
    assert len(cache) == cache.length == first
    for t in range(first, tgt_in.size(1)):
        steps.append(model.decode(tgt_in[:, t : t + 1], memory, mask, None, cache=cache))
        assert len(cache) == t + 1
    return torch.cat(steps, dim=1)


VARIANTS = [
    dict(pos_encoding="sinusoidal"),
    dict(pos_encoding="learned"),
    dict(pos_encoding="rotary"),
    dict(norm_position="pre"),
    dict(share_embeddings="none"),
    dict(activation="gelu"),
]


@pytest.mark.parametrize("variant", VARIANTS, ids=lambda v: "-".join(map(str, v.values())))
@pytest.mark.parametrize("first", [1, 3])
def test_incremental_equals_full_recomputation(make_model, tokens, variant, first):
    model = make_model(**variant)
    src = tokens(3, 7)
    src[1, 5:] = PAD  # a padded source sentence
    tgt_in = tokens(3, 6, seed=1)
    with torch.no_grad():
        torch.testing.assert_close(
            _incremental_logits(model, src, tgt_in, first), _full_logits(model, src, tgt_in), atol=1e-5, rtol=1e-5
        )


def test_encoder_decoder_keys_are_computed_once(make_model, tokens):
    # After the first step the cache ignores `memory`: garbage memory later must not change anything.
    model = make_model()
    src, tgt_in = tokens(2, 5), tokens(2, 4, seed=1)
    mask, memory = _encoded(model, src)
    cache = KVCache()
    with torch.no_grad():
        model.decode(tgt_in[:, :1], memory, mask, None, cache=cache)
        step = model.decode(tgt_in[:, 1:2], torch.randn_like(memory), mask, None, cache=cache)
        torch.testing.assert_close(step, _full_logits(model, src, tgt_in[:, :2])[:, 1:], atol=1e-5, rtol=1e-5)


def test_reorder_permutes_repeats_and_shrinks_the_batch(make_model, tokens):
    model = make_model()
    src, tgt_in = tokens(3, 6), tokens(3, 5, seed=1)
    mask, memory = _encoded(model, src)
    index = torch.tensor([2, 0, 0, 1])  # permute, repeat sentence 0, 4 rows from 3
    cache = KVCache()
    with torch.no_grad():
        model.decode(tgt_in[:, :3], memory, mask, None, cache=cache)
        cache.reorder(index)
        step = model.decode(tgt_in[index, 3:4], memory[index], mask[index], None, cache=cache)
        expected = _full_logits(model, src[index], tgt_in[index, :4])[:, 3:]
        torch.testing.assert_close(step, expected, atol=1e-5, rtol=1e-5)
        # Without the reorder the same call must differ (so the check above can fail).
        stale = KVCache()
        model.decode(tgt_in[:, :3], memory, mask, None, cache=stale)
        stale.reorder(torch.tensor([0, 1, 2, 0]))
        wrong = model.decode(tgt_in[index, 3:4], memory[index], mask[index], None, cache=stale)
        assert not torch.allclose(wrong, expected, atol=1e-3)


def test_batch_mismatch_without_reorder_is_an_error(make_model, tokens):
    model = make_model()
    src, tgt_in = tokens(2, 5), tokens(2, 3, seed=1)
    mask, memory = _encoded(model, src)
    cache = KVCache()
    model.decode(tgt_in[:, :1], memory, mask, None, cache=cache)
    with pytest.raises(ValueError, match="reorder"):
        model.decode(tgt_in[:1, 1:2], memory[:1], mask[:1], None, cache=cache)


def test_empty_cache_has_length_zero():
    cache = KVCache()
    assert len(cache) == 0
    cache.reorder(torch.tensor([0, 0]))  # nothing cached yet: a no-op
    assert cache.length == 0


def test_outputs_longer_than_the_buffers_grow_through_doubling(make_model, tokens):
    # 40 positions pass the first capacity (16) and its doubling (32): the copies into larger buffers keep
    # every earlier position.
    model = make_model(max_positions=64)
    src, tgt_in = tokens(2, 5), tokens(2, 40, seed=1)
    with torch.no_grad():
        torch.testing.assert_close(
            _incremental_logits(model, src, tgt_in), _full_logits(model, src, tgt_in), atol=1e-5, rtol=1e-5
        )


def _beams_of(model, src, tgt_in, group, parents):
    """Decode with a grouped cache (source once per sentence) and with a plain one (source repeated per row),
    reordering by `parents` (row index per step, None: no reorder) after each step; both step logits."""
    mask, memory = _encoded(model, src)
    grouped, plain = KVCache(group=group), KVCache()
    rows = torch.arange(src.size(0)).repeat_interleave(group)
    out_grouped, out_plain = [], []
    for t in range(tgt_in.size(1)):
        out_grouped.append(model.decode(tgt_in[:, t : t + 1], memory, mask, None, cache=grouped))
        out_plain.append(model.decode(tgt_in[:, t : t + 1], memory[rows], mask[rows], None, cache=plain))
        if parents is not None:
            grouped.reorder(parents)
            plain.reorder(parents)
            rows = rows[parents]
    return torch.cat(out_grouped, dim=1), torch.cat(out_plain, dim=1)


def test_grouped_cache_equals_the_source_repeated_per_beam(make_model, tokens):
    # Three sentences of 2 beams; the beams swap parents within their sentence each step, as beam search does.
    model = make_model()
    src = tokens(3, 6)
    src[2, 4:] = PAD
    tgt_in = tokens(6, 5, seed=1)
    parents = torch.tensor([1, 1, 2, 3, 5, 4])  # beam 0 of sentence 0 follows beam 1, etc.
    with torch.no_grad():
        grouped, plain = _beams_of(model, src, tgt_in, 2, parents)
    torch.testing.assert_close(grouped, plain, atol=1e-5, rtol=1e-5)
    # and the grouped rows really see their own sentence's source: a shuffled source changes them
    with torch.no_grad():
        other, _ = _beams_of(model, src[[1, 2, 0]], tgt_in, 2, parents)
    assert not torch.allclose(other, grouped, atol=1e-3)


def test_grouped_cache_drops_sentences_with_their_beams(make_model, tokens):
    model = make_model()
    src, tgt_in = tokens(3, 6), tokens(6, 4, seed=1)
    mask, memory = _encoded(model, src)
    cache = KVCache(group=2)
    keep = torch.tensor([2, 0])  # sentence 1 stopped; the others swap places
    index = torch.tensor([5, 4, 0, 0])  # their beams, in that order (sentence 0's beam 1 follows beam 0)
    with torch.no_grad():
        model.decode(tgt_in[:, :3], memory, mask, None, cache=cache)
        cache.reorder(index, keep)
        step = model.decode(tgt_in[index, 3:4], memory[keep], mask[keep], None, cache=cache)
        rows = torch.tensor([0, 0, 1, 1, 2, 2])[index]
        expected = _full_logits(model, src[rows], tgt_in[index, :4])[:, 3:]
    torch.testing.assert_close(step, expected, atol=1e-5, rtol=1e-5)


def test_grouped_attention_refuses_a_batch_that_is_not_a_multiple_of_the_group(make_model, tokens):
    model = make_model()
    src, tgt_in = tokens(2, 5), tokens(5, 2, seed=1)  # 5 rows cannot be 2 sentences of 2 beams
    mask = src_mask(src, PAD)
    with pytest.raises(ValueError, match="2 query rows per key row"):
        model.decode(tgt_in[:, :1], model.encode(src, mask), mask, None, cache=KVCache(group=2))
    with pytest.raises(ValueError, match="group must be >= 1"):
        KVCache(group=0)
