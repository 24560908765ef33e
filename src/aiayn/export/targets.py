"""What each export target needs and can compute exactly, and the probe an export is checked on."""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from types import ModuleType
from typing import TYPE_CHECKING

from aiayn.model.config import ModelConfig

if TYPE_CHECKING:
    import torch

TARGETS = {"hf": "transformers", "ct2": "ctranslate2"}  # --to -> the package it needs
EXTRA = 'pip install -e ".[export]"'
# An exported model's teacher-forced outputs must match ours within this, relative to the largest |logit| (float32
# arithmetic in both: summation order differs, nothing else). Measured on the smoke run: ~1e-6.
TOLERANCE = 1e-4


def require(target: str) -> ModuleType:
    """The package an export target needs (transformers for hf, ctranslate2 for ct2), or an ImportError naming it
    and the extra that installs it."""
    package = TARGETS[target]
    try:
        module = importlib.import_module(package)
    except ImportError as err:
        raise ImportError(
            f"--to {target} needs the `{package}` package, which is not installed ({err}); install the export "
            f"extra: {EXTRA}"
        ) from err
    if package == "transformers":  # its weight-loading bars would fill an export's output (it prints what it wrote)
        module.utils.logging.disable_progress_bar()
    return module


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


@dataclass(frozen=True)
class Special:
    """The special token ids (aiayn.data.tokenizer's): PAD, UNK, BOS (the decoder's start), EOS."""

    pad: int = 0
    unk: int = 1
    bos: int = 2
    eos: int = 3


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
