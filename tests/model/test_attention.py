"""Eq. 1 and multi-head attention: weights are distributions, masks give exact zeros, fused == reference."""

from __future__ import annotations

import math

import pytest
import torch
from torch import Tensor

from aiayn.model.attention import MultiHeadAttention, attention_weights, scaled_dot_product_attention


def _qkv(batch=2, heads=3, t=5, s=7, d_k=8, d_v=6, seed=0):
    g = torch.Generator().manual_seed(seed)
    return (
        torch.randn(batch, heads, t, d_k, generator=g),
        torch.randn(batch, heads, s, d_k, generator=g),
        torch.randn(batch, heads, s, d_v, generator=g),
    )


def _random_mask(batch=2, t=5, s=7, seed=1):
    mask = torch.rand(batch, 1, t, s, generator=torch.Generator().manual_seed(seed)) > 0.4
    mask[..., 0] = True  # every query keeps at least one key here; empty rows are tested separately
    return mask


def test_weights_rows_sum_to_one_and_masked_weights_are_exactly_zero():
    q, k, _ = _qkv()
    mask = _random_mask()
    weights = attention_weights(q, k, mask)
    torch.testing.assert_close(weights.sum(-1), torch.ones(2, 3, 5))
    assert (weights.masked_select(~mask.expand_as(weights)) == 0.0).all()
    assert (weights.masked_select(mask.expand_as(weights)) > 0.0).all()


def test_reference_is_softmax_of_scaled_scores():
    q, k, v = _qkv()
    expected = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(q.size(-1)), dim=-1) @ v
    torch.testing.assert_close(scaled_dot_product_attention(q, k, v, reference=True), expected)


@pytest.mark.parametrize("masked", [False, True])
def test_fused_and_reference_paths_agree(masked):
    q, k, v = _qkv()
    mask = _random_mask() if masked else None
    fused = scaled_dot_product_attention(q, k, v, mask)
    reference = scaled_dot_product_attention(q, k, v, mask, reference=True)
    torch.testing.assert_close(fused, reference, atol=1e-5, rtol=1e-5)


def test_mask_changes_the_output():
    q, k, v = _qkv()
    mask = _random_mask()
    assert not torch.allclose(scaled_dot_product_attention(q, k, v, mask), scaled_dot_product_attention(q, k, v))


@pytest.mark.parametrize("reference", [False, True])
def test_fully_masked_query_row_gives_zero_output_and_finite_gradients(reference):
    q, k, v = _qkv()
    q.requires_grad_(True)
    mask = _random_mask()
    mask[1, 0, 2] = False  # query 2 of sentence 1 may attend to nothing (a padding query)
    out = scaled_dot_product_attention(q, k, v, mask, reference=reference)
    assert torch.isfinite(out).all()
    assert (out[1, :, 2] == 0.0).all()
    out.sum().backward()
    assert torch.isfinite(q.grad).all()
    torch.testing.assert_close(out[0], scaled_dot_product_attention(q, k, v, mask, reference=not reference)[0])


def test_multi_head_shapes_with_independent_d_k_and_d_v():
    # Table 3 row A/B shapes: h * d_k != d_model and d_k != d_v.
    mha = MultiHeadAttention(d_model=12, n_heads=4, d_k=5, d_v=7)
    assert mha.w_qkv.weight.shape == (4 * (5 + 5 + 7), 12)
    assert mha.w_o.weight.shape == (12, 4 * 7)
    x, memory = torch.randn(2, 3, 12), torch.randn(2, 9, 12)
    assert mha(x).shape == (2, 3, 12)
    assert mha(x, memory).shape == (2, 3, 12)


def _per_head_reference(mha: MultiHeadAttention, x: Tensor) -> tuple[Tensor, Tensor]:
    """Return MultiHead(x) built by hand from each head's own softmax, and from one softmax over all heads."""
    h, d_k, d_v = mha.n_heads, mha.d_k, mha.d_v
    w_q, w_k, w_v = mha.w_qkv.weight.split([h * d_k, h * d_k, h * d_v])
    b_q, b_k, b_v = mha.w_qkv.bias.split([h * d_k, h * d_k, h * d_v])
    q, k, v = x @ w_q.T + b_q, x @ w_k.T + b_k, x @ w_v.T + b_v  # (T, H*d)
    heads = []
    for i in range(h):
        qi, ki, vi = q[:, i * d_k : (i + 1) * d_k], k[:, i * d_k : (i + 1) * d_k], v[:, i * d_v : (i + 1) * d_v]
        heads.append(torch.softmax(qi @ ki.T / math.sqrt(d_k), dim=-1) @ vi)
    multi = mha.w_o(torch.cat(heads, dim=-1))
    # One head over the concatenated slices: the scores of all heads summed under one softmax.
    single = mha.w_o(torch.softmax(q @ k.T / math.sqrt(d_k), dim=-1) @ v)
    return multi, single


def test_multi_head_is_not_one_head_over_concatenated_slices():
    torch.manual_seed(0)
    mha = MultiHeadAttention(d_model=16, n_heads=4, d_k=4, d_v=4).eval()
    x = torch.randn(6, 16)
    out = mha(x[None])[0]
    multi, single = _per_head_reference(mha, x)
    torch.testing.assert_close(out, multi, atol=1e-5, rtol=1e-5)  # our module is per-head softmax...
    assert (out - single).abs().max() > 1e-2  # ...which a single softmax over all slices does not match


@pytest.mark.parametrize("gain", [1.0, 2**-0.5])
def test_qkv_init_gain_scales_xavier_of_each_projection(gain):
    """W_Q, W_K, W_V ~ U(+-gain * sqrt(6 / (fan_in + fan_out))) each; W_O plain Xavier; biases zero."""
    torch.manual_seed(0)
    d_model, heads, d_k, d_v = 256, 4, 64, 32
    mha = MultiHeadAttention(d_model, heads, d_k, d_v, qkv_init_gain=gain)
    blocks = mha.w_qkv.weight.detach().split([heads * d_k, heads * d_k, heads * d_v])
    for block, expected_gain in (
        (blocks[0], gain),
        (blocks[1], gain),
        (blocks[2], gain),
        (mha.w_o.weight.detach(), 1.0),
    ):
        bound = expected_gain * math.sqrt(6 / sum(block.shape))
        assert block.abs().max() <= bound
        assert block.std().item() == pytest.approx(bound / math.sqrt(3), rel=0.03)  # std of U(-b, b) is b / sqrt(3)
    assert not mha.w_qkv.bias.any() and not mha.w_o.bias.any()


def test_default_qkv_init_matches_torch_packed_in_projection():
    """The default init draws each of W_Q, W_K, W_V as `nn.MultiheadAttention` does: Xavier over the packed
    (3D, D) matrix, which is Xavier over one (D, D) projection times 1/sqrt(2) (docs/departures.md#initialisation)."""
    from aiayn.model.config import ModelConfig
    from aiayn.model.transformer import Transformer

    torch.manual_seed(0)
    ours = MultiHeadAttention(512, 8, 64, 64).w_qkv.weight.detach()
    torch_packed = torch.nn.MultiheadAttention(512, 8).in_proj_weight.detach()
    assert ours.std().item() == pytest.approx(torch_packed.std().item(), rel=0.01)
    default_gain = (
        Transformer(ModelConfig(n_layers=1, d_model=8, d_ff=16, n_heads=2, d_k=4, d_v=4), 16)
        .encoder[0]
        .self_attn.qkv_init_gain
    )
    assert default_gain == ModelConfig().qkv_init_gain == pytest.approx(2**-0.5)
