"""Forced decoding: a given target's log-probability under the model (fairseq-generate --score-reference,
marian-scorer) and the encoder-decoder attention it was produced with (alignments), batched like search.

A target is scored as the search would have produced it: BOS, its tokens, then EOS, each token's log-probability
the log-softmax of the teacher-forced logits (the same values the search sums, so a hypothesis's `logprob` equals its
forced score up to float rounding). An ensemble's is the mean of its models' per-token log-probabilities, as its
search takes them (aiayn.decode.step.EnsembleStepper).

Dimensions: B pairs in a batch, S source length, T target length with EOS, H heads.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

from aiayn.decode.search import Tokenizer, batch_by_length, pad_batch, source_ids
from aiayn.decode.step import Models, members
from aiayn.model.capture import capture_attention
from aiayn.model.masks import CAUSAL, src_mask


@dataclass(frozen=True)
class Score:
    """A target's log-probability given its source: `logprob` summed over its `tokens` subword tokens, EOS
    counted."""

    logprob: float
    tokens: int

    @property
    def mean(self) -> float:
        """Log-probability per token."""
        return self.logprob / self.tokens

    @property
    def ppl(self) -> float:
        """Perplexity per token, exp(-mean)."""
        return math.exp(-self.mean)


@dataclass(frozen=True)
class Alignment:
    """Encoder-decoder attention of one pair: `weights[t][s]`, how much target token t (its EOS last) attended to
    source token s (its EOS last) when it was predicted, in one layer (one head, or the mean of the heads);
    `hard` the (s, t) pairs of each target token's most attended source token, EOS on either side left out.
    Attention, not alignment: it is what the model looked at, which need not be what a word translates."""

    weights: list[list[float]]
    hard: list[tuple[int, int]]

    def pharaoh(self) -> str:
        """The hard pairs as "s-t" tokens (the Pharaoh format of fast_align and fairseq), 0-based subword indices."""
        return " ".join(f"{s}-{t}" for s, t in self.hard)


def target_ids(tokenizer: Tokenizer, targets: Sequence[str | Sequence[int]], max_positions: int) -> list[list[int]]:
    """Targets (text, or token ids without BOS/EOS, such as a hypothesis's) as token ids, refused when one does not
    fit the decoder's positions (BOS, its tokens, then EOS at the last position)."""
    texts = [i for i, t in enumerate(targets) if isinstance(t, str)]
    encoded = dict(zip(texts, tokenizer.encode([str(targets[i]) for i in texts]))) if texts else {}
    ids = [encoded[i] if i in encoded else [int(x) for x in t] for i, t in enumerate(targets)]
    for line, seq in enumerate(ids, start=1):
        if len(seq) + 1 > max_positions - 1:
            raise ValueError(
                f"target line {line} has {len(seq)} subword tokens; the model's positions (max_positions="
                f"{max_positions}) hold at most {max_positions - 2}"
            )
    return ids


def _pairs(model: Models, tokenizer: Tokenizer, sources: list[str], targets: Sequence[str | Sequence[int]]):
    if len(sources) != len(targets):
        raise ValueError(f"{len(sources)} source lines but {len(targets)} target lines: give one target per source")
    models = members(model)
    positions = min(m.cfg.max_positions for m in models)
    return models, source_ids(tokenizer, sources, positions), target_ids(tokenizer, targets, positions)


def _teacher_forced(src: list[list[int]], tgt: list[list[int]], tokenizer: Tokenizer, device) -> tuple[Tensor, ...]:
    """(src (B, S), tgt_in (B, T) BOS first, tgt_out (B, T) EOS last), right-padded."""
    pad = tokenizer.pad_id
    return (
        pad_batch(src, pad, device),
        pad_batch([[tokenizer.bos_id, *t] for t in tgt], pad, device),
        pad_batch([[*t, tokenizer.eos_id] for t in tgt], pad, device),
    )


def _batches(src_ids: list[list[int]], tgt_ids: list[list[int]], batch_tokens: int) -> list[list[int]]:
    # Pairs whose source has no tokens are not scored (their source is empty, as in search); the rest by length.
    todo = [i for i, s in enumerate(src_ids) if s]
    longest = [max(len(src_ids[i]), len(tgt_ids[i]) + 1) for i in todo]
    return [[todo[i] for i in group] for group in batch_by_length(longest, batch_tokens)]


def score(
    model: Models,
    tokenizer: Tokenizer,
    sources: list[str],
    targets: Sequence[str | Sequence[int]],
    *,
    batch_tokens: int = 4096,
    device: torch.device | str | None = None,
) -> list[Score | None]:
    """Each target's log-probability given its source (`Score`), in input order; None for a pair whose source has
    no tokens (the search translates it to "" without the model). A target is a line of text or token ids."""
    models, src_ids, tgt_ids = _pairs(model, tokenizer, sources, targets)
    device = device or next(models[0].parameters()).device
    out: list[Score | None] = [None] * len(sources)
    training = [m.training for m in models]
    try:
        for m in models:
            m.eval()
        with torch.inference_mode():
            for batch in _batches(src_ids, tgt_ids, batch_tokens):
                src, tgt_in, tgt_out = _teacher_forced(
                    [src_ids[i] for i in batch], [tgt_ids[i] for i in batch], tokenizer, device
                )
                lprobs = torch.stack(
                    [m(src, tgt_in).float().log_softmax(-1).gather(-1, tgt_out[..., None])[..., 0] for m in models]
                ).mean(0)  # (B, T)
                real = tgt_out != tokenizer.pad_id
                sums, counts = lprobs.masked_fill(~real, 0.0).sum(1).tolist(), real.sum(1).tolist()
                for i, total, n in zip(batch, sums, counts):
                    out[i] = Score(float(total), int(n))
    finally:
        for m, was in zip(models, training):
            m.train(was)
    return out


def align(
    model: Models,
    tokenizer: Tokenizer,
    sources: list[str],
    targets: list[str],
    *,
    layer: int = -1,
    head: int | None = None,
    batch_tokens: int = 4096,
    device: torch.device | str | None = None,
) -> list[Alignment | None]:
    """The encoder-decoder attention of decoder layer `layer` (Python indexing: -1 the last) and `head` (None: the
    mean over heads) while each target was forced through the first model; None for a pair whose source has no
    tokens."""
    models, src_ids, tgt_ids = _pairs(model, tokenizer, sources, targets)
    first = models[0]
    n_layers, n_heads = len(first.decoder), first.cfg.n_heads
    if not -n_layers <= layer < n_layers:
        raise ValueError(f"layer {layer}: the decoder has layers 0..{n_layers - 1} (or -1 for the last)")
    if head is not None and not 0 <= head < n_heads:
        raise ValueError(f"head {head}: the layer has heads 0..{n_heads - 1}")
    device = device or next(first.parameters()).device
    out: list[Alignment | None] = [None] * len(sources)
    was = first.training
    try:
        first.eval()
        with torch.inference_mode():
            for batch in _batches(src_ids, tgt_ids, batch_tokens):
                src, tgt_in, _ = _teacher_forced(
                    [src_ids[i] for i in batch], [tgt_ids[i] for i in batch], tokenizer, device
                )
                with capture_attention(first) as record:
                    mask = src_mask(src, tokenizer.pad_id)
                    first.decoder_states(tgt_in, first.encode(src, mask), mask, CAUSAL)
                weights = record.cross[layer][0].float()  # (B, H, T, S)
                weights = weights.mean(1) if head is None else weights[:, head]  # (B, T, S)
                for row, i in enumerate(batch):
                    out[i] = _alignment(weights[row], len(src_ids[i]), len(tgt_ids[i]) + 1)
    finally:
        first.train(was)
    return out


def _alignment(weights: Tensor, src_len: int, tgt_len: int) -> Alignment:
    """One pair's (T, S) attention cut to its real tokens, and each target token's most attended source token
    (EOS on both sides left out of the hard pairs)."""
    soft = weights[:tgt_len, :src_len]
    hard: list[Any] = []
    if src_len > 1 and tgt_len > 1:
        best = soft[: tgt_len - 1, : src_len - 1].argmax(-1).tolist()
        hard = sorted((s, t) for t, s in enumerate(best))
    return Alignment([[round(w, 6) for w in row] for row in soft.tolist()], hard)
