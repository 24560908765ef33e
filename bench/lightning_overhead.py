"""What Lightning costs per training step: our TranslationModule in a Lightning Trainer against a plain PyTorch loop.

Both train the same tiny Transformer from the same weights on the same batches, with the module's own loss,
optimizer, schedule and gradient-norm computation. Trainer start-up is excluded. Noise-robust on shared 2-core
machines, where the speed of the whole machine drifts by a third within seconds: the two are measured step by
step in turn, the plain loop's step run from a callback between two Lightning steps, so each pair of steps sees
the same machine; the plain step runs before the Lightning step on odd steps and after it on even ones, so neither
always finds the other's data in the caches. A Lightning step is the interval between two `on_train_batch_start`
stamps (everything the Trainer does between batches falls inside it) less the plain step run in that interval. The
headline is the median over all steps of the paired ratio plain / Lightning; each round is a fresh Trainer and
module, and the rounds' medians are printed too (their spread says how noisy the machine was), and the median gap
in milliseconds (Lightning's cost per step, which does not grow with the model). 1.0 = free; target >= 0.95.
Threads: one intra-op thread by default, as each seed's process of the default `dvc repro` trains (three processes
on two cores, each given cpu_count // 3 = 1 thread by the joblib launcher), so the ratio is the share Lightning
takes of the default run's steps; `--threads 2` times the steps on both cores instead (shorter steps, the same gap).
Run: python bench/lightning_overhead.py [--steps N] [--rounds R] [--warmup W] [--threads T]
"""

from __future__ import annotations

import argparse
import statistics
import time
import warnings

import lightning as L
import torch
from torch.utils.data import DataLoader

from aiayn.config.schema import TrainConfig
from aiayn.model.config import ModelConfig
from aiayn.train.module import TranslationModule

PAD, VOCAB = 0, 1000
MODEL = dict(n_layers=2, d_model=64, d_ff=256, n_heads=4, d_k=16, d_v=16, dropout=0.1)


def make_batches(n: int, sentences: int = 32, length: int = 24) -> list[dict]:
    """Random token batches in the DataModule's format (`n_*_tokens` are host ints, as the collate makes them)."""
    g = torch.Generator().manual_seed(0)
    out = []
    for _ in range(n):
        src = torch.randint(4, VOCAB, (sentences, length), generator=g)  # (B, S)
        tgt = torch.randint(4, VOCAB, (sentences, length + 1), generator=g)  # (B, T + 1)
        out.append(
            dict(
                src=src,
                tgt_in=tgt[:, :-1],
                tgt_out=tgt[:, 1:],
                n_src_tokens=src.numel(),
                n_tgt_tokens=length * sentences,
            )
        )
    return out


def new_module() -> TranslationModule:
    torch.manual_seed(0)
    return TranslationModule(ModelConfig(**MODEL), TrainConfig(), vocab_size=VOCAB, pad_id=PAD)


class PlainLoop:
    """A hand-written loop doing the module's work on its own copy of the module, one step per call."""

    def __init__(self) -> None:
        self.module = new_module()
        setup = self.module.configure_optimizers()
        self.optimizer, self.schedule = setup["optimizer"], setup["lr_scheduler"]["scheduler"]
        self.module.train()

    def step(self, batch: dict) -> float:
        """One training step; its seconds."""
        t0 = time.perf_counter()
        self.optimizer.zero_grad(set_to_none=True)
        loss_sum, _ = self.module._losses(batch, self.module.train_cfg.label_smoothing)
        (loss_sum / batch["n_tgt_tokens"]).backward()
        grads = [p.grad for p in self.module.parameters() if p.grad is not None]
        torch.nn.utils.get_total_norm(grads)  # the module checks it every step (non-finite gradients)
        self.optimizer.step()
        self.schedule.step()
        return time.perf_counter() - t0


class Paired(L.Callback):
    """Beside each Lightning step, one plain step on the same batch (before it on odd steps, after it on even ones);
    both durations recorded past `warmup`."""

    def __init__(self, batches: list[dict], warmup: int) -> None:
        self.batches, self.warmup, self.plain = batches, warmup, PlainLoop()
        self.starts: list[float] = []
        self.plain_s: list[float] = []

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx) -> None:
        if batch_idx > self.warmup:
            self.starts.append(time.perf_counter())
        if batch_idx % 2:  # odd steps: the plain step first, so neither loop always runs on the other's warm caches
            self._plain(batch_idx)

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        if not batch_idx % 2:
            self._plain(batch_idx)

    def _plain(self, batch_idx: int) -> None:
        seconds = self.plain.step(self.batches[batch_idx])  # warm-up steps too, so both loops warm alike
        if batch_idx > self.warmup:
            self.plain_s.append(seconds)

    def on_train_end(self, trainer, pl_module) -> None:
        self.starts.append(time.perf_counter())

    def pairs(self) -> list[tuple[float, float, bool]]:
        """(plain, Lightning, whether the plain step ran first) seconds of each measured step."""
        intervals = [b - a for a, b in zip(self.starts, self.starts[1:])]
        return [
            (p, interval - p, bool((self.warmup + 1 + i) % 2))
            for i, (p, interval) in enumerate(zip(self.plain_s, intervals))
        ]


def paired_round(batches: list[dict], warmup: int) -> list[tuple[float, float]]:
    """One fresh Trainer, set up as the train stage sets it up, with a plain step paired to each of its steps."""
    paired = Paired(batches, warmup)
    trainer = L.Trainer(
        accelerator="cpu",
        devices=1,
        max_steps=len(batches),
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        log_every_n_steps=50,
        num_sanity_val_steps=0,
        callbacks=[paired],
    )
    trainer.fit(new_module(), train_dataloaders=DataLoader(batches, batch_size=None))
    return paired.pairs()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--warmup", type=int, default=10)
    parser.add_argument(
        "--threads",
        type=int,
        default=1,
        help="intra-op threads (default 1: what each seed's process of the default dvc repro gets)",
    )
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    print(f"{torch.get_num_threads()} intra-op thread(s)")
    warnings.filterwarnings("ignore")  # Lightning's hints about workers and logging intervals
    batches = make_batches(args.steps + args.warmup + 1)
    pairs, round_ratios = [], []
    for r in range(args.rounds):
        got = paired_round(batches, args.warmup)
        pairs += got
        round_ratios.append(statistics.median(p / lt for p, lt, _ in got))
        print(
            f"round {r}: plain {statistics.median(p for p, _, _ in got) * 1e3:.2f} ms/step, lightning "
            f"{statistics.median(lt for _, lt, _ in got) * 1e3:.2f} ms/step, paired ratio {round_ratios[-1]:.3f}"
        )
    by_order = {first: statistics.median(p / lt for p, lt, f in pairs if f == first) for first in (True, False)}
    print(f"RESULT plain_ms_per_step {statistics.median(p for p, _, _ in pairs) * 1e3:.3f}")
    print(f"RESULT lightning_ms_per_step {statistics.median(lt for _, lt, _ in pairs) * 1e3:.3f}")
    print(f"RESULT lightning_overhead_plain_first {by_order[True]:.3f}")
    print(f"RESULT lightning_overhead_plain_second {by_order[False]:.3f}")
    print(f"RESULT lightning_overhead_round_min {min(round_ratios):.3f}")
    print(f"RESULT lightning_overhead_round_max {max(round_ratios):.3f}")
    print(f"RESULT lightning_overhead_gap_ms {statistics.median(lt - p for p, lt, _ in pairs) * 1e3:.3f}")
    print(f"RESULT lightning_overhead_ratio {statistics.median(p / lt for p, lt, _ in pairs):.3f}")


if __name__ == "__main__":
    main()
