"""A training step does not wait for the device: the host reads it only on logging steps (loss, progress line)."""

from __future__ import annotations

import warnings

import lightning as L
import torch
from tests.host_reads import HostReads
from torch.utils.data import DataLoader

from aiayn.config.schema import TrainConfig
from aiayn.model.config import ModelConfig
from aiayn.train.callbacks import RngState, RunProgress
from aiayn.train.mfu import MFUMonitor
from aiayn.train.module import TranslationModule

MODEL = dict(n_layers=1, d_model=16, d_ff=32, n_heads=2, d_k=8, d_v=8, dropout=0.1)
VOCAB, LOG_EVERY, STEPS = 50, 10, 40


class ReadsPerStep(L.Callback):
    """The host reads between one `on_train_batch_start` and the next: all the Trainer does for one batch."""

    def __init__(self) -> None:
        self.reads: list[list[str]] = []
        self._mode: HostReads | None = None

    def _close(self) -> None:
        if self._mode is not None:
            self._mode.__exit__(None, None, None)
            self.reads.append(self._mode.names)
            self._mode = None

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx) -> None:
        self._close()
        self._mode = HostReads()
        self._mode.__enter__()

    def on_train_end(self, trainer, pl_module) -> None:
        self._close()


def _batches(n: int) -> list[dict]:
    g = torch.Generator().manual_seed(0)
    out = []
    for _ in range(n):
        src, tgt = torch.randint(4, VOCAB, (4, 6), generator=g), torch.randint(4, VOCAB, (4, 7), generator=g)
        out.append(dict(src=src, tgt_in=tgt[:, :-1], tgt_out=tgt[:, 1:], n_src_tokens=24, n_tgt_tokens=24))
    return out


def test_only_logging_steps_read_the_device(tmp_path):
    torch.manual_seed(0)
    train = TrainConfig(max_steps=STEPS, warmup_steps=10, log_every_steps=LOG_EVERY)
    module = TranslationModule(ModelConfig(**MODEL), train, vocab_size=VOCAB, pad_id=0)
    reads = ReadsPerStep()
    trainer = L.Trainer(
        accelerator="cpu",
        devices=1,
        max_steps=STEPS,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        log_every_n_steps=LOG_EVERY,
        num_sanity_val_steps=0,
        default_root_dir=tmp_path,
        callbacks=[
            reads,
            RunProgress(LOG_EVERY),
            RngState(0),
            MFUMonitor(ModelConfig(**MODEL), VOCAB, LOG_EVERY, "32-true"),
        ],
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # Lightning's hints about workers
        trainer.fit(module, train_dataloaders=DataLoader(_batches(STEPS), batch_size=None))
    assert len(reads.reads) == STEPS
    # Batch i is optimizer step i + 1; Lightning logs, and RunProgress prints and checks the loss, on every
    # LOG_EVERY-th step. Everything else (forward, backward, the non-finite check, Adam, the schedule) stays queued.
    logging = {i for i in range(STEPS) if (i + 1) % LOG_EVERY == 0}
    quiet = {i: names for i, names in enumerate(reads.reads) if i not in logging and names}
    assert quiet == {}
    assert all(reads.reads[i] for i in logging)  # the counter does see the logging steps' reads
