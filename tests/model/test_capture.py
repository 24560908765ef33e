"""capture_attention: the weights recorded are the ones each attention's output was made from, distributions with
exact zeros where masked, and capturing changes no output."""

from __future__ import annotations

import pytest
import torch
from torch import Tensor

from aiayn.model.attention import MultiHeadAttention
from aiayn.model.cache import KVCache
from aiayn.model.capture import capture_attention
from aiayn.model.masks import src_mask

PAD = 0


def _batch(tokens) -> tuple[Tensor, Tensor]:
    src, tgt_in = tokens(3, 7), tokens(3, 5, seed=1)
    src[1, 4:] = PAD  # a padded source: its keys must get weight 0
    tgt_in[2, 3:] = PAD  # a padded target: causal masking alone decides (right padding, masks.Causal)
    return src, tgt_in


def _attention_modules(model) -> list[MultiHeadAttention]:
    return [m for m in model.modules() if isinstance(m, MultiHeadAttention)]


@pytest.mark.parametrize("variant", [{}, {"pos_encoding": "rotary"}, {"norm_position": "pre"}])
def test_capturing_changes_no_output(make_model, tokens, variant):
    model = make_model(**variant)
    src, tgt_in = _batch(tokens)
    with torch.no_grad():
        plain = model(src, tgt_in)
        with capture_attention(model) as record:
            captured = model(src, tgt_in)
        again = model(src, tgt_in)
    assert torch.equal(plain, captured) and torch.equal(plain, again)
    assert all(len(calls) == 1 for calls in (*record.encoder, *record.decoder, *record.cross))
    assert all(m.capture is None for m in _attention_modules(model))  # off again after the block


def test_weights_are_distributions_with_zeros_on_padding_and_the_future(make_model, tokens):
    model = make_model()
    src, tgt_in = _batch(tokens)
    with torch.no_grad(), capture_attention(model) as record:
        model(src, tgt_in)
    keys_real = (src != PAD)[:, None, None, :]  # (B, 1, 1, S)
    future = torch.ones(5, 5, dtype=torch.bool).triu(1)  # (T, T): key after query
    for layer in range(model.cfg.n_layers):
        enc, dec, cross = record.encoder[layer][0], record.decoder[layer][0], record.cross[layer][0]
        assert enc.shape == (3, 4, 7, 7) and dec.shape == (3, 4, 5, 5) and cross.shape == (3, 4, 5, 7)
        for weights in (enc, dec, cross):
            torch.testing.assert_close(weights.sum(-1), torch.ones(weights.shape[:-1]))
        for weights in (enc, cross):
            assert (weights.masked_select(~keys_real.expand_as(weights)) == 0).all()
            assert (weights.masked_select(keys_real.expand_as(weights)) > 0).all()
        assert (dec[..., future] == 0).all() and (dec[..., ~future] > 0).all()


def _merged(module: MultiHeadAttention, weights: Tensor, v: Tensor) -> Tensor:
    """W_O of the heads' weighted values: the attention's output from the recorded weights, (B, T, D)."""
    heads = weights @ v  # (B, H, T, d_v)
    return module.w_o(heads.transpose(1, 2).flatten(2))


def _watch(module: MultiHeadAttention, seen: list) -> None:
    """Keep each call's values and output (for the grouped call of beam search: values one row per sentence)."""
    original = module.attend

    def attend(q, k, v, mask=None, group=1):
        out = original(q, k, v, mask, group)
        seen.append((v.repeat_interleave(group, dim=0), out))
        return out

    module.attend = attend  # type: ignore[method-assign]


def test_the_recorded_weights_reproduce_every_attentions_output(make_model, tokens):
    model = make_model()
    src, tgt_in = _batch(tokens)
    modules = _attention_modules(model)
    seen: dict[MultiHeadAttention, list] = {m: [] for m in modules}
    for module in modules:
        _watch(module, seen[module])
    with torch.no_grad(), capture_attention(model) as record:
        model(src, tgt_in)
    recorded = {
        **{layer.self_attn: record.encoder[i][0] for i, layer in enumerate(model.encoder)},
        **{layer.self_attn: record.decoder[i][0] for i, layer in enumerate(model.decoder)},
        **{layer.cross_attn: record.cross[i][0] for i, layer in enumerate(model.decoder)},
    }
    for module in modules:
        [(v, out)] = seen[module]  # one call each
        torch.testing.assert_close(_merged(module, recorded[module], v), out, atol=1e-5, rtol=1e-5)


def test_incremental_beam_decoding_records_each_steps_rows_per_beam(make_model, tokens):
    model = make_model()
    src = tokens(2, 6)
    src[1, 3:] = PAD
    mask, beams = src_mask(src, PAD), 3
    tgt_in = tokens(2 * beams, 4, seed=1)
    modules = _attention_modules(model)
    seen: dict[MultiHeadAttention, list] = {m: [] for m in modules}
    for module in modules:
        _watch(module, seen[module])
    with torch.no_grad(), capture_attention(model) as record:
        memory, cache = model.encode(src, mask), KVCache(group=beams)
        for step in range(tgt_in.size(1)):
            model.decode(tgt_in[:, step : step + 1], memory, mask, None, cache=cache)
    cross = record.cross[-1]
    assert len(cross) == 4 and all(w.shape == (2 * beams, 4, 1, 6) for w in cross)
    assert (torch.stack(cross)[:, beams:, ..., 3:] == 0).all()  # the second sentence's beams: its padding
    assert [w.shape[-1] for w in record.decoder[0]] == [1, 2, 3, 4]  # keys: the cached positions and the new one
    layer = model.decoder[-1].cross_attn
    for weights, (v, out) in zip(cross, seen[layer]):
        torch.testing.assert_close(_merged(layer, weights, v), out, atol=1e-5, rtol=1e-5)
