"""The searches read the device only when they compact the batch and at the end, not on every step."""

from __future__ import annotations

import pytest
import torch
from tests.host_reads import HostReads

from aiayn.decode.beam import beam_search
from aiayn.decode.greedy import greedy_search
from aiayn.decode.search import default_compact_every

from .test_beam import TABLE, _src

SPECIAL = dict(bos_id=2, eos_id=3, pad_id=0)
BEAM = dict(beam_size=4, alpha=0.6)


def test_the_counter_sees_reads_and_not_device_side_selections():
    x = torch.tensor([1.0, -2.0, 3.0])
    with HostReads() as reads:
        torch.where(x > 0, x, 0.0).masked_fill_(x < 0, 1.0).sum()
    assert reads.count == 0
    with HostReads() as reads:
        x[x > 0], x.sum().item(), bool(x[0] > 0), x.nonzero(), x.tolist()
    assert reads.names == ["__getitem__", "item", "__bool__", "nonzero", "tolist"]


def _reads(search, model, src, **kwargs) -> int:
    with torch.inference_mode(), HostReads() as reads:
        search(model, src, **kwargs, **SPECIAL)
    return reads.count


@pytest.mark.parametrize("search, kwargs", [(beam_search, BEAM), (greedy_search, {})])
def test_without_compaction_the_reads_do_not_grow_with_the_output_length(tiny_transformer, sources, search, kwargs):
    # One read of the batch's longest limit, then only the results (beam: 4 tensors, greedy: 2).
    short = _reads(search, tiny_transformer, sources, max_len_b=2, compact_every=1000, **kwargs)
    long = _reads(search, tiny_transformer, sources, max_len_b=40, compact_every=1000, **kwargs)
    assert short == long == (5 if search is beam_search else 3)
    # Compacting every step reads once a step: the old per-step cost, now the CPU default.
    every_step = _reads(search, tiny_transformer, sources, max_len_b=40, compact_every=1, **kwargs)
    every_8 = _reads(search, tiny_transformer, sources, max_len_b=40, compact_every=8, **kwargs)
    assert every_step > every_8 > long
    assert every_step - long >= 8 * (every_8 - long) - 8


@torch.inference_mode()
@pytest.mark.parametrize("compact_every", [2, 3, 1000])
def test_hypotheses_do_not_depend_on_how_often_the_batch_is_compacted(tiny_transformer, sources, compact_every):
    every_step = beam_search(tiny_transformer, sources, **BEAM, max_len_b=6, **SPECIAL)
    rarely = beam_search(tiny_transformer, sources, **BEAM, max_len_b=6, compact_every=compact_every, **SPECIAL)
    assert [[h.tokens for h in hyps] for hyps in rarely] == [[h.tokens for h in hyps] for hyps in every_step]
    for got, ref in zip(rarely, every_step):  # rows of other sentences in the batch change the kernels' sums only
        assert [h.score for h in got] == pytest.approx([h.score for h in ref], abs=1e-5)
    assert len({len(h.tokens) for hyps in every_step for h in hyps}) > 1  # sentences stopped at different steps
    greedy = greedy_search(tiny_transformer, sources, max_len_b=6, **SPECIAL)
    assert greedy_search(tiny_transformer, sources, max_len_b=6, compact_every=compact_every, **SPECIAL) == greedy


@torch.inference_mode()
def test_a_stopped_sentence_left_in_the_batch_keeps_its_pool_exactly(scripted):
    # The scripted sentence settles after 4 steps; the other (key 11, EOS unlikely) runs to its limit of 22.
    # Without compaction the settled one is decoded on, and nothing it produces may enter its pool. The scripted
    # model scores each row alone, so the two searches must agree to the last bit.
    src = _src([10, 3], [11, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 3])
    table = {**TABLE, 11: {(): {4: 0.9, 5: 0.1}}}
    default = {3: 0.01, 4: 0.59, 5: 0.4}
    kwargs = dict(beam_size=2, alpha=0.6, max_len_b=10, **SPECIAL)
    every_step = beam_search(scripted(table, default), src, **kwargs)
    never = beam_search(scripted(table, default), src, compact_every=1000, **kwargs)
    assert never == every_step
    assert [h.tokens for h in every_step[0]] == [[5, 5], [4]]


def test_compaction_defaults_by_device_and_rejects_bad_values(tiny_transformer, sources):
    assert default_compact_every("cpu") == 1
    assert default_compact_every(torch.device("cuda", 0)) == 8
    for search, kwargs in ((beam_search, BEAM), (greedy_search, {})):
        with pytest.raises(ValueError, match="compact_every must be >= 1"):
            search(tiny_transformer, sources, max_len_b=2, compact_every=0, **kwargs, **SPECIAL)
