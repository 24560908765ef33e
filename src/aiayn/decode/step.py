"""One decoding step shared by greedy and beam search: next-token log-probabilities over `encode`/`decode`.

Dimensions: B sentences, N = B * beams rows being decoded, S source length, t target prefix length, V vocabulary.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Union

import torch
from torch import Tensor, nn

from aiayn.model.cache import KVCache
from aiayn.model.masks import causal_mask, src_mask

if TYPE_CHECKING:
    from aiayn.model.transformer import Transformer

# One model, or an ensemble: several that share a vocabulary and decode together (`stepper`).
Models = Union["Transformer", Sequence["Transformer"]]


def members(model: Models) -> list[Transformer]:
    """The models of `model`: itself, or each of an ensemble's (at least one)."""
    models = [model] if isinstance(model, nn.Module) else list(model)
    if not models:
        raise ValueError("an ensemble needs at least one model")
    return models


def max_output_lengths(src: Tensor, pad_id: int, max_len_b: int, max_length: int | None = None) -> Tensor:
    """Per-sentence output limit, section 6.1: input length + max_len_b tokens (EOS not counted), (B,), and at most
    `max_length` (None: no cap), the most the decoder's positions hold.

    The input length counts the non-pad source tokens, the source's EOS included (as tensor2tensor did).
    """
    return length_limits((src != pad_id).sum(dim=1), max_len_b, max_length)


def length_limits(lengths: Tensor, max_len_b: int, max_length: int | None = None) -> Tensor:
    """`max_output_lengths` of sources with these lengths (their EOS counted): lengths + max_len_b, at most
    `max_length`."""
    if max_len_b < 0:
        raise ValueError(f"max_len_b must be >= 0, got {max_len_b}")
    limits = lengths + max_len_b
    return limits if max_length is None else limits.clamp(max=max_length)


def force_eos(lprobs: Tensor, at_limit: Tensor, eos_id: int) -> Tensor:
    """Rows that reached their length limit may only emit EOS (keeping the model's EOS log-probability).

    In place on `lprobs` (N, V), by masks rather than by the rows' indices, so the host never waits for the device.
    """
    eos_lprob = lprobs[:, eos_id].clone()  # (N,)
    lprobs.masked_fill_(at_limit[:, None], -torch.inf)
    lprobs[:, eos_id] = eos_lprob
    return lprobs


class Stepper:
    """Holds the encoder output of the rows being decoded and scores the next token of each row's prefix.

    With `incremental=True` the decoder sees only the newest token and keeps earlier keys/values in a KVCache;
    otherwise it recomputes the whole prefix every step (the reference the cache must reproduce). The cache keeps
    the encoder output and its keys/values once per sentence, shared by the sentence's `repeats` rows (its beams).
    """

    def __init__(
        self, model: Transformer, src: Tensor, *, pad_id: int, bos_id: int, repeats: int, incremental: bool
    ) -> None:
        self.model = model
        self.pad_id = pad_id
        self.bos_id = bos_id
        mask = src_mask(src, pad_id)  # (B, 1, 1, S)
        memory = model.encode(src, mask)  # (B, S, d_model)
        self.cache: KVCache | None
        if incremental:
            self.cache = KVCache(group=repeats)
            self.memory, self.src_mask = memory, mask
        else:  # each sentence's rows are contiguous: row i * repeats + j is beam j of sentence i
            self.cache = None
            self.memory = memory.repeat_interleave(repeats, dim=0)  # (N, S, d_model)
            self.src_mask = mask.repeat_interleave(repeats, dim=0)  # (N, 1, 1, S)

    def log_probs(self, tokens: Tensor) -> Tensor:
        """Log-probabilities of the next token after each prefix `tokens` (N, t) (BOS first), float32 (N, V)."""
        if self.cache is not None:
            logits = self.model.decode(tokens[:, -1:], self.memory, self.src_mask, None, cache=self.cache)
        else:
            mask = causal_mask(tokens.size(1), tokens.device)  # (1, 1, t, t); prefixes never hold padding
            logits = self.model.decode(tokens, self.memory, self.src_mask, mask)
        lprobs = logits[:, -1].float().log_softmax(dim=-1)  # (N, V)
        # Padding and BOS are never valid outputs (fairseq masks padding the same way).
        # Departure: see docs/departures.md#decode-special-tokens
        lprobs[:, self.pad_id] = -torch.inf
        lprobs[:, self.bos_id] = -torch.inf
        return lprobs

    def select(self, index: Tensor, sentences: Tensor | None) -> None:
        """Keep rows `index` (reordered, repeated or dropped: beams follow their parents) of the sentences
        `sentences` (in the order `index` lists them; None: every sentence stays, its rows moving among its own)."""
        if self.cache is None:
            self.memory = self.memory.index_select(0, index)
            self.src_mask = self.src_mask.index_select(0, index)
            return
        self.cache.reorder(index, sentences)
        if sentences is not None:
            self.memory = self.memory.index_select(0, sentences)
            self.src_mask = self.src_mask.index_select(0, sentences)


class EnsembleStepper:
    """Several models decoding the same rows together, each with its own encoder output and cache: the next-token
    log-probabilities are the mean of theirs (a log-linear ensemble, as Marian's; fairseq and OpenNMT-py average
    probabilities instead), so an ensemble of one is that model."""

    def __init__(self, steppers: list[Stepper]) -> None:
        self.steppers = steppers

    def log_probs(self, tokens: Tensor) -> Tensor:
        """The mean over the models of `Stepper.log_probs`, (N, V)."""
        return torch.stack([s.log_probs(tokens) for s in self.steppers]).mean(dim=0)

    def select(self, index: Tensor, sentences: Tensor | None) -> None:
        for s in self.steppers:
            s.select(index, sentences)


def stepper(
    model: Models, src: Tensor, *, pad_id: int, bos_id: int, repeats: int, incremental: bool
) -> Stepper | EnsembleStepper:
    """A `Stepper` for one model, an `EnsembleStepper` over one Stepper per model for several."""
    models = members(model)
    steppers = [Stepper(m, src, pad_id=pad_id, bos_id=bos_id, repeats=repeats, incremental=incremental) for m in models]
    return steppers[0] if len(steppers) == 1 else EnsembleStepper(steppers)
