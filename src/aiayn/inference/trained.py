"""A trained run opened for decoding, the one way the evaluate stage, `aiayn-translate` and the
attention figures open it: the finished-run check, its model (the last checkpoint or the mean of its last k), the
tokenizer it trained with, and how it decodes (`Decoding`: its decode settings, arithmetic and device).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from aiayn.checkpoint.averaging import average_checkpoints, select_last
from aiayn.checkpoint.reader import read_checkpoint, stored_fingerprint
from aiayn.config.keys import recorded_config
from aiayn.config.schema import Config, DecodeConfig
from aiayn.data.tokenizer import Tokenizer
from aiayn.decode.beam import Hypothesis
from aiayn.decode.search import autocast, search, search_nbest
from aiayn.decode.step import Models
from aiayn.model.config import recorded
from aiayn.model.transformer import Transformer
from aiayn.progress import Progress
from aiayn.run import folders

log = logging.getLogger(__name__)


def finished_run(run_dir: Path) -> Config:
    """The config of a finished run folder (aiayn.run.folders: config.yaml, train.json written when the run ended,
    checkpoints), as this version reads it (aiayn.config.keys.recorded_config); a folder that is not one is refused
    naming what it lacks."""
    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        raise FileNotFoundError(f"{run_dir}: no such folder; give a train stage's run folder, such as runs/base/seed1")
    missing = [name for name in (folders.CONFIG, folders.TRAIN_SUMMARY) if not (run_dir / name).is_file()]
    if not any((run_dir / folders.CHECKPOINTS).glob("*.ckpt")):
        missing.append(f"{folders.CHECKPOINTS}/*.ckpt")
    if missing:
        raise ValueError(
            f"{run_dir} is not a finished run: it has no {' and no '.join(missing)} (the train stage writes "
            f"{folders.TRAIN_SUMMARY} when the run ends); finish it with `dvc repro` or `python pipeline/train.py` "
            f"with its row and seed"
        )
    return recorded_config(run_dir / folders.CONFIG)


@dataclass(frozen=True)
class OpenedRun:
    """A finished run ready to decode: its config, model, tokenizer, the checkpoints whose mean the
    model holds, and the device it is on."""

    cfg: Config
    model: Transformer
    tokenizer: Tokenizer
    checkpoints: list[Path]
    device: torch.device

    @property
    def decoding(self) -> Decoding:
        """How the run decodes: its own decode settings and precision, on its device."""
        return Decoding.of(self.cfg, self.device)


def open_run(run_dir: Path, average: int | None = None, bpe_dir: Path | None = None) -> OpenedRun:
    """A finished run (`finished_run`) with the mean weights of its last `average` checkpoints (None: the row's
    `average_last`, Table 2's weights, or the last checkpoint for a row that averages none) and the tokenizer in
    `bpe_dir` (None: the run folder's own copy, else the run's paths.bpe: `tokenizer_dir`)."""
    cfg = finished_run(run_dir)
    device = decode_device(cfg)
    k = max(1, int(cfg.row.average_last)) if average is None else average
    model, paths = load_model(Path(run_dir) / folders.CHECKPOINTS, k, device)
    tokenizer = run_tokenizer(tokenizer_dir(run_dir, cfg, bpe_dir), paths[-1])
    return OpenedRun(cfg, model, tokenizer, paths, device)


def load_model(ckpt_dir: Path, average_last: int, device: torch.device) -> tuple[Transformer, list[Path]]:
    """The run's model with the mean weights of its last `average_last` checkpoints (0 or 1: the last one)."""
    paths = select_last(ckpt_dir, average_last)
    return load_weights(paths, device), paths


def load_weights(paths: list[Path], device: torch.device) -> Transformer:
    """The model with the mean weights of the given checkpoints (one: its weights as they are)."""
    hparams = [read_checkpoint(p) for p in paths][-1]["hyper_parameters"]
    # The one reader of a stored model config (aiayn.model.config.recorded); the weights then load strictly.
    model = Transformer(recorded(hparams["model"]), hparams["vocab_size"], hparams["pad_id"])
    model.load_state_dict(average_checkpoints(paths))
    return model.to(device).eval()


def tokenizer_dir(run_dir: Path, cfg: Config, bpe_dir: Path | None = None) -> Path:
    """Where a run's tokenizer is read from: `bpe_dir` when given, else the run folder's own copy (the train stage
    writes one, so a copied run folder translates and exports anywhere), else the run's paths.bpe (a run trained
    before run folders carried it)."""
    if bpe_dir is not None:
        return Path(bpe_dir)
    return Path(run_dir) if (Path(run_dir) / folders.TOKENIZER).is_file() else Path(cfg.paths.bpe)


def run_tokenizer(bpe_dir: Path, checkpoint: Path) -> Tokenizer:
    """The tokenizer in `bpe_dir`, refused when it is not the one the checkpoint's run trained with (the sha256
    its fingerprint records; a checkpoint without one is not checked)."""
    if not (Path(bpe_dir) / folders.TOKENIZER).is_file():
        raise FileNotFoundError(
            f"{Path(bpe_dir) / folders.TOKENIZER} not found: the run's tokenizer (the run folder's own copy, else "
            f"paths.bpe, the bpe stage's); work from the folder the run was trained in, or name its bpe folder (--bpe)"
        )
    tokenizer = Tokenizer(Path(bpe_dir) / folders.TOKENIZER)
    trained = stored_fingerprint(checkpoint).get("data", {}).get("tokenizer_sha256")
    if trained is not None and trained != tokenizer.sha256:
        raise ValueError(
            f"{Path(bpe_dir) / folders.TOKENIZER} is not the tokenizer {checkpoint} was trained with (sha256 "
            f"{tokenizer.sha256[:12]}..., the run's {trained[:12]}...); point at the bpe folder the run trained with"
        )
    return tokenizer


def decode_device(cfg: Config) -> torch.device:
    """The GPU when the run's trainer uses one and this machine has one, else the CPU."""
    return torch.device("cuda" if cfg.trainer.accelerator == "gpu" and torch.cuda.is_available() else "cpu")


def decode_precision(cfg: Config) -> str:
    """decode.precision, or the precision the run trained in (trainer.precision) when it is null."""
    return str(cfg.decode.precision or cfg.trainer.precision)


@dataclass(frozen=True)
class Decoding:
    """How a run's model decodes: its decode settings (search, beam, length penalty, length limit, batch size), the
    arithmetic (`decode_precision`) and the device; `OpenedRun.decoding` gives a run's own."""

    settings: DecodeConfig
    precision: str
    device: torch.device

    @classmethod
    def of(cls, cfg: Config, device: torch.device) -> Decoding:
        """The run config's decode settings and precision on `device`."""
        return cls(cfg.decode, decode_precision(cfg), device)

    def translate(self, model: Models, tokenizer: Tokenizer, sentences: Sequence[str], what: str) -> list[str]:
        """`sentences` translated, in order; progress lines name `what` ("decode valid")."""
        return tokenizer.decode(self.search(model, tokenizer, sentences, what))

    def search(self, model: Models, tokenizer: Tokenizer, sentences: Sequence[str], what: str) -> list[list[int]]:
        """`translate`'s output token ids (no BOS or EOS), before the tokenizer's decode."""
        # The evaluate stage sums a run up in one line; a long decode (WMT's test sets) still reports progress.
        progress = Progress(f"{what} ({self.settings.strategy})", len(sentences), "sentences", always_last=False)
        with autocast(self.precision, self.device):
            return search(
                model, tokenizer, list(sentences), strategy=self.settings.strategy, progress=progress, **self._options()
            )

    def nbest(
        self, model: Models, tokenizer: Tokenizer, sentences: Sequence[str], nbest: int
    ) -> list[list[Hypothesis]]:
        """The best `nbest` hypotheses of the beam search (its beam, length penalty, length limit and batch size, as
        `search`), best first; the first is `search`'s output."""
        with autocast(self.precision, self.device):
            return search_nbest(model, tokenizer, list(sentences), nbest=nbest, **self._options())

    def _options(self) -> dict[str, Any]:
        """The settings as aiayn.decode.search takes them (its `alpha` is decode.length_penalty)."""
        decode = self.settings
        return dict(
            beam_size=decode.beam_size,
            alpha=decode.length_penalty,
            length_norm=decode.length_norm,
            max_len_b=decode.max_len_b,
            batch_tokens=decode.batch_tokens,
            device=self.device,
            compact_every=decode.compact_every,
        )
