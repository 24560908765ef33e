"""A trained run (or several, as an ensemble) as a Python object: translate, n-best, score, align.

    from aiayn.inference import load
    model = load("runs/base/seed1")                       # Table 2's weights: the row's averaged checkpoints
    model.translate(["A man is riding a bike."])          # the run's own decode settings (beam, alpha, limits)
    model.nbest(["A man is riding a bike."], 4)           # hypotheses with log-probability and score, best first
    model.score(["A man ..."], ["Ein Mann ..."])          # each reference's log-probability, per token, PPL
    model.align(["A man ..."])                            # encoder-decoder attention of the translation
    load("runs/base/seed1", "runs/base/seed2")            # an ensemble: log-probabilities averaged at every step

The code is the evaluate stage's and `aiayn-translate`'s (aiayn.inference.trained: loading, the
tokenizer check, decode settings and arithmetic; aiayn.decode: search, forced decoding), so the same sentences with the
same settings give the evaluate stage's hypotheses.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from aiayn.config.schema import LENGTH_NORMS, DecodeConfig
from aiayn.decode import forced
from aiayn.decode.forced import Alignment, Score
from aiayn.decode.search import autocast
from aiayn.inference.trained import Decoding, OpenedRun, decode_precision, open_run
from aiayn.model.transformer import Transformer


@dataclass(frozen=True)
class Candidate:
    """One of a sentence's n best: its text, subword ids (no BOS/EOS), summed log-probability (EOS counted) and
    the search's score, logprob / lp(|Y|) (aiayn.decode.beam.length_penalty: the run's decode.length_norm)."""

    text: str
    tokens: list[int]
    logprob: float
    score: float


class Translator:
    """Opened runs decoding together: one run, or an ensemble of runs trained with one tokenizer. Decode settings
    (beam size, length penalty, max_len_b, batch size, precision) are the first run's config.yaml's unless a call
    changes them."""

    def __init__(self, runs: Sequence[OpenedRun]) -> None:
        if not runs:
            raise ValueError("give at least one run folder")
        first = runs[0]
        for run in runs[1:]:
            if run.tokenizer.sha256 != first.tokenizer.sha256:
                raise ValueError(
                    f"{run.checkpoints[-1].parent.parent} was trained with another tokenizer than "
                    f"{first.checkpoints[-1].parent.parent} (sha256 {run.tokenizer.sha256[:12]}... vs "
                    f"{first.tokenizer.sha256[:12]}...): an ensemble's runs must share one vocabulary"
                )
        self.runs = list(runs)
        self.cfg, self.tokenizer, self.device = first.cfg, first.tokenizer, first.device

    @property
    def models(self) -> list[Transformer]:
        return [run.model for run in self.runs]

    def _model(self):
        return self.models[0] if len(self.runs) == 1 else self.models

    def settings(
        self,
        beam: int | None = None,
        alpha: float | None = None,
        greedy: bool = False,
        length_norm: str | None = None,
    ) -> DecodeConfig:
        """The decode settings used: the first run's, with those given here changed."""
        decode = self.cfg.decode
        if length_norm is not None:
            if length_norm not in LENGTH_NORMS:
                raise ValueError(f"length_norm must be one of {LENGTH_NORMS}, got {length_norm!r}")
            decode = dataclasses.replace(decode, length_norm=length_norm)
        if greedy:
            decode = dataclasses.replace(decode, strategy="greedy")
        if beam is not None:
            decode = dataclasses.replace(decode, strategy="beam", beam_size=beam)
        if alpha is not None:
            decode = dataclasses.replace(decode, length_penalty=alpha)
        return decode

    def translate(
        self,
        lines: Sequence[str],
        *,
        beam: int | None = None,
        alpha: float | None = None,
        greedy: bool = False,
        length_norm: str | None = None,
    ) -> list[str]:
        """One translation per line, in order (an empty line stays empty)."""
        decoding = Decoding(self.settings(beam, alpha, greedy, length_norm), decode_precision(self.cfg), self.device)
        return decoding.translate(self._model(), self.tokenizer, list(lines), "translate")

    def nbest(
        self,
        lines: Sequence[str],
        n: int,
        *,
        beam: int | None = None,
        alpha: float | None = None,
        length_norm: str | None = None,
    ) -> list[list[Candidate]]:
        """Each line's `n` best hypotheses of beam search (beam: the run's beam size, at least n), best first;
        the first is `translate`'s output."""
        decode = self.settings(max(n, beam or self.cfg.decode.beam_size), alpha, length_norm=length_norm)
        found = Decoding(decode, decode_precision(self.cfg), self.device).nbest(self._model(), self.tokenizer, lines, n)
        return [
            [
                Candidate(text, h.tokens, h.logprob, h.score)
                for h, text in zip(hyps, self.tokenizer.decode([h.tokens for h in hyps]))
            ]
            for hyps in found
        ]

    def score(self, sources: Sequence[str], targets: Sequence[str]) -> list[Score | None]:
        """Each target's log-probability given its source (summed, per token, PPL); None where the source has no
        tokens."""
        with autocast(decode_precision(self.cfg), self.device):
            return forced.score(
                self._model(),
                self.tokenizer,
                list(sources),
                list(targets),
                batch_tokens=self.cfg.decode.batch_tokens,
                device=self.device,
            )

    def align(
        self,
        sources: Sequence[str],
        targets: Sequence[str] | None = None,
        *,
        layer: int = -1,
        head: int | None = None,
    ) -> list[Alignment | None]:
        """Encoder-decoder attention of `targets` (None: this model's translations) given `sources`, from decoder
        layer `layer` and `head` (None: the mean over heads) of the first run: attention, not alignment."""
        targets = self.translate(sources) if targets is None else list(targets)
        with autocast(decode_precision(self.cfg), self.device):
            return forced.align(
                self.models[0],
                self.tokenizer,
                list(sources),
                list(targets),
                layer=layer,
                head=head,
                batch_tokens=self.cfg.decode.batch_tokens,
                device=self.device,
            )


def load(*run_dirs: str | Path, average: int | None = None, bpe: str | Path | None = None) -> Translator:
    """Finished run folders opened for decoding (aiayn.inference.trained.open_run: each the mean of its last `average`
    checkpoints, None: its row's average_last), one Translator; several are an ensemble."""
    return Translator([open_run(Path(d), average, None if bpe is None else Path(bpe)) for d in run_dirs])
