"""--to hf: a Hugging Face transformers MarianMTModel folder (docs/export.md)."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

from aiayn.export.card import model_card
from aiayn.export.targets import TOLERANCE, Special, check_exportable, probe_batch, relative_gap, require
from aiayn.model.config import ModelConfig

if TYPE_CHECKING:
    import torch

    from aiayn.model.transformer import Transformer


def marian_order(d_model: int) -> torch.Tensor:
    """The permutation of the model axis from ours to Marian's: Marian's column k is our column order[k]. Our
    positions interleave sin (column 2i) and cos (2i+1) of frequency i; Marian's first half is sin of frequency k,
    its second half cos: order = [0, 2, 4, ..., 1, 3, 5, ...]."""
    import torch

    return torch.cat([torch.arange(0, d_model, 2), torch.arange(1, d_model, 2)])


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
    length^alpha, ours by GNMT's ((5 + length) / 6)^alpha unless decode.length_norm=power), EOS forced where the
    decoder's positions end (ours stops there too: at most max_positions - 1 tokens and EOS), PAD and BOS never
    generated (as ours, docs/departures.md#decode-special-tokens). transformers has no per-sentence limit (ours: source
    length + max_len_b): give max_new_tokens for one."""
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
