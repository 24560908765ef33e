"""Beam search with the GNMT length penalty (section 6.1), batched over sentences, over `encode`/`decode`.

Dimensions: B sentences, n sentences still searching, K beam size, V vocabulary, t output tokens so far.
Each step extends the K live hypotheses of a sentence by every token and keeps the 2K best extensions: those
ending in EOS join the sentence's finished pool (its best K by length-penalised score are kept), the best K
others become the live hypotheses (as tensor2tensor's beam search did). A sentence stops when its pool holds K
hypotheses and no live one can still enter it, or when it reaches its length limit, where only EOS is allowed.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import Tensor, nn

from aiayn.decode.step import Stepper, force_eos, max_output_lengths


@dataclass(frozen=True)
class Hypothesis:
    """A finished translation: `tokens` without BOS/EOS, `logprob` its sum, `score` = logprob / lp(|Y|)."""

    tokens: list[int]
    score: float
    logprob: float


@dataclass
class _Live:
    """The live hypotheses of the sentences still searching; row i * K + j is beam j of sentence i."""

    tokens: Tensor  # (n * K, t + 1), BOS first
    logprob: Tensor  # (n, K)
    limits: Tensor  # (n,) maximum output tokens, EOS not counted
    sent_ids: Tensor  # (n,) index of each sentence in the input batch


def length_penalty(length: int | Tensor, alpha: float) -> float | Tensor:
    """GNMT length penalty lp(Y) = ((5 + |Y|) / 6) ** alpha (Wu et al. 2016), |Y| counting the EOS token.

    Departure: see docs/departures.md#decode-length-penalty
    """
    return ((5 + length) / 6) ** alpha


def beam_search(model: nn.Module, src: Tensor, *, beam_size: int, alpha: float, max_len_b: int, bos_id: int,
                eos_id: int, pad_id: int, incremental: bool = True) -> list[list[Hypothesis]]:
    """Up to `beam_size` hypotheses per source sentence, best first, in input order (section 6.1).

    `src` (B, S) ends each sentence with EOS and is right-padded with `pad_id`; output is limited to input
    length + `max_len_b` tokens (docs/departures.md#decode-max-length). `incremental` decodes with a key/value
    cache instead of recomputing prefixes.
    """
    if beam_size < 1:
        raise ValueError(f"beam_size must be >= 1, got {beam_size}")
    if alpha < 0:
        raise ValueError(f"alpha (length penalty) must be >= 0 for the stopping bound, got {alpha}")
    stepper = Stepper(model, src, pad_id=pad_id, bos_id=bos_id, repeats=beam_size, incremental=incremental)
    live = _initial_live(src, beam_size, max_len_b, bos_id, pad_id)
    finished: list[list[Hypothesis]] = [[] for _ in range(src.size(0))]
    step = 0
    while live.sent_ids.numel() > 0:
        at_limit = (live.limits == step).repeat_interleave(beam_size)  # (n * K,)
        lprobs = force_eos(stepper.log_probs(live.tokens), at_limit, eos_id)  # (n * K, V)
        cand_lp, cand_beam, cand_tok = _top_candidates(live.logprob, lprobs, beam_size)  # (n, 2K) each
        _collect_finished(finished, live, cand_lp, cand_beam, cand_tok, step=step, alpha=alpha, eos_id=eos_id)
        next_lp, next_beam, next_tok = _select_live(cand_lp, cand_beam, cand_tok, beam_size, eos_id)  # (n, K)
        done = _sentences_done(finished, live, next_lp, step=step, alpha=alpha)  # (n,)
        live, index = _advance(live, next_lp, next_beam, next_tok, done)
        if index.numel() > 0:
            stepper.select(index)
        step += 1
    return finished


def _initial_live(src: Tensor, beam_size: int, max_len_b: int, bos_id: int, pad_id: int) -> _Live:
    """K copies of the BOS prefix per sentence; all but the first start at -inf so step 0 has no duplicates."""
    n_sent = src.size(0)
    logprob = torch.zeros(n_sent, beam_size, device=src.device)
    logprob[:, 1:] = -torch.inf
    tokens = torch.full((n_sent * beam_size, 1), bos_id, dtype=torch.long, device=src.device)
    limits = max_output_lengths(src, pad_id, max_len_b)
    return _Live(tokens, logprob, limits, torch.arange(n_sent, device=src.device))


def _top_candidates(logprob: Tensor, lprobs: Tensor, beam_size: int) -> tuple[Tensor, Tensor, Tensor]:
    """The 2K best one-token extensions of each sentence's beams: (logprob, parent beam, token), each (n, 2K)."""
    n_sent, vocab = logprob.size(0), lprobs.size(-1)
    scores = (logprob.reshape(-1, 1) + lprobs).reshape(n_sent, beam_size * vocab)  # (n, K * V)
    # 2K candidates leave at least K that do not end in EOS, since each beam offers only one EOS extension.
    cand_lp, flat = scores.topk(min(2 * beam_size, scores.size(1)), dim=1)  # (n, 2K)
    return cand_lp, flat // vocab, flat % vocab


def _collect_finished(finished: list[list[Hypothesis]], live: _Live, cand_lp: Tensor, cand_beam: Tensor,
                      cand_tok: Tensor, *, step: int, alpha: float, eos_id: int) -> None:
    """Moves candidates ending in EOS into their sentence's pool, which keeps its best K by score."""
    beam_size = live.logprob.size(1)
    is_final = (cand_tok == eos_id) & torch.isfinite(cand_lp)  # (n, 2K)
    if not bool(is_final.any()):
        return
    penalty = length_penalty(step + 1, alpha)  # the step output tokens plus EOS
    sentences, _ = is_final.nonzero(as_tuple=True)  # row-major, the order boolean indexing uses below
    rows = sentences * beam_size + cand_beam[is_final]
    sent_ids = live.sent_ids[sentences].tolist()
    for sent, tokens, logprob in zip(sent_ids, live.tokens[rows, 1:].tolist(), cand_lp[is_final].tolist()):
        pool = finished[sent]
        pool.append(Hypothesis(tokens=tokens, score=logprob / penalty, logprob=logprob))
        pool.sort(key=lambda hyp: -hyp.score)  # stable: on equal scores the earlier hypothesis stays first
        del pool[beam_size:]


def _select_live(cand_lp: Tensor, cand_beam: Tensor, cand_tok: Tensor, beam_size: int,
                 eos_id: int) -> tuple[Tensor, Tensor, Tensor]:
    """The K best candidates that do not end in EOS: (logprob, parent beam, token), each (n, K)."""
    open_lp = cand_lp.masked_fill(cand_tok == eos_id, -torch.inf)  # (n, 2K)
    next_lp, pos = open_lp.topk(beam_size, dim=1)  # (n, K)
    return next_lp, cand_beam.gather(1, pos), cand_tok.gather(1, pos)


# Departure: see docs/departures.md#decode-early-stop
def _sentences_done(finished: list[list[Hypothesis]], live: _Live, next_lp: Tensor, *, step: int,
                    alpha: float) -> Tensor:
    """Which sentences stop now: at their length limit, or with K finished that no live hypothesis can beat.

    A live hypothesis can at best keep its log-probability (it only falls) and reach the largest length
    penalty, lp(limit + 1), as alpha >= 0; if that bound does not exceed the K-th finished score, stop.
    """
    beam_size = next_lp.size(1)
    best = next_lp[:, 0]  # (n,)
    bounds = (best / length_penalty(live.limits + 1, alpha)).tolist()
    done = []
    for sent, limit, best_lp, bound in zip(live.sent_ids.tolist(), live.limits.tolist(), best.tolist(), bounds):
        pool = finished[sent]
        full = len(pool) == beam_size and bound <= pool[-1].score
        done.append(limit == step or full or best_lp == -math.inf)
    return torch.tensor(done, dtype=torch.bool, device=next_lp.device)


def _advance(live: _Live, next_lp: Tensor, next_beam: Tensor, next_tok: Tensor,
             done: Tensor) -> tuple[_Live, Tensor]:
    """Extends the surviving beams by their new tokens and drops finished sentences; returns the row index."""
    n_sent, beam_size = next_lp.shape
    keep = (~done).nonzero().flatten()  # (n',)
    parents = torch.arange(n_sent, device=next_beam.device)[:, None] * beam_size + next_beam  # (n, K)
    index = parents[keep].flatten()  # (n' * K,)
    tokens = torch.cat([live.tokens[index], next_tok[keep].reshape(-1, 1)], dim=1)  # (n' * K, t + 2)
    return _Live(tokens, next_lp[keep], live.limits[keep], live.sent_ids[keep]), index
