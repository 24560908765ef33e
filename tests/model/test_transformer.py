"""Whole-model properties: permutation equivariance, causality, padding invariance, LayerNorm, sizes."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from aiayn.model.config import ModelConfig
from aiayn.model.masks import src_mask, tgt_mask
from aiayn.model.transformer import Transformer

PAD = 0


def test_forward_shape_and_masks(make_model, tokens):
    model = make_model()
    src, tgt_in = tokens(3, 7), tokens(3, 5, seed=1)
    assert model(src, tgt_in).shape == (3, 5, model.embedding.weight.size(0))
    assert src_mask(src, PAD).shape == (3, 1, 1, 7)
    assert tgt_mask(tgt_in, PAD).shape == (3, 1, 5, 5)


@pytest.mark.parametrize("pos_encoding, equivariant", [("none", True), ("sinusoidal", False)])
def test_encoder_permutation_equivariance_only_without_positions(make_model, tokens, pos_encoding, equivariant):
    model = make_model(pos_encoding=pos_encoding)
    src = tokens(2, 9)
    perm = torch.randperm(9, generator=torch.Generator().manual_seed(3))
    memory = model.encode(src, src_mask(src, PAD))
    permuted = model.encode(src[:, perm], src_mask(src[:, perm], PAD))
    assert torch.allclose(permuted, memory[:, perm], atol=1e-5) == equivariant


def test_causality_future_targets_never_change_earlier_logits(make_model, tokens):
    model = make_model()
    src, tgt_in = tokens(2, 6), tokens(2, 8, seed=1)
    logits = model(src, tgt_in)
    for t in (1, 4, 7):
        changed = tgt_in.clone()
        changed[:, t:] = tokens(2, 8 - t, seed=10 + t)
        new_logits = model(src, changed)
        torch.testing.assert_close(new_logits[:, :t], logits[:, :t], atol=1e-5, rtol=1e-5)
        assert not torch.allclose(new_logits[:, t:], logits[:, t:], atol=1e-3)


def test_padding_invariance(make_model, tokens):
    model = make_model()
    src, tgt_in = tokens(2, 6), tokens(2, 5, seed=1)
    padded_src = F.pad(src, (0, 4), value=PAD)
    torch.testing.assert_close(
        model.encode(padded_src, src_mask(padded_src, PAD))[:, :6],
        model.encode(src, src_mask(src, PAD)),
        atol=1e-5,
        rtol=1e-5,
    )
    torch.testing.assert_close(model(padded_src, tgt_in), model(src, tgt_in), atol=1e-5, rtol=1e-5)
    # Padding the target as well leaves the real positions' logits unchanged.
    torch.testing.assert_close(
        model(padded_src, F.pad(tgt_in, (0, 3), value=PAD))[:, :5], model(src, tgt_in), atol=1e-5, rtol=1e-5
    )


def test_padding_matters_only_through_the_mask(make_model, tokens):
    # Control for the test above: the same extra tokens as real (non-pad) tokens do change the output.
    model = make_model()
    src, tgt_in = tokens(2, 6), tokens(2, 5, seed=1)
    assert not torch.allclose(model(F.pad(src, (0, 4), value=5), tgt_in), model(src, tgt_in), atol=1e-3)


def test_layer_norm_without_gain_and_bias_is_invariant_to_affine_maps(make_model):
    model = make_model()
    norm = model.encoder[0].res_attn.norm
    with torch.no_grad():
        norm.reset_parameters()  # gain 1, bias 0: the normalisation alone
    z = torch.randn(4, 32, generator=torch.Generator().manual_seed(0))
    for a, b in ((3.0, -2.0), (0.5, 7.0), (20.0, 0.0)):
        torch.testing.assert_close(norm(a * z + b), norm(z), atol=1e-4, rtol=1e-4)
        torch.testing.assert_close(F.layer_norm(a * z + b, (32,)), F.layer_norm(z, (32,)), atol=1e-4, rtol=1e-4)
    torch.testing.assert_close(norm(-z), -norm(z))  # a < 0 flips the sign: invariance needs a > 0
    assert not torch.allclose(norm(-z), norm(z))


def test_dropout_is_active_only_in_training(make_model, tokens):
    model = make_model(dropout=0.3)
    src, tgt_in = tokens(2, 6), tokens(2, 5, seed=1)
    torch.testing.assert_close(model(src, tgt_in), model(src, tgt_in))
    model.train()
    assert not torch.allclose(model(src, tgt_in), model(src, tgt_in))


def _count(**shape) -> int:
    with torch.device("meta"):  # no memory, no init cost: only the shapes matter
        return Transformer(ModelConfig(**shape), 37000).num_parameters()


def _formula(vocab=37000, n_layers=6, d_model=512, d_ff=2048, n_heads=8, d_k=64, d_v=64) -> int:
    """Count by hand: the shared embedding once, then per layer projections, FFN and LayerNorms with biases."""
    attn = (d_model + 1) * n_heads * (2 * d_k + d_v) + (n_heads * d_v + 1) * d_model
    ffn = (d_model + 1) * d_ff + (d_ff + 1) * d_model
    norm = 2 * d_model
    return vocab * d_model + n_layers * ((attn + ffn + 2 * norm) + (2 * attn + ffn + 3 * norm))


def test_parameter_counts_at_paper_shapes():
    base = _count()
    assert base == _formula()  # about 63M; the paper says 65M
    assert _count(n_layers=4, d_k=32, d_v=16) == _formula(n_layers=4, d_k=32, d_v=16)
    assert abs((_count(n_layers=2) - base) / 1e6 - (36 - 65)) < 1.0  # Table 3 row C
    big = _count(d_model=1024, d_ff=4096, n_heads=16)
    assert abs(big / 1e6 - 213) < 2.0  # Table 3 big: 213M
    assert abs((big - base) / 1e6 - 151.2) < 1.0  # paper's 213 - 65 = 148: its base count is 2M above ours
    assert abs((_count(d_k=16) - base) / 1e6 - (58 - 65)) < 1.0  # Table 3 row B


@pytest.mark.parametrize("name, value", [("d_model", 0), ("n_heads", -1), ("d_k", 2.5), ("vocab_size", 0)])
def test_bad_sizes_name_the_argument(name, value):
    vocab, shape = (value, {}) if name == "vocab_size" else (10, {name: value})
    with pytest.raises(ValueError, match=name):
        Transformer(ModelConfig(**shape), vocab)


def test_bad_pos_encoding_dropout_and_pad_are_errors():
    with pytest.raises(ValueError, match="'absolute'"):
        Transformer(ModelConfig(pos_encoding="absolute"), 10)
    with pytest.raises(ValueError, match="dropout"):
        Transformer(ModelConfig(dropout=1.0), 10)
    with pytest.raises(ValueError, match="attention_dropout"):
        Transformer(ModelConfig(attention_dropout=-0.1), 10)
    with pytest.raises(ValueError, match="pad_id=10"):
        Transformer(ModelConfig(), 10, pad_id=10)


@pytest.mark.parametrize("overrides", [{}, {"norm_position": "pre"}, {"pos_encoding": "rotary"}])
def test_the_causal_flag_equals_the_causal_and_padding_mask_on_real_positions(make_model, tokens, overrides):
    # Training passes masks.CAUSAL (is_causal=True, no mask tensor) for decoder self-attention; right-padded
    # targets make it the same as causal AND key-not-pad for every real position, gradients included.
    from aiayn.model.masks import CAUSAL

    model = make_model(**overrides).train()  # dropout 0: train mode only to build the graph as training does
    src, tgt_in = tokens(4, 7), tokens(4, 9, seed=1)
    lengths = torch.tensor([9, 3, 6, 1])
    tgt_in[torch.arange(9)[None, :] >= lengths[:, None]] = PAD
    real = tgt_in != PAD  # (B, T)
    outputs, grads = [], []
    for mask in (tgt_mask(tgt_in, PAD), CAUSAL):
        model.zero_grad()
        s_mask = src_mask(src, PAD)
        states = model.decoder_states(tgt_in, model.encode(src, s_mask), s_mask, mask)  # (B, T, D)
        states[real].square().sum().backward()
        outputs.append(states[real].detach())
        grads.append([p.grad.clone() for p in model.parameters() if p.grad is not None])
    torch.testing.assert_close(outputs[1], outputs[0], atol=1e-6, rtol=1e-5)
    for g, h in zip(*grads):
        torch.testing.assert_close(g, h, atol=1e-5, rtol=1e-4)
