"""The model switches later work ablates, each against its reference formula: pre-LN, embedding sharing, GELU,
attention dropout, rotary positions (shift invariance of the attention scores)."""

from __future__ import annotations

import dataclasses

import pytest
import torch
import torch.nn.functional as F

from aiayn.model.attention import attention_weights
from aiayn.model.config import ModelConfig
from aiayn.model.embeddings import PositionalEncoding, rotate
from aiayn.model.masks import src_mask
from aiayn.model.transformer import Transformer

PAD, VOCAB = 0, 23
SHAPE = dict(n_layers=1, d_model=16, d_ff=24, n_heads=2, d_k=8, d_v=4, dropout=0.0)


def model(seed: int = 0, **switches) -> Transformer:
    torch.manual_seed(seed)
    return Transformer(ModelConfig(**(SHAPE | switches)), VOCAB, PAD).eval()


def tokens(batch: int, length: int, seed: int = 0) -> torch.Tensor:
    return torch.randint(1, VOCAB, (batch, length), generator=torch.Generator().manual_seed(seed))


def heads_attention(mha, x_q: torch.Tensor, x_kv: torch.Tensor) -> torch.Tensor:
    """Multi-head attention by hand from the packed weights (Eq. 1 per head, heads concatenated, W_O)."""
    h, dk, dv = mha.n_heads, mha.d_k, mha.d_v
    w, b = mha.w_qkv.weight, mha.w_qkv.bias
    q = F.linear(x_q, w[: h * dk], b[: h * dk]).view(*x_q.shape[:2], h, dk).transpose(1, 2)
    k = F.linear(x_kv, w[h * dk : 2 * h * dk], b[h * dk : 2 * h * dk]).view(*x_kv.shape[:2], h, dk).transpose(1, 2)
    v = F.linear(x_kv, w[2 * h * dk :], b[2 * h * dk :]).view(*x_kv.shape[:2], h, dv).transpose(1, 2)
    out = (q @ k.transpose(-2, -1) / dk**0.5).softmax(-1) @ v  # no padding in these inputs
    return mha.w_o(out.transpose(1, 2).reshape(*x_q.shape[:2], h * dv))


def ffn(layer, x: torch.Tensor, act=torch.relu) -> torch.Tensor:
    return layer.ffn.w_2(act(layer.ffn.w_1(x)))


def ln(norm, x: torch.Tensor) -> torch.Tensor:
    return F.layer_norm(x, x.shape[-1:], norm.weight, norm.bias, norm.eps)


def test_pre_ln_encoder_and_decoder_equal_the_reference_formula():
    """x + Sublayer(LN(x)) around each sub-layer, then one LayerNorm after each stack (Wang et al. 2019)."""
    net = model(norm_position="pre")
    with torch.no_grad():
        for norm in (net.encoder_norm, net.decoder_norm):  # non-trivial gains, so a missing norm would show
            norm.weight.uniform_(0.5, 1.5), norm.bias.uniform_(-0.5, 0.5)
    src, tgt_in = tokens(2, 5), tokens(2, 4, seed=1)
    enc, dec = net.encoder[0], net.decoder[0]
    with torch.no_grad():
        x = net.embedding(src) + net.positions(5)
        x = x + heads_attention(enc.self_attn, ln(enc.res_attn.norm, x), ln(enc.res_attn.norm, x))
        x = x + ffn(enc, ln(enc.res_ffn.norm, x))
        memory = ln(net.encoder_norm, x)
        torch.testing.assert_close(net.encode(src, src_mask(src, PAD)), memory, atol=1e-5, rtol=1e-5)

        y = net.embedding(tgt_in) + net.positions(4)
        causal = torch.ones(4, 4, dtype=torch.bool).tril()
        h = ln(dec.res_self.norm, y)
        y = y + _masked_self_attention(dec.self_attn, h, causal)
        y = y + heads_attention(dec.cross_attn, ln(dec.res_cross.norm, y), memory)
        y = y + ffn(dec, ln(dec.res_ffn.norm, y))
        logits = ln(net.decoder_norm, y) @ net.embedding.weight.T
        torch.testing.assert_close(net(src, tgt_in), logits, atol=1e-5, rtol=1e-5)
    # The paper's post-LN computes another function of the same weights.
    post = model(norm_position="post")
    post.load_state_dict({k: v for k, v in net.state_dict().items() if "_norm" not in k})
    assert not torch.allclose(post(src, tgt_in), net(src, tgt_in), atol=1e-3)


def _masked_self_attention(mha, x, causal):
    h, dv = mha.n_heads, mha.d_v
    q, k, v = mha.project_qkv(x)
    weights = attention_weights(q, k, causal)
    return mha.w_o((weights @ v).transpose(1, 2).reshape(*x.shape[:2], h * dv))


def test_pre_ln_adds_exactly_the_two_final_layer_norms():
    assert model(norm_position="pre").num_parameters() - model().num_parameters() == 2 * 2 * SHAPE["d_model"]
    assert model().encoder_norm is None and model().decoder_norm is None


@pytest.mark.parametrize("share, extra", [("all", 0), ("decoder", 1), ("none", 2)])
def test_untied_embeddings_add_one_matrix_each(share, extra):
    assert model(share_embeddings=share).num_parameters() - model().num_parameters() == extra * VOCAB * SHAPE["d_model"]


def test_which_matrix_each_sharing_mode_uses():
    src, tgt_in = tokens(2, 5), tokens(2, 4, seed=1)

    def changes(net: Transformer, weight: torch.Tensor) -> tuple[bool, bool]:
        """Whether perturbing `weight` changes the encoder output, and whether it changes the logits."""
        mask = src_mask(src, PAD)
        with torch.no_grad():
            memory, logits = net.encode(src, mask), net(src, tgt_in)
            weight.add_(torch.randn_like(weight))
            return (not torch.allclose(net.encode(src, mask), memory), not torch.allclose(net(src, tgt_in), logits))

    tied = model()
    assert changes(tied, tied.embedding.weight) == (True, True)
    decoder = model(share_embeddings="decoder")
    assert changes(decoder, decoder.src_embedding.weight) == (True, True)  # through the memory
    decoder = model(share_embeddings="decoder")
    assert changes(decoder, decoder.embedding.weight) == (False, True)  # target input and softmax
    untied = model(share_embeddings="none")
    assert changes(untied, untied.output.weight) == (False, True)
    untied = model(share_embeddings="none")
    logits = untied(src, tgt_in)
    torch.testing.assert_close(logits, untied.output.project(_decoder_states(untied, src, tgt_in)))


def _decoder_states(net: Transformer, src: torch.Tensor, tgt_in: torch.Tensor) -> torch.Tensor:
    """The last decoder layer's output, captured with a forward hook."""
    seen = []
    handle = net.decoder[-1].register_forward_hook(lambda module, args, out: seen.append(out))
    with torch.no_grad():
        net(src, tgt_in)
    handle.remove()
    return seen[0]


def test_gelu_changes_only_the_activation_of_the_feed_forward():
    relu, gelu = model(activation="relu"), model(activation="gelu")  # same seed: the same weights
    for a, b in zip(relu.state_dict().values(), gelu.state_dict().values()):
        torch.testing.assert_close(a, b)
    x = torch.randn(2, 3, SHAPE["d_model"])
    with torch.no_grad():
        torch.testing.assert_close(gelu.encoder[0].ffn(x), ffn(gelu.encoder[0], x, F.gelu))
        torch.testing.assert_close(relu.encoder[0].ffn(x), ffn(relu.encoder[0], x, torch.relu))
        assert not torch.allclose(gelu.encoder[0].ffn(x), relu.encoder[0].ffn(x))


def test_gelu_row_differs_from_base_only_in_the_activation():
    from aiayn.config.composition import compose
    from aiayn.config.resolve import prepare

    base, gelu = (dataclasses.asdict(prepare(compose(["scale=tiny", f"row={r}"])).model) for r in ("base", "X_gelu"))
    assert {k for k in base if base[k] != gelu[k]} == {"activation"} and gelu["activation"] == "gelu"


def test_attention_dropout_acts_on_the_weights_in_training_only():
    net = model(attention_dropout=0.5)  # residual dropout 0: any randomness comes from the attention weights
    src, tgt_in = tokens(2, 6), tokens(2, 5, seed=1)
    torch.testing.assert_close(net(src, tgt_in), net(src, tgt_in))
    net.train()
    assert not torch.allclose(net(src, tgt_in), net(src, tgt_in))
    assert all(m.self_attn.dropout == 0.5 for m in net.encoder)
    assert all(m.self_attn.dropout == 0.0 for m in model().encoder)  # the paper: none


def test_rotary_attention_scores_depend_only_on_the_offset_between_positions():
    """q_m . k_n after rotation is a function of m - n: shifting every position by s leaves the scores unchanged."""
    d_k, length = 8, 7
    rope = PositionalEncoding("rotary", 16, 64, d_k)
    g = torch.Generator().manual_seed(0)
    q, k = torch.randn(2, 3, length, d_k, generator=g), torch.randn(2, 3, length, d_k, generator=g)

    def scores(q_offset: int, k_offset: int) -> torch.Tensor:
        q_rot, k_rot = rotate(q, *rope.rotary(length, q_offset)), rotate(k, *rope.rotary(length, k_offset))
        return q_rot @ k_rot.transpose(-2, -1)

    for shift in (1, 5, 40):
        torch.testing.assert_close(scores(shift, shift), scores(0, 0), atol=1e-4, rtol=1e-4)
    assert not torch.allclose(scores(3, 0), scores(0, 0), atol=1e-3)  # only the offset counts, and it does count
    # Rotations keep lengths: a score is still q . k when both sit at the same position.
    same = (rotate(q, *rope.rotary(length, 9)) * rotate(k, *rope.rotary(length, 9))).sum(-1)
    torch.testing.assert_close(same, (q * k).sum(-1), atol=1e-4, rtol=1e-4)


def test_rotary_model_adds_nothing_to_the_embeddings_and_sees_order():
    net = model(pos_encoding="rotary")
    assert net.positions(5) is None and net.num_parameters() == model(pos_encoding="none").num_parameters()
    src = tokens(1, 6)
    perm = torch.tensor([5, 4, 3, 2, 1, 0])
    with torch.no_grad():
        memory = net.encode(src, src_mask(src, PAD))
        permuted = net.encode(src[:, perm], src_mask(src[:, perm], PAD))
    assert not torch.allclose(permuted, memory[:, perm], atol=1e-4)  # without positions this would be equal


def test_switch_defaults_are_the_papers():
    cfg = ModelConfig()
    assert (cfg.norm_position, cfg.share_embeddings, cfg.activation, cfg.attention_dropout, cfg.pos_encoding) == (
        "post",
        "all",
        "relu",
        0.0,
        "sinusoidal",
    )
    assert {f.name for f in dataclasses.fields(ModelConfig)} >= {
        "norm_position",
        "share_embeddings",
        "activation",
        "attention_dropout",
        "pos_encoding",
    }


def test_bad_switch_values_are_refused():
    for key, value in (("norm_position", "middle"), ("share_embeddings", "encoder"), ("activation", "tanh")):
        with pytest.raises(ValueError, match=key):
            model(**{key: value})
    with pytest.raises(ValueError, match="d_k=7 must be even for rotary"):
        model(pos_encoding="rotary", d_k=7)
