"""Beam search with a length penalty (section 6.1's GNMT one by default), batched over sentences, over
`encode`/`decode`.

Dimensions: B sentences, n sentences in the batch being decoded, K beam size, V vocabulary, t output tokens so far,
L the longest output allowed plus one.
Each step extends the K live hypotheses of a sentence by every token and keeps the 2K best extensions: those
ending in EOS join the sentence's finished pool (its best K by length-penalised score are kept), the best K
others become the live hypotheses (as tensor2tensor's beam search did). A sentence stops when its pool holds K
hypotheses and no live one can still enter it, or when it reaches its length limit, where only EOS is allowed.

Everything stays on the device: the pools are tensors, and the host reads the search only when sentences that
stopped leave the batch, every `compact_every` steps (1: every step, which decodes only what is needed; on a GPU
a larger value trades a few wasted rows for no host round-trip on the other steps), and once at the end.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor

from aiayn.config.schema import LENGTH_NORMS
from aiayn.decode.step import Models, force_eos, max_output_lengths, stepper


@dataclass(frozen=True)
class Hypothesis:
    """A finished translation: `tokens` without BOS/EOS, `logprob` its sum, `score` = logprob / lp(|Y|)."""

    tokens: list[int]
    score: float
    logprob: float


@dataclass
class _Live:
    """The live hypotheses of the sentences in the batch; row i * K + j is beam j of sentence i."""

    tokens: Tensor  # (n * K, t + 1), BOS first
    logprob: Tensor  # (n, K)
    limits: Tensor  # (n,) maximum output tokens, EOS not counted
    sent_ids: Tensor  # (n,) index of each sentence in the input batch
    searching: Tensor  # (n,) bool: false once the sentence stopped (it leaves the batch at the next compaction)


@dataclass
class _Pools:
    """Each input sentence's finished hypotheses, its best K by score first; empty slots score -inf."""

    score: Tensor  # (B, K) float64: logprob / lp(|Y|), computed in double as a Python float would be
    logprob: Tensor  # (B, K) float32
    tokens: Tensor  # (B, K, L) long, without BOS and EOS; positions from `length` on are never read
    length: Tensor  # (B, K) long

    @classmethod
    def empty(cls, n_sent: int, beam_size: int, width: int, device: torch.device) -> _Pools:
        return cls(
            torch.full((n_sent, beam_size), -torch.inf, dtype=torch.float64, device=device),
            torch.full((n_sent, beam_size), -torch.inf, device=device),
            torch.zeros(n_sent, beam_size, width, dtype=torch.long, device=device),
            torch.zeros(n_sent, beam_size, dtype=torch.long, device=device),
        )

    def to_hypotheses(self) -> list[list[Hypothesis]]:
        """The pools as Python lists, best first, empty slots left out (the search's one read at the end)."""
        score, logprob, tokens, length = (t.tolist() for t in (self.score, self.logprob, self.tokens, self.length))
        return [
            [Hypothesis(tokens=toks[:n], score=s, logprob=lp) for s, lp, toks, n in zip(*sentence) if s != -torch.inf]
            for sentence in zip(score, logprob, tokens, length)
        ]


def length_penalty(length: int | Tensor, alpha: float, norm: str = "gnmt") -> float | Tensor:
    """The lp(Y) a hypothesis' log-probability is divided by, |Y| counting the EOS token: "gnmt",
    ((5 + |Y|) / 6) ** alpha (Wu et al. 2016, the paper's), or "power", |Y| ** alpha (fairseq's --lenpen,
    transformers' and CTranslate2's length_penalty). Both grow with |Y| for alpha >= 0, as the stopping bound needs.

    Departure: see docs/departures.md#decode-length-penalty
    """
    if norm == "gnmt":
        return ((5 + length) / 6) ** alpha
    if norm == "power":
        return length**alpha
    raise ValueError(f"length_norm must be one of {LENGTH_NORMS}, got {norm!r}")


def beam_search(
    model: Models,
    src: Tensor,
    *,
    beam_size: int,
    alpha: float,
    max_len_b: int,
    bos_id: int,
    eos_id: int,
    pad_id: int,
    incremental: bool = True,
    compact_every: int = 1,
    max_length: int | None = None,
    length_norm: str = "gnmt",
) -> list[list[Hypothesis]]:
    """Up to `beam_size` hypotheses per source sentence, best first, in input order (section 6.1).

    `src` (B, S) ends each sentence with EOS and is right-padded with `pad_id`; output is limited to input
    length + `max_len_b` tokens (docs/departures.md#decode-max-length) and to `max_length` (None: no cap).
    Scores divide by `length_penalty(|Y|, alpha, length_norm)`.
    `incremental` decodes with a key/value cache instead of recomputing prefixes. Sentences that stopped leave the
    batch every `compact_every` steps, the only steps that wait for the device; the hypotheses do not depend on it
    (up to the floating-point effect of the batch's size on the model's kernels).
    """
    if beam_size < 1:
        raise ValueError(f"beam_size must be >= 1, got {beam_size}")
    if alpha < 0:
        raise ValueError(f"alpha (length penalty) must be >= 0 for the stopping bound, got {alpha}")
    if compact_every < 1:
        raise ValueError(f"compact_every must be >= 1, got {compact_every}")
    if length_norm not in LENGTH_NORMS:
        raise ValueError(f"length_norm must be one of {LENGTH_NORMS}, got {length_norm!r}")
    steps = stepper(model, src, pad_id=pad_id, bos_id=bos_id, repeats=beam_size, incremental=incremental)
    live = _initial_live(src, beam_size, max_output_lengths(src, pad_id, max_len_b, max_length), bos_id)
    last_step = int(live.limits.max())  # every sentence has stopped after this step: one read per batch
    pools = _Pools.empty(src.size(0), beam_size, last_step + 1, src.device)
    for step in range(last_step + 1):
        at_limit = (live.limits == step).repeat_interleave(beam_size)  # (n * K,)
        lprobs = force_eos(steps.log_probs(live.tokens), at_limit, eos_id)  # (n * K, V)
        cand_lp, cand_beam, cand_tok = _top_candidates(live.logprob, lprobs, beam_size)  # (n, 2K) each
        _collect_finished(
            pools, live, cand_lp, cand_beam, cand_tok, step=step, alpha=alpha, norm=length_norm, eos_id=eos_id
        )
        next_lp, next_beam, next_tok = _select_live(cand_lp, cand_beam, cand_tok, beam_size, eos_id)  # (n, K)
        live.searching &= ~_sentences_done(pools, live, next_lp, step=step, alpha=alpha, norm=length_norm)
        keep = live.searching.nonzero().flatten() if (step + 1) % compact_every == 0 else None  # host read
        if keep is not None and keep.numel() == live.searching.numel():
            keep = None  # every sentence stays: nothing to compact
        live, index = _advance(live, next_lp, next_beam, next_tok, keep)
        if index.numel() == 0:
            break
        steps.select(index, keep)
    return pools.to_hypotheses()


def _initial_live(src: Tensor, beam_size: int, limits: Tensor, bos_id: int) -> _Live:
    """K copies of the BOS prefix per sentence; all but the first start at -inf so step 0 has no duplicates."""
    n_sent = src.size(0)
    logprob = torch.zeros(n_sent, beam_size, device=src.device)
    logprob[:, 1:] = -torch.inf
    tokens = torch.full((n_sent * beam_size, 1), bos_id, dtype=torch.long, device=src.device)
    searching = torch.ones(n_sent, dtype=torch.bool, device=src.device)
    return _Live(tokens, logprob, limits, torch.arange(n_sent, device=src.device), searching)


def _top_candidates(logprob: Tensor, lprobs: Tensor, beam_size: int) -> tuple[Tensor, Tensor, Tensor]:
    """The 2K best one-token extensions of each sentence's beams: (logprob, parent beam, token), each (n, 2K)."""
    n_sent, vocab = logprob.size(0), lprobs.size(-1)
    scores = (logprob.reshape(-1, 1) + lprobs).reshape(n_sent, beam_size * vocab)  # (n, K * V)
    # 2K candidates leave at least K that do not end in EOS, since each beam offers only one EOS extension.
    cand_lp, flat = scores.topk(min(2 * beam_size, scores.size(1)), dim=1)  # (n, 2K)
    return cand_lp, flat // vocab, flat % vocab


def _collect_finished(
    pools: _Pools,
    live: _Live,
    cand_lp: Tensor,
    cand_beam: Tensor,
    cand_tok: Tensor,
    *,
    step: int,
    alpha: float,
    norm: str,
    eos_id: int,
) -> None:
    """Merges the candidates ending in EOS into their sentence's pool, which keeps its best K by score.

    Equal scores keep the earlier hypothesis first: the pool's own, then the candidates in their order (a stable
    sort of pool + candidates).
    """
    n_sent, beam_size = live.logprob.shape
    n_cand = cand_lp.size(1)
    # A stopped sentence's rows stay in the batch until the next compaction. The stopping bound already keeps
    # their finals out of its pool; the mask makes that exact, not only up to the bound's float32 rounding.
    is_final = (cand_tok == eos_id) & torch.isfinite(cand_lp) & live.searching[:, None]  # (n, 2K)
    penalty = length_penalty(step + 1, alpha, norm)  # the step output tokens plus EOS
    score = torch.where(is_final, cand_lp.double() / penalty, -torch.inf)  # (n, 2K)
    rows = (torch.arange(n_sent, device=cand_beam.device)[:, None] * beam_size + cand_beam).flatten()  # (n * 2K,)
    width = pools.tokens.size(-1)
    tokens = F.pad(live.tokens[rows, 1:], (0, width - step), value=0).view(n_sent, n_cand, width)  # (n, 2K, L)
    ids = live.sent_ids
    merged_score = torch.cat([pools.score[ids], score], dim=1)  # (n, 3K)
    order = merged_score.sort(dim=1, descending=True, stable=True).indices[:, :beam_size]  # (n, K)
    pools.score[ids] = merged_score.gather(1, order)
    pools.logprob[ids] = torch.cat([pools.logprob[ids], cand_lp], dim=1).gather(1, order)
    pools.length[ids] = torch.cat([pools.length[ids], torch.full_like(cand_tok, step)], dim=1).gather(1, order)
    merged_tokens = torch.cat([pools.tokens[ids], tokens], dim=1)  # (n, 3K, L)
    pools.tokens[ids] = merged_tokens.gather(1, order[:, :, None].expand(-1, -1, width))


def _select_live(
    cand_lp: Tensor, cand_beam: Tensor, cand_tok: Tensor, beam_size: int, eos_id: int
) -> tuple[Tensor, Tensor, Tensor]:
    """The K best candidates that do not end in EOS: (logprob, parent beam, token), each (n, K)."""
    open_lp = cand_lp.masked_fill(cand_tok == eos_id, -torch.inf)  # (n, 2K)
    next_lp, pos = open_lp.topk(beam_size, dim=1)  # (n, K)
    return next_lp, cand_beam.gather(1, pos), cand_tok.gather(1, pos)


# Departure: see docs/departures.md#decode-early-stop
def _sentences_done(pools: _Pools, live: _Live, next_lp: Tensor, *, step: int, alpha: float, norm: str) -> Tensor:
    """Which sentences stop now (n,): at their length limit, or with K finished that no live hypothesis can beat.

    A live hypothesis can at best keep its log-probability (it only falls) and reach the largest length
    penalty, lp(limit + 1), as alpha >= 0; if that bound does not exceed the K-th finished score, stop. A pool
    with an empty slot has -inf there, which only a -inf bound reaches, and then no live hypothesis is left.
    """
    best = next_lp[:, 0]  # (n,)
    bound = (best / length_penalty(live.limits + 1, alpha, norm)).double()  # (n,)
    return (live.limits == step) | (bound <= pools.score[live.sent_ids, -1]) | (best == -torch.inf)


def _advance(
    live: _Live, next_lp: Tensor, next_beam: Tensor, next_tok: Tensor, keep: Tensor | None
) -> tuple[_Live, Tensor]:
    """Extends the beams by their new tokens, keeping only the sentences `keep` (None: all); returns the row index."""
    n_sent, beam_size = next_lp.shape
    parents = torch.arange(n_sent, device=next_beam.device)[:, None] * beam_size + next_beam  # (n, K)
    limits, sent_ids, searching = live.limits, live.sent_ids, live.searching
    if keep is not None:
        parents, next_lp, next_tok = parents[keep], next_lp[keep], next_tok[keep]
        limits, sent_ids, searching = limits[keep], sent_ids[keep], searching[keep]
    index = parents.flatten()  # (n' * K,)
    tokens = torch.cat([live.tokens[index], next_tok.reshape(-1, 1)], dim=1)  # (n' * K, t + 2)
    return _Live(tokens, next_lp, limits, sent_ids, searching), index
