"""--to ct2: a CTranslate2 model written by our own converter over `ctranslate2.specs` (docs/export.md)."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from aiayn.export.card import model_card
from aiayn.export.targets import TOLERANCE, Special, check_exportable, probe_batch, require
from aiayn.run import folders

if TYPE_CHECKING:
    import numpy as np
    import torch

    from aiayn.model.transformer import Transformer


def ct2_spec(model: Transformer, pieces: Sequence[str], special: Special = Special()) -> Any:
    """The CTranslate2 TransformerSpec of `model` (post- or pre-LN, ReLU or erf GELU, our position table or none,
    shared or separate embeddings) with vocabulary `pieces` (id -> piece) on both sides: sources get our EOS
    appended (add_source_eos), decoding starts from our BOS piece. Float32 weights; `Converter.convert` quantizes."""
    import numpy as np
    import torch

    ctranslate2 = require("ct2")
    specs = ctranslate2.specs
    cfg = model.cfg
    check_exportable(cfg, "ct2")
    activation = specs.Activation.RELU if cfg.activation == "relu" else specs.Activation.GELU
    pre = cfg.norm_position == "pre"
    encoder = specs.TransformerEncoderSpec(cfg.n_layers, cfg.n_heads, pre_norm=pre, activation=activation)
    decoder = specs.TransformerDecoderSpec(cfg.n_layers, cfg.n_heads, pre_norm=pre, activation=activation)
    spec = specs.TransformerSpec(encoder, decoder)

    def a(x: torch.Tensor) -> np.ndarray:
        return np.ascontiguousarray(x.detach().to(device="cpu", dtype=torch.float32).numpy())

    def linear(target, weight: torch.Tensor, bias: torch.Tensor | None) -> None:
        target.weight = a(weight)
        if bias is not None:
            target.bias = a(bias)

    def norm(target, layer_norm) -> None:
        target.gamma, target.beta = a(layer_norm.weight), a(layer_norm.bias)

    def attention(target, attn, *, cross: bool) -> None:
        # CTranslate2's self-attention takes one fused [Q; K; V] matrix (ours, w_qkv); its encoder-decoder attention
        # Q (linear_0) and a fused [K; V] (linear_1).
        hk = cfg.n_heads * cfg.d_k
        if cross:
            linear(target.linear[0], attn.w_qkv.weight[:hk], attn.w_qkv.bias[:hk])
            linear(target.linear[1], attn.w_qkv.weight[hk:], attn.w_qkv.bias[hk:])
        else:
            linear(target.linear[0], attn.w_qkv.weight, attn.w_qkv.bias)
        linear(target.linear[-1], attn.w_o.weight, attn.w_o.bias)

    def ffn(target, feed_forward, layer_norm) -> None:
        linear(target.linear_0, feed_forward.w_1.weight, feed_forward.w_1.bias)
        linear(target.linear_1, feed_forward.w_2.weight, feed_forward.w_2.bias)
        norm(target.layer_norm, layer_norm)

    # Positions: the table our model adds (sinusoidal: ours, interleaved, so no permutation; learned: the trained
    # table; none: zeros, which add nothing).
    if cfg.pos_encoding in ("sinusoidal", "learned"):
        table = a(model.positions.table)
    else:
        table = np.zeros((cfg.max_positions, cfg.d_model), dtype=np.float32)
    source = model.embedding if model.src_embedding is None else model.src_embedding
    encoder.embeddings[0].weight = a(source.weight)
    encoder.scale_embeddings = True  # x sqrt(d_model)
    encoder.position_encodings.encodings = table
    decoder.embeddings.weight = a(model.embedding.weight)
    decoder.scale_embeddings = True
    decoder.position_encodings.encodings = table
    decoder.projection.weight = a(model.output_embedding.weight)  # no bias, as ours
    for target, layer in zip(encoder.layer, model.encoder):
        attention(target.self_attention, layer.self_attn, cross=False)
        norm(target.self_attention.layer_norm, layer.res_attn.norm)
        ffn(target.ffn, layer.ffn, layer.res_ffn.norm)
    for target, layer in zip(decoder.layer, model.decoder):
        attention(target.self_attention, layer.self_attn, cross=False)
        norm(target.self_attention.layer_norm, layer.res_self.norm)
        attention(target.attention, layer.cross_attn, cross=True)
        norm(target.attention.layer_norm, layer.res_cross.norm)
        ffn(target.ffn, layer.ffn, layer.res_ffn.norm)
    if pre:  # each stack's final LayerNorm (Wang et al. 2019), as CTranslate2's pre-norm Transformer has
        assert model.encoder_norm is not None and model.decoder_norm is not None
        norm(encoder.layer_norm, model.encoder_norm)
        norm(decoder.layer_norm, model.decoder_norm)

    vocabulary = list(pieces)
    spec.register_source_vocabulary(vocabulary)
    spec.register_target_vocabulary(vocabulary)
    config = spec.config
    config.unk_token = vocabulary[special.unk]
    config.bos_token = vocabulary[special.bos]
    config.eos_token = vocabulary[special.eos]
    config.decoder_start_token = vocabulary[special.bos]  # ours starts from BOS, not from Marian's zero embedding
    config.add_source_bos = False
    config.add_source_eos = True  # sources end with EOS, as ours
    config.layer_norm_epsilon = 1e-5  # torch's nn.LayerNorm default, ours
    return spec


def convert_ct2(spec: Any, out: Path, quantization: str | None = None) -> None:
    """Write `spec` into `out` (which must not exist) with CTranslate2's own converter machinery (validation, aliasing
    of the tied weights, quantization)."""
    converter: Any = require("ct2").converters.Converter

    class Ours(converter):  # our spec, CTranslate2's convert(): validate, optimize, save
        def _load(self):
            return spec

    Ours().convert(str(out), quantization=quantization)


def ct2_log_probs(
    model_dir: Path, source: list[list[str]], target: list[list[str]], compute_type: str = "float32"
) -> list[list[float]]:
    """Each target token's log-probability (its EOS last) under the CTranslate2 model in `model_dir`, the target
    decoded from BOS after the source (+ EOS): `Translator.score_batch`, computing in `compute_type` (float32, or
    int8 for a quantized model's own arithmetic)."""
    ctranslate2 = require("ct2")
    translator = ctranslate2.Translator(str(model_dir), device="cpu", compute_type=compute_type)
    return [list(r.log_probs) for r in translator.score_batch(source, target)]


def our_log_probs(model: Transformer, src: torch.Tensor, tgt: torch.Tensor, special: Special = Special()) -> list:
    """Each target token's log-probability (EOS after the last one) under `model`: the teacher-forced log-softmax
    of `tgt` (B, T, without BOS or EOS, unpadded) after the right-padded `src` (B, S)."""
    import torch

    bos = torch.full((tgt.size(0), 1), special.bos, dtype=torch.long)
    eos = torch.full((tgt.size(0), 1), special.eos, dtype=torch.long)
    tgt_in, tgt_out = torch.cat([bos, tgt], dim=1), torch.cat([tgt, eos], dim=1)
    was_training = model.training
    model.eval()
    try:
        with torch.inference_mode():
            lprobs = model.cpu().float()(src, tgt_in).double().log_softmax(dim=-1)
    finally:
        model.train(was_training)
    return lprobs.gather(-1, tgt_out[..., None])[..., 0].tolist()


def verify_ct2(model: Transformer, model_dir: Path, pieces: Sequence[str], special: Special = Special()) -> float:
    """The largest |log-probability| gap of the CTranslate2 model in `model_dir` to `model` on `probe_batch`'s
    first source and its targets (float32); a RuntimeError above TOLERANCE times the largest |log-probability|."""
    import torch

    src, tgt = probe_batch(len(pieces), special)
    src, tgt = src[:1], tgt[:, 1:]  # one unpadded source; targets without BOS
    ours = our_log_probs(model, src.expand(tgt.size(0), -1), tgt, special)
    source = [[pieces[i] for i in src[0, :-1].tolist()]] * tgt.size(0)  # CTranslate2 appends EOS itself
    theirs = ct2_log_probs(model_dir, source, [[pieces[i] for i in row] for row in tgt.tolist()])
    a, b = torch.tensor(ours, dtype=torch.float64), torch.tensor(theirs, dtype=torch.float64)
    gap = (a - b).abs().max().item()
    if not gap <= TOLERANCE * max(1.0, a.abs().max().item()):
        raise RuntimeError(f"the CTranslate2 model's log-probabilities differ from ours by up to {gap:.3g}")
    return gap


def export_ct2(
    model: Transformer, spm_model: Path, out: Path, *, quantization: str | None = None, **card: Any
) -> float:
    """Write the CTranslate2 model of `model` into `out` (which must not exist), spm.model beside it; returns the
    float32 model's probe gap (`verify_ct2`), checked before a quantized model is written."""
    import sentencepiece as spm

    sp = spm.SentencePieceProcessor(model_file=str(spm_model))
    pieces = [sp.id_to_piece(i) for i in range(sp.get_piece_size())]
    with tempfile.TemporaryDirectory() as tmp:
        exact = Path(tmp) / "float32"
        convert_ct2(ct2_spec(model, pieces), exact)
        gap = verify_ct2(model, exact, pieces)
        if quantization in (None, "float32"):
            shutil.copytree(exact, out)
        else:
            convert_ct2(ct2_spec(model, pieces), out, quantization)
    shutil.copyfile(spm_model, out / folders.TOKENIZER)
    card_text = model_card(model.cfg, target="ct2", probe_gap=gap, quantization=quantization, **card)
    (out / "README.md").write_text(card_text, encoding="utf-8")
    return gap
