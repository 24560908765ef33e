"""Export a trained run as a Hugging Face MarianMTModel folder or a CTranslate2 model, exactly (docs/export.md).

Each computes the run's own function, not an approximation of it.

    python -m aiayn.export runs/base/seed1 exported/base-hf --to hf
    python -m aiayn.export runs/base/seed1 exported/base-ct2 --to ct2 --quantization int8
    python -m aiayn.export runs/base/seed1 exported/base-hf --to hf --average 1 --bpe data/bpe --force

The weights are those `python -m aiayn.translate` decodes with: the mean of the run's last `row.average_last`
checkpoints (Table 2's), or of the last K with --average K. Each export checks itself before it is written: the
exported model's teacher-forced outputs on a probe batch must equal ours (float32), or nothing is written.

--to hf: MarianMTModel is our architecture (post-LN, sinusoidal positions, sqrt(d_model) embedding scale, biases,
LayerNorm eps 1e-5, tied output projection) once one permutation of the model axis turns our interleaved sin/cos
position columns into Marian's [sin | cos] halves; every d_model-indexed axis of every weight is permuted with it, which
LayerNorm and the residual stream commute with. The folder also holds a MarianTokenizer over our sentencepiece model
whose ids are ours, a generation config (the run's beam size and alpha, PAD and BOS never generated) and a
model card.

--to ct2: a CTranslate2 TransformerSpec written by our own converter (`ct2_spec`): our position table given
explicitly (no permutation), post- or pre-LN, decoding from our BOS `<s>`, vocabulary = our sentencepiece pieces;
`spm.model` is copied beside it for tokenising. --quantization int8 (or another CTranslate2 type) quantizes on save.

Refused, naming the setting: anything these formats cannot compute exactly (`unmappable`).
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib
import json
import logging
import os
import re
import shutil
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any

from aiayn import runspec
from aiayn.io import CHECKOUT
from aiayn.model.config import ModelConfig

if TYPE_CHECKING:
    import torch

    from aiayn.config.schema import Config
    from aiayn.model.transformer import Transformer

log = logging.getLogger(__name__)

TARGETS = {"hf": "transformers", "ct2": "ctranslate2"}  # --to -> the package it needs
EXTRA = 'pip install -e ".[export]"'
# An exported model's teacher-forced outputs must match ours within this, relative to the largest |logit| (float32
# arithmetic in both: summation order differs, nothing else). Measured on the smoke run: ~1e-6.
TOLERANCE = 1e-4
DEPARTURES = CHECKOUT / "docs" / "departures.md"


def require(target: str) -> ModuleType:
    """The package an export target needs (transformers for hf, ctranslate2 for ct2), or an ImportError naming it
    and the extra that installs it."""
    package = TARGETS[target]
    try:
        return importlib.import_module(package)
    except ImportError as err:
        raise ImportError(
            f"--to {target} needs the `{package}` package, which is not installed ({err}); install the export "
            f"extra: {EXTRA}"
        ) from err


# ---------------------------------------------------------------------------------------------------------------------
# What can be exported


def unmappable(cfg: ModelConfig, target: str) -> list[str]:
    """The settings of `cfg` that `target` ("hf" or "ct2") cannot compute exactly, each naming its key; [] when it
    can.

    Both: heads that do not split d_model (Marian and our converter take d_k = d_v = d_model / n_heads), an activation
    other than ReLU or exact (erf) GELU. hf also: pre-LN (Marian has no pre-norm form), positions other than
    sinusoidal (Marian recomputes its sinusoids on load: no learned table, no rotary, no switch to turn them off). ct2
    also: rotary positions (our rotation pairs are not mapped)."""
    problems = []
    if cfg.d_k * cfg.n_heads != cfg.d_model:
        problems.append(
            f"model.d_k={cfg.d_k} with model.n_heads={cfg.n_heads}: d_k * n_heads must equal model.d_model="
            f"{cfg.d_model}"
        )
    if cfg.d_v * cfg.n_heads != cfg.d_model:
        problems.append(
            f"model.d_v={cfg.d_v} with model.n_heads={cfg.n_heads}: d_v * n_heads must equal model.d_model="
            f"{cfg.d_model}"
        )
    if cfg.activation not in ("relu", "gelu"):
        problems.append(f"model.activation={cfg.activation}: only relu and gelu (erf) are exported")
    if target == "hf":
        if cfg.norm_position != "post":
            problems.append(f"model.norm_position={cfg.norm_position}: MarianMTModel is post-LN only")
        if cfg.pos_encoding != "sinusoidal":
            problems.append(
                f"model.pos_encoding={cfg.pos_encoding}: MarianMTModel adds sinusoidal positions only (it recomputes "
                f"them on load)"
            )
    elif target == "ct2":
        if cfg.pos_encoding == "rotary":
            problems.append("model.pos_encoding=rotary: not exported to CTranslate2 (use sinusoidal, learned or none)")
    else:
        raise ValueError(f"unknown export target {target!r}: one of {sorted(TARGETS)}")
    return problems


def check_exportable(cfg: ModelConfig, target: str) -> None:
    """Refuse (ValueError naming each setting) a model `unmappable` finds settings of."""
    if problems := unmappable(cfg, target):
        name = "MarianMTModel (--to hf)" if target == "hf" else "CTranslate2 (--to ct2)"
        raise ValueError(f"this run cannot be exported exactly to {name}: " + "; ".join(problems))


# ---------------------------------------------------------------------------------------------------------------------
# Hugging Face transformers: MarianMTModel


def marian_order(d_model: int) -> torch.Tensor:
    """The permutation of the model axis from ours to Marian's: Marian's column k is our column order[k]. Our
    positions interleave sin (column 2i) and cos (2i+1) of frequency i; Marian's first half is sin of frequency k,
    its second half cos: order = [0, 2, 4, ..., 1, 3, 5, ...]."""
    import torch

    return torch.cat([torch.arange(0, d_model, 2), torch.arange(1, d_model, 2)])


@dataclass(frozen=True)
class Special:
    """The special token ids (aiayn.data.tokenizer's): PAD, UNK, BOS (the decoder's start), EOS."""

    pad: int = 0
    unk: int = 1
    bos: int = 2
    eos: int = 3


def marian_config(cfg: ModelConfig, vocab_size: int, special: Special = Special()) -> Any:
    """The MarianConfig of our architecture (check_exportable(cfg, "hf") first)."""
    transformers = require("hf")
    return transformers.MarianConfig(
        vocab_size=vocab_size,
        decoder_vocab_size=vocab_size,
        d_model=cfg.d_model,
        encoder_layers=cfg.n_layers,
        decoder_layers=cfg.n_layers,
        encoder_attention_heads=cfg.n_heads,
        decoder_attention_heads=cfg.n_heads,
        encoder_ffn_dim=cfg.d_ff,
        decoder_ffn_dim=cfg.d_ff,
        # transformers' "gelu" is torch's exact (erf) GELU, ours too (aiayn.model.layers.FeedForward).
        activation_function=cfg.activation,
        dropout=cfg.dropout,  # residual and embedding dropout, as ours
        attention_dropout=cfg.attention_dropout,
        activation_dropout=0.0,  # ours has none inside the feed-forward
        max_position_embeddings=cfg.max_positions,
        scale_embedding=True,  # x sqrt(d_model), section 3.4
        share_encoder_decoder_embeddings=cfg.share_embeddings == "all",
        tie_word_embeddings=cfg.share_embeddings != "none",
        pad_token_id=special.pad,
        eos_token_id=special.eos,
        bos_token_id=special.bos,
        decoder_start_token_id=special.bos,  # ours decodes from BOS (Marian's own models start from PAD)
        forced_eos_token_id=special.eos,
    )


def marian_generation_config(
    cfg: ModelConfig, special: Special = Special(), beam_size: int = 4, length_penalty: float = 0.6
) -> Any:
    """Generation defaults: the run's beam size and alpha (transformers divides a hypothesis' log-probability by
    length^alpha, ours by GNMT's ((5 + length) / 6)^alpha), EOS forced where the decoder's positions end (ours stops
    there too: at most max_positions - 1 tokens and EOS), PAD and BOS never generated (as ours,
    docs/departures.md#decode-special-tokens). transformers has no per-sentence limit (ours: source length + max_len_b):
    give max_new_tokens for one."""
    transformers = require("hf")
    return transformers.GenerationConfig(
        decoder_start_token_id=special.bos,
        bos_token_id=special.bos,
        eos_token_id=special.eos,
        pad_token_id=special.pad,
        forced_eos_token_id=special.eos,
        bad_words_ids=[[special.pad], [special.bos]],
        num_beams=beam_size,
        length_penalty=length_penalty,
        max_length=cfg.max_positions + 1,  # the decoder start token and at most max_positions new ones (EOS last)
    )


def marian_weights(model: Transformer, *, permute: bool = True) -> dict[str, torch.Tensor]:
    """Our weights under MarianMTModel's parameter names (every alias of a tied weight named), float32, with the
    model axis permuted by `marian_order` (permute=False: as they are, which is not our function: the negative
    control of the tests)."""
    import torch

    cfg = model.cfg
    order = marian_order(cfg.d_model) if permute else torch.arange(cfg.d_model)
    hk, hv = cfg.n_heads * cfg.d_k, cfg.n_heads * cfg.d_v

    def t(x: torch.Tensor) -> torch.Tensor:
        return x.detach().to(device="cpu", dtype=torch.float32).clone()

    def rows(x: torch.Tensor) -> torch.Tensor:  # an output (d_model) axis first: a bias, LayerNorm, out rows
        return t(x)[order]

    def cols(x: torch.Tensor) -> torch.Tensor:  # an input (d_model) axis last
        return t(x)[..., order]

    out: dict[str, torch.Tensor] = {}

    def attention(prefix: str, attn) -> None:
        # w_qkv's rows: [W_Q (H*d_k) | W_K (H*d_k) | W_V (H*d_v)], each head-major (h0's d_k rows, then h1's, ...;
        # aiayn.model.attention.MultiHeadAttention._split), as Marian's q_proj/k_proj/v_proj.
        weight, bias = attn.w_qkv.weight, attn.w_qkv.bias
        for name, sl in (
            ("q_proj", slice(0, hk)),
            ("k_proj", slice(hk, 2 * hk)),
            ("v_proj", slice(2 * hk, 2 * hk + hv)),
        ):
            out[f"{prefix}.{name}.weight"] = cols(weight[sl])
            out[f"{prefix}.{name}.bias"] = t(bias[sl])
        out[f"{prefix}.out_proj.weight"] = rows(attn.w_o.weight)
        out[f"{prefix}.out_proj.bias"] = rows(attn.w_o.bias)

    def norm(prefix: str, layer_norm) -> None:
        out[f"{prefix}.weight"] = rows(layer_norm.weight)
        out[f"{prefix}.bias"] = rows(layer_norm.bias)

    def ffn(prefix: str, feed_forward) -> None:
        out[f"{prefix}.fc1.weight"] = cols(feed_forward.w_1.weight)
        out[f"{prefix}.fc1.bias"] = t(feed_forward.w_1.bias)
        out[f"{prefix}.fc2.weight"] = rows(feed_forward.w_2.weight)
        out[f"{prefix}.fc2.bias"] = rows(feed_forward.w_2.bias)

    target = cols(model.embedding.weight)
    source = target if model.src_embedding is None else cols(model.src_embedding.weight)
    if cfg.share_embeddings == "all":
        out["model.shared.weight"] = target
    out["model.encoder.embed_tokens.weight"] = source
    out["model.decoder.embed_tokens.weight"] = target
    out["lm_head.weight"] = cols(model.output_embedding.weight)
    for i, layer in enumerate(model.encoder):
        prefix = f"model.encoder.layers.{i}"
        attention(f"{prefix}.self_attn", layer.self_attn)
        norm(f"{prefix}.self_attn_layer_norm", layer.res_attn.norm)
        ffn(prefix, layer.ffn)
        norm(f"{prefix}.final_layer_norm", layer.res_ffn.norm)
    for i, layer in enumerate(model.decoder):
        prefix = f"model.decoder.layers.{i}"
        attention(f"{prefix}.self_attn", layer.self_attn)
        norm(f"{prefix}.self_attn_layer_norm", layer.res_self.norm)
        attention(f"{prefix}.encoder_attn", layer.cross_attn)
        norm(f"{prefix}.encoder_attn_layer_norm", layer.res_cross.norm)
        ffn(prefix, layer.ffn)
        norm(f"{prefix}.final_layer_norm", layer.res_ffn.norm)
    return out


def to_marian(model: Transformer, special: Special = Special(), *, permute: bool = True) -> Any:
    """A MarianMTModel (float32, eval mode) computing what `model` computes: `marian_weights` copied into every
    parameter but the position tables, which Marian computes itself (and which `permute` must turn ours into: checked,
    as every other parameter's being set)."""
    import torch

    transformers = require("hf")
    check_exportable(model.cfg, "hf")
    vocab_size = model.embedding.weight.size(0)
    hf = transformers.MarianMTModel(marian_config(model.cfg, vocab_size, special)).float().eval()
    weights = marian_weights(model, permute=permute)
    positions = ("model.encoder.embed_positions.weight", "model.decoder.embed_positions.weight")
    with torch.no_grad():
        for name, param in hf.named_parameters(remove_duplicate=False):
            if name in positions:
                if permute:  # Marian's own table is ours, permuted: the permutation's one check against Marian
                    ours = model.positions.table.detach().cpu().float()[:, marian_order(model.cfg.d_model)]
                    gap = (param - ours).abs().max().item()
                    if gap > 1e-5:
                        raise RuntimeError(f"Marian's sinusoids are not ours permuted (max difference {gap:.3g})")
                continue
            if name not in weights:
                raise RuntimeError(f"no value for MarianMTModel's {name}: this transformers version's layout differs")
            if tuple(param.shape) != tuple(weights[name].shape):
                raise RuntimeError(f"{name}: MarianMTModel's shape {tuple(param.shape)}, ours {weights[name].shape}")
            param.copy_(weights[name])
        for name, param in hf.named_parameters(remove_duplicate=False):  # a tie the copies above did not keep
            if name in weights and not torch.equal(param, weights[name]):
                raise RuntimeError(f"{name} is tied in MarianMTModel to a weight ours keeps apart")
        hf.final_logits_bias.zero_()
    return hf


def marian_logits(hf: Any, src: torch.Tensor, tgt_in: torch.Tensor, pad_id: int) -> torch.Tensor:
    """A MarianMTModel's teacher-forced logits (B, T, V) for right-padded src (B, S) and tgt_in (B, T) from BOS,
    as our `Transformer.forward` computes them."""
    import torch

    with torch.inference_mode():
        return hf(input_ids=src, attention_mask=(src != pad_id).long(), decoder_input_ids=tgt_in).logits


def probe_batch(vocab_size: int, special: Special = Special(), seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """A small fixed batch to check an export on: two right-padded sources ending in EOS, two targets from BOS."""
    import torch

    gen = torch.Generator().manual_seed(seed)
    first = 4 if vocab_size > 4 else 0
    src = torch.randint(first, vocab_size, (2, 9), generator=gen)
    src[:, -1] = special.eos
    src[1, 5] = special.eos
    src[1, 6:] = special.pad
    tgt = torch.randint(first, vocab_size, (2, 7), generator=gen)
    tgt[:, 0] = special.bos
    return src, tgt


def relative_gap(ours: torch.Tensor, theirs: torch.Tensor) -> float:
    """max |ours - theirs| / max |ours|."""
    return ((ours.double() - theirs.double()).abs().max() / ours.double().abs().max().clamp_min(1e-30)).item()


def verify_marian(model: Transformer, hf: Any, special: Special = Special()) -> float:
    """The relative logit gap (`relative_gap`) of `hf` to `model` on `probe_batch`; a RuntimeError above
    TOLERANCE."""
    import torch

    src, tgt = probe_batch(model.embedding.weight.size(0), special)
    was_training = model.training
    model.eval()
    try:
        with torch.inference_mode():
            ours = model.cpu().float()(src, tgt)
    finally:
        model.train(was_training)
    gap = relative_gap(ours, marian_logits(hf, src, tgt, special.pad))
    if not gap <= TOLERANCE:
        raise RuntimeError(f"the MarianMTModel's logits differ from ours by {gap:.3g} (relative) > {TOLERANCE}")
    return gap


def write_marian_tokenizer(spm_model: Path, out: Path, *, max_positions: int, src_lang: str, tgt_lang: str) -> None:
    """A MarianTokenizer in `out` whose ids are ours: source.spm and target.spm our joint sentencepiece model,
    vocab.json each of its pieces -> its id. It appends EOS to a source as ours does."""
    import sentencepiece as spm

    transformers = require("hf")
    sp = spm.SentencePieceProcessor(model_file=str(spm_model))
    vocab = {sp.id_to_piece(i): i for i in range(sp.get_piece_size())}
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "vocab.json").write_text(json.dumps(vocab, ensure_ascii=False, indent=1), encoding="utf-8")
        tokenizer = transformers.MarianTokenizer(
            source_spm=str(spm_model),
            target_spm=str(spm_model),
            vocab=str(Path(tmp) / "vocab.json"),
            source_lang=src_lang,
            target_lang=tgt_lang,
            unk_token=sp.id_to_piece(sp.unk_id()),
            eos_token=sp.id_to_piece(sp.eos_id()),
            pad_token=sp.id_to_piece(sp.pad_id()),
            model_max_length=max_positions,  # truncation=True keeps max_positions - 1 pieces and EOS, as ours
            clean_up_tokenization_spaces=False,  # sentencepiece's detokenisation alone, as ours
        )
        tokenizer.save_pretrained(str(out))


def export_hf(
    model: Transformer, spm_model: Path, out: Path, *, beam_size: int = 4, length_penalty: float = 0.6, **card: Any
) -> float:
    """Write the MarianMTModel folder of `model` into `out` (which must not exist); returns the probe's relative
    logit gap (`verify_marian`). `card`: `model_card`'s keyword arguments."""
    special = Special()
    hf = to_marian(model, special)
    gap = verify_marian(model, hf, special)
    hf.generation_config = marian_generation_config(model.cfg, special, beam_size, length_penalty)
    hf.save_pretrained(str(out))
    write_marian_tokenizer(
        spm_model,
        out,
        max_positions=model.cfg.max_positions,
        src_lang=card.get("src_lang", "en"),
        tgt_lang=card.get("tgt_lang", "de"),
    )
    (out / "README.md").write_text(model_card(model.cfg, target="hf", probe_gap=gap, **card), encoding="utf-8")
    return gap


# ---------------------------------------------------------------------------------------------------------------------
# CTranslate2


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


def ct2_log_probs(model_dir: Path, source: list[list[str]], target: list[list[str]]) -> list[list[float]]:
    """Each target token's log-probability (its EOS last) under the CTranslate2 model in `model_dir`, the target
    decoded from BOS after the source (+ EOS): `Translator.score_batch`."""
    ctranslate2 = require("ct2")
    translator = ctranslate2.Translator(str(model_dir), device="cpu", compute_type="float32")
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
    shutil.copyfile(spm_model, out / runspec.TOKENIZER)
    card_text = model_card(model.cfg, target="ct2", probe_gap=gap, quantization=quantization, **card)
    (out / "README.md").write_text(card_text, encoding="utf-8")
    return gap


# ---------------------------------------------------------------------------------------------------------------------
# The model card


def departures() -> list[str]:
    """The section names of docs/departures.md (where the source tree has it), in its order."""
    if not DEPARTURES.is_file():
        return []
    return re.findall(r"^### (\S+)", DEPARTURES.read_text(encoding="utf-8"), flags=re.MULTILINE)


def find_evaluation(run_cfg: Config) -> Path | None:
    """The evaluate stage's eval.json of the run `run_cfg` (its config.yaml) describes, where it exists
    (aiayn.runspec.RunSpec.eval_dir, relative paths from the working folder)."""
    try:
        path = runspec.RunSpec.of(run_cfg).eval_dir / runspec.EVAL
    except (AttributeError, KeyError, TypeError, ValueError):
        return None
    return path if path.is_file() else None


def _section(name: str, section: dict[str, Any], exported: list[str]) -> str:
    same = "the exported weights" if list(section.get("checkpoints", [])) == exported else "other weights than these"
    ckpts = ", ".join(section.get("checkpoints", [])) or "?"
    text = f"- {name}: sacreBLEU {section.get('bleu', float('nan')):.2f} (`{section.get('sacrebleu_signature', '?')}`)"
    if "bleu_paper" in section:
        text += f", tokenized BLEU (the paper's) {section['bleu_paper']:.2f}"
    if "ppl" in section:
        text += f", PPL {section['ppl']:.4g}"
    name_of_set = section.get("set", {}).get("name", "?")
    return text + f"; {section.get('n_sentences', '?')} sentences of {name_of_set}; weights: mean of {ckpts} ({same})"


def model_card(
    cfg: ModelConfig,
    *,
    target: str,
    probe_gap: float,
    run: str = "?",
    row: str = "?",
    seed: Any = "?",
    variant: dict[str, Any] | None = None,
    checkpoints: Sequence[str] = (),
    evaluation: dict[str, Any] | None = None,
    evaluation_path: str | None = None,
    src_lang: str = "en",
    tgt_lang: str = "de",
    decode: dict[str, Any] | None = None,
    quantization: str | None = None,
) -> str:
    """README.md of an exported model: the run, the checkpoints averaged, its evaluation where one exists, what is
    exact and what differs, and how to use it."""
    decode = decode or {}
    beam, alpha = decode.get("beam_size", 4), decode.get("length_penalty", 0.6)
    max_len_b = decode.get("max_len_b", 50)
    variant_text = ", ".join(f"{k}={v}" for k, v in (variant or {}).items()) or "none (the row as it is)"
    lines = [
        "---",
        f"language: [{src_lang}, {tgt_lang}]",
        "library_name: transformers" if target == "hf" else "library_name: ctranslate2",
        "tags: [translation, transformer, aiayn]",
        "pipeline_tag: translation",
        "---",
        "",
        f"# aiayn `{row}` seed {seed}: {src_lang}→{tgt_lang} Transformer (Vaswani et al. 2017 reproduction)",
        "",
        f"Exported by `python -m aiayn.export --to {target}` from the run `{run}` (row `{row}`, seed {seed}, "
        f"variant: {variant_text}).",
        "",
        f"Weights: the mean of {len(checkpoints)} checkpoint(s): {', '.join(checkpoints) or '?'}.",
        "",
        f"Model: {cfg.n_layers} + {cfg.n_layers} layers, d_model {cfg.d_model}, d_ff {cfg.d_ff}, {cfg.n_heads} heads, "
        f"{cfg.activation}, {cfg.norm_position}-LN, {cfg.pos_encoding} positions, embeddings shared: "
        f"{cfg.share_embeddings}, at most {cfg.max_positions} positions.",
        "",
        "## Evaluation",
        "",
    ]
    if evaluation:
        lines.append(
            f"From the evaluate stage's `{evaluation_path}` (our beam search: {evaluation.get('strategy')} "
            f"{evaluation.get('beam_size')}, alpha {evaluation.get('length_penalty')}, "
            f"{evaluation.get('precision')}):"
        )
        lines.append("")
        for key, name in (("dev", "dev"), ("test", "test")):
            if isinstance(evaluation.get(key), dict):
                lines.append(_section(name, evaluation[key], list(checkpoints)))
    else:
        lines.append(
            "No evaluation of this run was found (run the evaluate stage: `dvc repro` or "
            "`python pipeline/evaluate.py` with its row and seed)."
        )
    lines += [
        "",
        "## What is exact, what differs",
        "",
        "The model departs from the paper as the project's `docs/departures.md` lists"
        + (f" ({', '.join(departures())})." if departures() else "."),
        "",
    ]
    if target == "hf":
        lines += [
            "This MarianMTModel computes the run's own function: its weights are ours with the model axis permuted "
            "(our interleaved sin/cos position columns become Marian's [sin | cos] halves), which LayerNorm and the "
            f"residual stream commute with. Teacher-forced logits matched ours to {probe_gap:.2g} (relative, float32) "
            "when this was written; the project's tests (tests/export) check that greedy search gives our greedy "
            "search's tokens.",
            "",
            "- Tokenizer: a MarianTokenizer over the run's sentencepiece model; ids are ours, EOS is appended to the "
            "source as ours. It differs from ours only on text containing the literal special pieces (`</s>`, "
            "`<unk>`, `<pad>`, read as those tokens), on a line starting with `>>xx<<` (Marian's language code: "
            "one `<unk>` token here), and on an empty line (ours translates it to an empty line without decoding). "
            "`decode(..., skip_special_tokens=True)` drops `<unk>`, which ours writes as ` ⁇ `.",
            f"- Beam search: transformers scores a hypothesis by log P / length^alpha; ours by GNMT's "
            f"log P / ((5 + length) / 6)^alpha (docs/departures.md#decode-length-penalty), with its own early stop, "
            f"so beam outputs can differ. The generation defaults here are the run's beam {beam} and alpha {alpha}.",
            f"- Length: ours allows source length (its EOS counted) + {max_len_b} tokens per sentence; transformers "
            f"has no per-sentence limit: `max_length` here is the decoder's positions ({cfg.max_positions} tokens "
            "with EOS), or pass `max_new_tokens`. At the limit transformers forces EOS with score 0, ours keeps "
            "EOS's log-probability.",
            "- PAD and BOS are never generated (`bad_words_ids`), as ours.",
            "- transformers 5 removed the `translation` pipeline; tokenizer + `generate` + `batch_decode` is what it "
            "did.",
            "",
            "## Use",
            "",
            "```python",
            "from transformers import AutoTokenizer, MarianMTModel",
            "",
            'tokenizer = AutoTokenizer.from_pretrained("THIS_FOLDER")',
            'model = MarianMTModel.from_pretrained("THIS_FOLDER")',
            'batch = tokenizer(["A sentence."], return_tensors="pt", padding=True, truncation=True)',
            "print(tokenizer.batch_decode(model.generate(**batch), skip_special_tokens=True))",
            "```",
        ]
    else:
        lines += [
            "This CTranslate2 model computes the run's own function: our position table is given explicitly, "
            "decoding starts from our BOS `<s>`, sources get our EOS `</s>` appended "
            f"(`add_source_eos`). Float32 log-probabilities matched ours to {probe_gap:.2g} when this was written; "
            "the project's tests (tests/export) check that greedy search gives our greedy search's tokens."
            + (f" The weights here are quantized ({quantization}): close to ours, not equal." if quantization else ""),
            "",
            f"- Beam search: CTranslate2 normalises by length^length_penalty; ours by GNMT's ((5 + length) / 6)^alpha, "
            f"with its own early stop, so beam outputs can differ (ours: beam {beam}, alpha {alpha}).",
            f"- Length: ours allows source length (its EOS counted) + {max_len_b} tokens per sentence, then only "
            "EOS: give that as `max_decoding_length` (CTranslate2 counts the tokens before EOS). A source longer "
            "than max_positions - 1 pieces must be cut by the caller (ours keeps its first max_positions - 1).",
            '- Pass `suppress_sequences=[["<pad>"], ["<s>"]]`: ours never generates PAD or BOS.',
            "",
            "## Use",
            "",
            "```python",
            "import ctranslate2, sentencepiece",
            "",
            f'sp = sentencepiece.SentencePieceProcessor(model_file="THIS_FOLDER/{runspec.TOKENIZER}")',
            'translator = ctranslate2.Translator("THIS_FOLDER")',
            'pieces = sp.encode(["A sentence."], out_type=str)',
            'result = translator.translate_batch(pieces, beam_size=4, suppress_sequences=[["<pad>"], ["<s>"]])',
            "print(sp.decode([r.hypotheses[0] for r in result]))",
            "```",
        ]
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------------------------------------------------------------
# The command


def export_run(
    run_dir: Path,
    out: Path,
    target: str,
    *,
    average: int | None = None,
    bpe_dir: Path | None = None,
    quantization: str | None = None,
    force: bool = False,
) -> float:
    """Export the finished run in `run_dir` (aiayn.eval.trained.open_run: its averaged weights and tokenizer) to
    `out` as `target` ("hf" or "ct2"); returns the export's probe gap. `out` must not exist unless `force`, which
    replaces it; nothing is written to `out` unless the export checked out."""
    require(target)
    if target != "ct2" and quantization:
        raise ValueError("--quantization is for --to ct2 (a MarianMTModel folder is written in float32)")
    out = Path(out)
    if out.exists() and not force and (not out.is_dir() or any(out.iterdir())):
        raise FileExistsError(f"{out} exists; give another folder, or --force to replace it")
    from aiayn.eval.trained import finished_run, open_run

    check_exportable(finished_run(run_dir).model, target)
    opened = open_run(run_dir, average=average, bpe_dir=bpe_dir)
    model = opened.model.cpu().float().eval()
    spm_model = Path(opened.cfg.paths.bpe if bpe_dir is None else bpe_dir) / runspec.TOKENIZER
    evaluation_path = find_evaluation(opened.cfg)
    card: dict[str, Any] = dict(
        run=str(run_dir),
        row=str(opened.cfg.row.name),
        seed=opened.cfg.seed,
        variant=dict(opened.cfg.variant),
        checkpoints=[p.name for p in opened.checkpoints],
        evaluation=json.loads(evaluation_path.read_text(encoding="utf-8")) if evaluation_path else None,
        evaluation_path=str(evaluation_path) if evaluation_path else None,
        src_lang=opened.cfg.data.src_lang,
        tgt_lang=opened.cfg.data.tgt_lang,
        decode=dataclasses.asdict(opened.cfg.decode),
    )
    out.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(dir=out.parent, prefix=f".{out.name}.export-"))
    try:
        written = staging / "model"
        if target == "hf":
            gap = export_hf(
                model,
                spm_model,
                written,
                beam_size=int(opened.cfg.decode.beam_size),
                length_penalty=float(opened.cfg.decode.length_penalty),
                **card,
            )
        else:
            gap = export_ct2(model, spm_model, written, quantization=quantization, **card)
        _share(written)
        if out.exists():
            shutil.rmtree(out) if out.is_dir() else out.unlink()
        written.rename(out)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return gap


def _share(folder: Path) -> None:
    """Files and folders under `folder` readable as the umask allows (some writers leave a file 0600)."""
    umask = os.umask(0)
    os.umask(umask)
    for path in [folder, *folder.rglob("*")]:
        os.chmod(path, (0o777 if path.is_dir() else 0o666) & ~umask)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m aiayn.export", description=__doc__.splitlines()[0])
    parser.add_argument("run_dir", type=Path, help="a finished run folder, such as runs/base/seed1")
    parser.add_argument("out", type=Path, help="the folder to write (must not exist, unless --force)")
    parser.add_argument("--to", required=True, choices=sorted(TARGETS), help="hf: MarianMTModel; ct2: CTranslate2")
    parser.add_argument("--average", type=int, help="average the last K checkpoints (default: the row's average_last)")
    parser.add_argument("--bpe", type=Path, help="the bpe folder holding the run's spm.model (default: paths.bpe)")
    parser.add_argument("--quantization", help="--to ct2 only: CTranslate2's weight type, e.g. int8 (default: float32)")
    parser.add_argument("--force", action="store_true", help="replace OUT if it exists")
    args = parser.parse_args(argv)
    if args.average is not None and args.average < 1:
        parser.error("--average: give a number of 1 or more")
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s: %(message)s", stream=sys.stderr)
    try:
        gap = export_run(
            args.run_dir,
            args.out,
            args.to,
            average=args.average,
            bpe_dir=args.bpe,
            quantization=args.quantization,
            force=args.force,
        )
    except (FileNotFoundError, FileExistsError, ValueError, ImportError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    what = "log-probability" if args.to == "ct2" else "relative logit"
    print(f"{args.out}: exported ({what} gap to ours on the probe batch {gap:.2g}, float32)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
