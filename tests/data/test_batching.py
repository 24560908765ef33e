"""Token-count batching: coverage, budget, determinism, epochs, resume, DDP sharding, padding (section 5.1)."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from aiayn.data import synthetic
from aiayn.data.batching import TokenBatchSampler, padding_fraction


def _lens(n=3000, seed=0):
    rng = np.random.default_rng(seed)
    src = rng.integers(2, 60, n)
    return src, np.clip(src + rng.integers(-5, 6, n), 1, None)


def test_every_example_once_and_budget_respected():
    src, tgt = _lens()
    src[7], tgt[7] = 900, 10  # over-long example: a batch of its own
    sampler = TokenBatchSampler(src, tgt, max_tokens=500, seed=1)
    batches = list(sampler)
    assert sorted(i for b in batches for i in b) == list(range(len(src)))
    assert len(batches) == len(sampler)
    for b in batches:
        padded = len(b) * max(src[b].max(), tgt[b].max())
        assert padded <= 500 or b == [7]
    assert [7] in batches


def test_deterministic_epochs_differ_and_auto_advance():
    src, tgt = _lens()
    a, b = TokenBatchSampler(src, tgt, 800, seed=3), TokenBatchSampler(src, tgt, 800, seed=3)
    epoch0, epoch0_again = list(a), list(b)
    assert epoch0 == epoch0_again
    epoch1 = list(a)  # a second pass is the next epoch
    assert a.epoch == 1 and epoch1 != epoch0
    b.set_epoch(1)
    assert list(b) == epoch1
    assert list(TokenBatchSampler(src, tgt, 800, seed=4)) != epoch0


def test_resume_gives_the_same_remaining_batches():
    src, tgt = _lens()
    full = TokenBatchSampler(src, tgt, 600, seed=2)
    full.set_epoch(3)
    expected = list(full)
    run = TokenBatchSampler(src, tgt, 600, seed=2)
    run.set_epoch(3)
    it = iter(run)
    seen = [next(it) for _ in range(10)]
    state = run.state_dict()
    resumed = TokenBatchSampler(src, tgt, 600, seed=2)
    resumed.load_state_dict(state)
    resumed.set_epoch(3)  # what a trainer does at epoch start must not lose the position
    assert seen + list(resumed) == expected
    assert list(resumed) == list(full)  # and the following epoch matches too
    with pytest.raises(ValueError, match="seed"):
        TokenBatchSampler(src, tgt, 600, seed=9).load_state_dict(state)


@pytest.mark.parametrize("drop_last", [False, True])
def test_ddp_shards_are_equal_sized_and_cover(drop_last):
    src, tgt = _lens(1000)
    whole = TokenBatchSampler(src, tgt, 700, seed=5)
    all_batches = [tuple(b) for b in whole]
    shards = [
        list(TokenBatchSampler(src, tgt, 700, seed=5, num_replicas=3, rank=r, drop_last=drop_last)) for r in range(3)
    ]
    assert len({len(s) for s in shards}) == 1
    served = {tuple(b) for s in shards for b in s}
    if drop_last:
        assert len(served) == len(all_batches) // 3 * 3
    else:
        assert served == set(all_batches)
    per_rank = len(all_batches) // 3 if drop_last else -(-len(all_batches) // 3)
    assert [len(s) for s in shards] == [per_rank] * 3


def _realistic_lengths(shared_root):
    """Subword-like lengths: the WMT sample's joint length distribution when present, else synthetic."""
    if shared_root is not None:
        d = shared_root / "data" / "wmt14_sample"
        src = [len(line.split()) + 1 for line in (d / "train.en").read_text(encoding="utf-8").splitlines()]
        tgt = [len(line.split()) + 1 for line in (d / "train.de").read_text(encoding="utf-8").splitlines()]
    else:
        pairs = synthetic.generate(5000, seed=0)
        src, tgt = [len(p[0].split()) + 1 for p in pairs], [len(p[1].split()) + 1 for p in pairs]
    # Resample the joint distribution to a corpus of realistic size: bucketing quality depends on corpus size.
    idx = np.random.default_rng(0).integers(0, len(src), 200_000)
    return np.asarray(src)[idx], np.asarray(tgt)[idx]


def test_padding_fraction_is_small_on_realistic_lengths(request):
    try:
        shared_root = request.getfixturevalue("shared_dir")
    except pytest.skip.Exception:
        shared_root = None
    src, tgt = _realistic_lengths(shared_root)
    batches = list(TokenBatchSampler(src, tgt, 4096, seed=0))
    assert padding_fraction(batches, src, tgt) < 0.05
    # Without length sorting (random batches of the same size) padding is far larger: the measure can fail.
    order = np.random.default_rng(1).permutation(len(src))
    random_batches = np.array_split(order, len(batches))
    assert padding_fraction(random_batches, src, tgt) > 0.3


def test_padding_fraction_exact_value():
    assert padding_fraction([[0, 1]], np.array([2, 4]), np.array([3, 3])) == pytest.approx(1 - 12 / 14)


def test_a_length_bucket_rounds_lengths_up_and_gives_few_shapes():
    src, tgt = _lens(n=20_000)
    plain = list(TokenBatchSampler(src, tgt, 1000, seed=3))
    bucketed = TokenBatchSampler(src, tgt, 1000, seed=3, bucket=8)
    batches = list(bucketed)
    assert sorted(i for b in batches for i in b) == list(range(len(src)))
    shapes = set()
    for b in batches:
        width_s, width_t = (int(-(-lens[b].max() // 8) * 8) for lens in (src, tgt))
        assert len(b) * max(width_s, width_t) <= 1000  # the budget counts the padded shapes
        shapes.add((len(b), width_s, width_t))
    plain_shapes = {(len(b), int(src[b].max()), int(tgt[b].max())) for b in plain}
    assert len(shapes) * 5 < len(plain_shapes)
    # the price: more padding
    assert padding_fraction(batches, src, tgt, bucket=8) > padding_fraction(plain, src, tgt)


def test_bucket_zero_and_one_leave_batching_as_it_was():
    src, tgt = _lens()
    plain = list(TokenBatchSampler(src, tgt, 500, seed=1))
    assert list(TokenBatchSampler(src, tgt, 500, seed=1, bucket=0)) == plain
    assert list(TokenBatchSampler(src, tgt, 500, seed=1, bucket=1)) == plain
    with pytest.raises(ValueError, match="length bucket"):
        TokenBatchSampler(src, tgt, 500, bucket=-8)


def test_padding_fraction_counts_the_bucketed_widths():
    # widths 4 -> 8 and 3 -> 8: 2 sentences x 16 positions, 12 real
    assert padding_fraction([[0, 1]], np.array([2, 4]), np.array([3, 3]), bucket=8) == pytest.approx(1 - 12 / 32)


def test_source_order_groups_by_source_length_as_fairseq_and_keeps_the_budget():
    """order="source" sorts by (source, target) length: a batch's source lengths are nearly equal and its target
    lengths vary; "longer" makes target lengths nearly equal. Both cover every example once within the budget."""
    src, tgt = _lens(n=4000, seed=5)
    spread = {}
    for order in ("longer", "source"):
        batches = list(TokenBatchSampler(src, tgt, max_tokens=600, seed=1, order=order))
        assert sorted(i for b in batches for i in b) == list(range(len(src)))
        assert all(len(b) * max(src[b].max(), tgt[b].max()) <= 600 for b in batches)
        spread[order] = {side: np.mean([lens[b].std() for b in batches]) for side, lens in (("src", src), ("tgt", tgt))}
    assert spread["source"]["src"] < 0.5 < spread["source"]["tgt"]
    assert spread["source"]["src"] < spread["longer"]["src"] and spread["longer"]["tgt"] < spread["source"]["tgt"]
    with pytest.raises(ValueError, match="batch order"):
        TokenBatchSampler(src, tgt, 600, order="target")


@pytest.mark.parametrize("order", ["longer", "source"])
def test_real_budget_counts_real_tokens_and_fills_batches_that_padding_would_cut(order):
    """budget="real": each side's real tokens stay within max_tokens (a batch cut only where the next sentence
    would pass it), every example once; the same sort holds more real target tokens a batch than "padded"."""
    src, tgt = _lens(n=4000, seed=5)
    src[11], tgt[11] = 700, 3  # over-long example: a batch of its own
    real_tgt = {}
    for budget in ("padded", "real"):
        batches = list(TokenBatchSampler(src, tgt, max_tokens=600, seed=1, order=order, budget=budget))
        assert sorted(i for b in batches for i in b) == list(range(len(src)))
        real_tgt[budget] = np.mean([tgt[b].sum() for b in batches])
        if budget == "real":
            assert all(max(src[b].sum(), tgt[b].sum()) <= 600 for b in batches if b != [11])
            assert [11] in batches
            # cut only where needed: the batch served next in sorted order would not have fit another sentence
            sizes = sorted(max(src[b].sum(), tgt[b].sum()) for b in batches if b != [11])
            assert sizes[len(sizes) // 2] > 600 - 2 * 60
    assert real_tgt["real"] > real_tgt["padded"]
    with pytest.raises(ValueError, match="batch budget"):
        TokenBatchSampler(src, tgt, 600, budget="sentences")


@pytest.mark.parametrize("order", ["longer", "source"])
def test_target_budget_counts_real_target_tokens_alone_and_cuts_only_where_the_next_would_pass(order):
    """budget="target": a batch's real target tokens stay within max_tokens and every cut is needed (the next
    sentence in sorted order would pass the budget); the source side is not counted (a batch may hold more source
    tokens than max_tokens); so it holds more real target tokens a batch than "real", which budgets both sides."""
    src, tgt = _lens(n=4000, seed=5)
    src = src * 2  # sources twice as long: a per-side budget binds on them, this one does not
    batches = [
        np.asarray(b) for b in TokenBatchSampler(src, tgt, max_tokens=600, shuffle=False, order=order, budget="target")
    ]
    assert sorted(i for b in batches for i in b) == list(range(len(src)))
    assert all(tgt[b].sum() <= 600 for b in batches)
    assert all(tgt[a].sum() + tgt[b[0]] > 600 for a, b in itertools.pairwise(batches))  # unsorted: served in order
    assert max(src[b].sum() for b in batches) > 600
    real = list(TokenBatchSampler(src, tgt, max_tokens=600, shuffle=False, order=order, budget="real"))
    assert np.mean([tgt[b].sum() for b in batches]) > 1.5 * np.mean([tgt[b].sum() for b in real])
