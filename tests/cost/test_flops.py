"""Counted model FLOPs: a hand-computed tiny model, and exact scaling of the FFN term."""

from __future__ import annotations

import pytest

from aiayn.cost.flops import forward_flops_per_token, model_flops_per_token, training_flops
from aiayn.model.config import ModelConfig, recorded

TINY = dict(n_layers=1, d_model=2, d_ff=3, n_heads=1, d_k=2, d_v=2)


def test_hand_computed_tiny_model():
    f = forward_flops_per_token(**TINY, vocab_size=5, src_len=3, tgt_len=4)
    # projections: Q,K,V 2*2*2 each + output 2*2*2 = 32; scores+values 2*(2+2)*L; FFN 4*2*3 = 24
    assert f["encoder_self_attention"] == 32 + 24
    assert f["encoder_ffn"] == 24
    assert f["cross_kv"] == 16  # K and V of memory: 2 * d_model * h * (d_k + d_v) = 2*2*1*4
    assert f["decoder_self_attention"] == 32 + 32
    assert f["decoder_cross_attention"] == 8 + 8 + 24  # Q, output projections + scores over 3 source tokens
    assert f["output_projection"] == 2 * 2 * 5
    assert f["per_src_token"] == 80 + 16
    assert f["per_tgt_token"] == 64 + 40 + 24 + 20


def test_training_flops_is_three_forward_passes():
    model = ModelConfig(**TINY)
    total = training_flops(model, vocab_size=5, tokens_src=10, tokens_tgt=12, avg_src_len=3, avg_tgt_len=4)
    assert total == 3 * (10 * 96 + 12 * 148)


def test_doubling_d_ff_adds_exactly_the_ffn_flops():
    cfg = dict(n_layers=6, d_model=512, d_ff=2048, n_heads=8, d_k=64, d_v=64)
    lens = dict(vocab_size=37000, src_len=27.0, tgt_len=29.0)
    small = forward_flops_per_token(**cfg, **lens)
    big = forward_flops_per_token(**{**cfg, "d_ff": 4096}, **lens)
    assert big["encoder_ffn"] == 2 * small["encoder_ffn"] == 2 * 6 * 4 * 512 * 2048
    assert big["decoder_ffn"] == 2 * small["decoder_ffn"]
    assert big["per_src_token"] - small["per_src_token"] == 6 * 4 * 512 * 2048
    assert big["per_tgt_token"] - small["per_tgt_token"] == 6 * 4 * 512 * 2048
    assert big["decoder_self_attention"] == small["decoder_self_attention"]


def test_attention_products_grow_with_length():
    short = forward_flops_per_token(**TINY, vocab_size=5, src_len=3, tgt_len=4)
    long = forward_flops_per_token(**TINY, vocab_size=5, src_len=6, tgt_len=4)
    assert long["encoder_self_attention"] - short["encoder_self_attention"] == 2 * 1 * (2 + 2) * 3
    assert long["decoder_self_attention"] == short["decoder_self_attention"]


def test_bad_sizes_are_named():
    with pytest.raises(ValueError, match="d_ff"):
        forward_flops_per_token(**{**TINY, "d_ff": 0}, vocab_size=5, src_len=3, tgt_len=4)
    with pytest.raises(ValueError, match="token counts"):
        training_flops(ModelConfig(**TINY), 5, -1, 12, 3, 4)


def test_a_recorded_model_config_is_read_by_this_version() -> None:
    """An old run's config.yaml `model` group: a key since removed is dropped, one since added takes the paper's
    default, and the counted FLOPs are the sizes'; a record without a size is refused, naming it."""
    record = {**TINY, "dropout": 0.3, "since_removed": 1}
    model = recorded(record)
    assert (model.d_ff, model.dropout, model.activation) == (3, 0.3, "relu")
    assert model_flops_per_token(model, 5, 3, 4) == forward_flops_per_token(**TINY, vocab_size=5, src_len=3, tgt_len=4)
    with pytest.raises(KeyError, match="d_v"):
        recorded({k: v for k, v in TINY.items() if k != "d_v"})
