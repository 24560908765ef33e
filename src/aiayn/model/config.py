"""The model's config, beside the model (as nanoGPT's GPTConfig beside GPT): the paper's base model as defaults, and
the one check of its values, which the Transformer runs when built and the pipeline before any work starts.

Plain dataclasses (aiayn.marks), no torch: the config layer imports this without importing the model.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from aiayn.marks import Sealable, check_values, choice, mark, relative


@dataclass
class ModelConfig(Sealable):
    """The paper's base model (Table 3, first row; section 3); scales resize it and rows change it.

    The switches below the sizes are what later work ablates; each defaults to the paper's choice.
    """

    n_layers: int = relative(6)  # N, encoder and decoder each
    d_model: int = relative(512)
    d_ff: int = relative(2048)
    n_heads: int = relative(8)  # h
    d_k: int = relative(64)
    d_v: int = relative(64)
    dropout: float = mark(0.1, unit=True)  # P_drop: residual and embedding dropout, section 5.4
    # Dropout on the attention weights; the paper has none (section 5.4), tensor2tensor and fairseq expose it.
    attention_dropout: float = mark(0.0, unit=True)
    # post: LayerNorm(x + Sublayer(x)) (section 3.1); pre: x + Sublayer(LayerNorm(x)) and a final LayerNorm after
    # each stack (Wang et al. 2019, "Learning Deep Transformer Models for Machine Translation").
    norm_position: str = choice("post", "pre")
    # all: one matrix for source and target embeddings and the pre-softmax projection (section 3.4); decoder: the
    # target embedding and the projection share one, the source has its own (fairseq's
    # share_decoder_input_output_embed); none: three matrices.
    share_embeddings: str = choice("all", "decoder", "none")
    activation: str = choice("relu", "gelu")  # of the feed-forward network, Eq. 2 (ReLU); GELU: Hendrycks & Gimpel
    # sinusoidal (section 3.5) | learned (Table 3 row E) | none | rotary (Su et al. 2021: queries and keys of
    # self-attention rotated by position, nothing added to the embeddings)
    pos_encoding: str = choice("sinusoidal", "learned", "none", "rotary")
    max_positions: int = mark(
        1024, at_least=1
    )  # table size of learned positions; sinusoids and rotations are computed to this length
    # Xavier gain of W_Q, W_K, W_V (the paper gives no init). Departure: see docs/departures.md#initialisation
    qkv_init_gain: float = mark(0.7071067811865476, positive=True)  # 1/sqrt(2), as nn.MultiheadAttention and fairseq


def recorded(values: Mapping[str, Any]) -> ModelConfig:
    """The ModelConfig a run recorded (the `model` group of its config.yaml), as this version reads it: a key this
    version no longer has is dropped, one it has added takes its default (the paper's choice, which every earlier
    run made). A record without the six sizes is refused (KeyError naming them)."""
    sizes = ("n_layers", "d_model", "d_ff", "n_heads", "d_k", "d_v")
    if missing := [k for k in sizes if k not in values]:
        raise KeyError(f"the recorded model config lacks {missing}")
    return ModelConfig(**{f.name: values[f.name] for f in dataclasses.fields(ModelConfig) if f.name in values})


def check(cfg: ModelConfig, vocab_size: int | None = None, pad_id: int | None = None, where: str = "model.") -> None:
    """Refuse values the model cannot be built with, naming the key (`where` + name): a value outside its set or
    range (aiayn.marks), an odd d_model for sinusoids or an odd d_k for rotary positions (they pair dimensions), a
    vocabulary that is not a positive integer, a padding id outside it."""
    check_values(cfg, ModelConfig, where)
    if cfg.pos_encoding == "sinusoidal" and cfg.d_model % 2:
        raise ValueError(f"{where}d_model={cfg.d_model} must be even for sinusoidal positions")
    if cfg.pos_encoding == "rotary" and cfg.d_k % 2:
        raise ValueError(
            f"{where}d_k={cfg.d_k} must be even for rotary positions, which rotate pairs of query/key dimensions"
        )
    if vocab_size is not None and (isinstance(vocab_size, bool) or not isinstance(vocab_size, int) or vocab_size < 1):
        raise ValueError(f"vocab_size={vocab_size!r} must be a positive integer")
    if pad_id is not None and vocab_size is not None and not 0 <= pad_id < vocab_size:
        raise ValueError(f"pad_id={pad_id} is outside the vocabulary [0, {vocab_size})")
