"""Text in, text out: tokenise, batch by length, search, detokenise, in the caller's sentence order."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Sequence
from typing import Any, Protocol

import torch
from torch import Tensor

from aiayn.config.schema import DECODE_STRATEGIES
from aiayn.decode.beam import Hypothesis, beam_search
from aiayn.decode.greedy import greedy_search
from aiayn.decode.step import Models, length_limits, members
from aiayn.progress import Progress

STRATEGIES = DECODE_STRATEGIES  # the schema's decode.strategy

log = logging.getLogger(__name__)


class Tokenizer(Protocol):
    """What `translate` needs from the project's tokenizer wrapper."""

    pad_id: int
    bos_id: int
    eos_id: int

    @property
    def vocab_size(self) -> int: ...

    def encode(self, lines: list[str]) -> list[list[int]]: ...

    def decode(self, ids: list[list[int]]) -> list[str]: ...


def batch_by_length(lengths: Sequence[int], batch_tokens: int) -> list[list[int]]:
    """Indices grouped into batches of similar length whose padded size (count x longest) fits batch_tokens.

    A sentence longer than batch_tokens gets a batch of its own rather than being dropped.
    """
    if batch_tokens < 1:
        raise ValueError(f"batch_tokens must be >= 1, got {batch_tokens}")
    batches: list[list[int]] = []
    current: list[int] = []
    for index in sorted(range(len(lengths)), key=lambda i: lengths[i]):
        # Sorted ascending, so the newcomer is the longest of the batch.
        if current and (len(current) + 1) * lengths[index] > batch_tokens:
            batches.append(current)
            current = []
        current.append(index)
    if current:
        batches.append(current)
    return batches


def source_ids(tokenizer: Tokenizer, sentences: list[str], max_positions: int) -> list[list[int]]:
    """Each sentence's subword ids ending in EOS, as the model trained on them ([] for a sentence with no tokens: an
    empty line). A sentence longer than the model's `max_positions` keeps its first max_positions - 1 tokens and
    EOS, with a warning naming it; it is translated, never dropped."""
    out = []
    for number, tokens in enumerate(tokenizer.encode(sentences), 1):
        if len(tokens) >= max_positions:
            log.warning(
                "sentence %d: %d subword tokens, more than the model's max_positions=%d hold with EOS; translating "
                "its first %d",
                number,
                len(tokens),
                max_positions,
                max_positions - 1,
            )
            tokens = tokens[: max_positions - 1]
        out.append(tokens + [tokenizer.eos_id] if tokens else [])
    return out


def output_limits(lengths: Sequence[int], max_len_b: int, max_positions: int) -> list[int]:
    """The most output tokens (EOS not counted) `search` allows sources of these subword lengths (without EOS):
    input length with its EOS + max_len_b, at most what the decoder's positions hold
    (aiayn.decode.step.length_limits; a source truncated by `source_ids` gets the same cap); 0 for an empty
    sentence, which is not searched."""
    limits = length_limits(torch.tensor([n + 1 for n in lengths], dtype=torch.long), max_len_b, max_positions - 1)
    return [limit if n else 0 for n, limit in zip(lengths, limits.tolist())]


def pad_batch(sequences: Sequence[Sequence[int]], pad_id: int, device: torch.device | str) -> Tensor:
    """Right-padded (B, S) long tensor of the given token id sequences."""
    width = max(len(seq) for seq in sequences)
    src = torch.full((len(sequences), width), pad_id, dtype=torch.long)
    for row, seq in enumerate(sequences):
        src[row, : len(seq)] = torch.tensor(seq, dtype=torch.long)
    return src.to(device)


def default_compact_every(device: torch.device | str) -> int:
    """Steps between compactions of the search's batch: every step on CPU, where reading the device costs nothing
    and every row saved counts; every 8 on an accelerator, where each read stalls the launch queue."""
    return 1 if torch.device(device).type == "cpu" else 8


def autocast(precision: str, device: torch.device | str) -> contextlib.AbstractContextManager:
    """The arithmetic a Lightning precision string asks for, as a context for decoding: autocast to bfloat16 or
    float16 for the half-precision ones ("bf16-mixed", "16-mixed"; "-true" ones too, decoding with float32 weights),
    none for "32-true" and "64-true". The search's scores stay float32 either way (aiayn.decode.step)."""
    device_type = torch.device(device).type
    if precision.startswith("bf16"):
        return torch.autocast(device_type, dtype=torch.bfloat16)
    if precision.startswith("16"):
        return torch.autocast(device_type, dtype=torch.float16)
    if precision.startswith(("32", "64")):
        return contextlib.nullcontext()
    raise ValueError(f"precision {precision!r}: expected a Lightning precision such as 32-true or bf16-mixed")


def search(
    model: Models,
    tokenizer: Tokenizer,
    sentences: list[str],
    *,
    strategy: str = "beam",
    beam_size: int,
    alpha: float,
    max_len_b: int,
    batch_tokens: int = 4096,
    device: torch.device | str | None = None,
    compact_every: int | None = None,
    progress: Progress | None = None,
    length_norm: str = "gnmt",
) -> list[list[int]]:
    """The output token ids (no BOS or EOS) of `sentences` (section 6.1 search), same order; the model is left as
    it was.

    `model` is one Transformer or an ensemble (a sequence of them sharing the tokenizer: aiayn.decode.step.stepper).
    Sources end with EOS as in training (`source_ids`: a sentence without tokens translates to "", a longer one than
    the model's positions is truncated); outputs stop where the decoder's positions end. `batch_tokens` bounds
    source tokens (with padding) per batch; `compact_every` is the search's (None: `default_compact_every(device)`);
    `progress` counts the sentences done.
    """
    if strategy not in STRATEGIES:
        raise ValueError(f"strategy must be one of {STRATEGIES}, got {strategy!r}")
    if strategy == "beam":
        found = search_nbest(
            model,
            tokenizer,
            sentences,
            beam_size=beam_size,
            alpha=alpha,
            max_len_b=max_len_b,
            batch_tokens=batch_tokens,
            device=device,
            compact_every=compact_every,
            progress=progress,
            length_norm=length_norm,
        )
        return [hyps[0].tokens if hyps else [] for hyps in found]
    return _batched(
        model,
        tokenizer,
        sentences,
        lambda src, special: greedy_search(model, src, max_len_b=max_len_b, **special),
        batch_tokens=batch_tokens,
        device=device,
        compact_every=compact_every,
        progress=progress,
    )


def search_nbest(
    model: Models,
    tokenizer: Tokenizer,
    sentences: list[str],
    *,
    beam_size: int,
    alpha: float,
    max_len_b: int,
    nbest: int | None = None,
    batch_tokens: int = 4096,
    device: torch.device | str | None = None,
    compact_every: int | None = None,
    progress: Progress | None = None,
    length_norm: str = "gnmt",
) -> list[list[Hypothesis]]:
    """The best `nbest` (None: `beam_size`, at most it) finished hypotheses of each sentence's beam search, best
    first, each with its log-probability and length-penalised score; [] for a sentence without tokens. The search
    is `search`'s, so the first hypothesis's tokens are `search`'s output."""
    keep = beam_size if nbest is None else nbest
    if not 1 <= keep <= beam_size:
        raise ValueError(f"nbest must be between 1 and the beam size {beam_size}, got {nbest}")
    found = _batched(
        model,
        tokenizer,
        sentences,
        lambda src, special: beam_search(
            model, src, beam_size=beam_size, alpha=alpha, max_len_b=max_len_b, length_norm=length_norm, **special
        ),
        batch_tokens=batch_tokens,
        device=device,
        compact_every=compact_every,
        progress=progress,
    )
    return [hyps[:keep] for hyps in found]


def _batched(
    model: Models,
    tokenizer: Tokenizer,
    sentences: list[str],
    run: Callable[[Tensor, dict[str, Any]], list[Any]],
    *,
    batch_tokens: int,
    device: torch.device | str | None,
    compact_every: int | None,
    progress: Progress | None,
) -> list[Any]:
    """`run(src, special)`'s per-sentence results over `sentences` batched by source tokens, in input order; [] for
    a sentence without tokens. The models are in eval mode meanwhile, then as they were."""
    models = members(model)
    if device is None:
        device = next(models[0].parameters()).device
    positions = min(m.cfg.max_positions for m in models)
    ids = source_ids(tokenizer, sentences, positions)
    special: dict[str, Any] = dict(
        bos_id=tokenizer.bos_id,
        eos_id=tokenizer.eos_id,
        pad_id=tokenizer.pad_id,
        compact_every=compact_every or default_compact_every(device),
        max_length=positions - 1,  # EOS after L tokens is chosen at position L (BOS at 0)
    )
    outputs: list[Any] = [[] for _ in sentences]
    todo = [i for i, seq in enumerate(ids) if seq]
    if progress is not None and len(todo) < len(ids):
        progress.update(len(ids) - len(todo))
    was_training = [m.training for m in models]
    for m in models:
        m.eval()
    try:
        with torch.inference_mode():
            for group in batch_by_length([len(ids[i]) for i in todo], batch_tokens):
                batch = [todo[i] for i in group]
                src = pad_batch([ids[i] for i in batch], tokenizer.pad_id, device)
                for index, result in zip(batch, run(src, special)):
                    outputs[index] = result
                if progress is not None:
                    progress.update(len(batch))
    finally:
        for m, training in zip(models, was_training):
            m.train(training)
    if progress is not None:
        progress.finish()
    return outputs


def translate(model: Models, tokenizer: Tokenizer, sentences: list[str], **search_args: Any) -> list[str]:
    """Detokenised translations of `sentences`, same order: `search` (whose arguments it takes) and the tokenizer's
    decode."""
    return tokenizer.decode(search(model, tokenizer, sentences, **search_args))
