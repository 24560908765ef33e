"""What Lightning costs per training step: our TranslationModule in a Lightning Trainer against a plain PyTorch loop.

Both train the same tiny Transformer from the same weights on the same batches, with the module's own loss,
optimizer, schedule and gradient-norm computation; rounds alternate plain / Lightning so machine load hurts both
alike. Trainer start-up is excluded: a callback times the steps after `--warmup`. Headline: plain step time over
Lightning step time (1.0 = free; target >= 0.95).
Run: python bench/lightning_overhead.py [--steps N] [--rounds R] [--warmup W]
"""
from __future__ import annotations

import argparse
import dataclasses
import statistics
import time
import warnings

import lightning as L
import torch
from torch.utils.data import DataLoader

from aiayn.config.schema import TrainConfig
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
        out.append(dict(src=src, tgt_in=tgt[:, :-1], tgt_out=tgt[:, 1:], n_src_tokens=src.numel(),
                        n_tgt_tokens=length * sentences))
    return out


def new_module() -> TranslationModule:
    torch.manual_seed(0)
    return TranslationModule(model=MODEL, train=dataclasses.asdict(TrainConfig()), vocab_size=VOCAB, pad_id=PAD)


def plain_loop(batches: list[dict], warmup: int) -> float:
    """Seconds per step after `warmup` steps of a hand-written loop doing the module's work."""
    module = new_module()
    setup = module.configure_optimizers()
    optimizer, schedule = setup["optimizer"], setup["lr_scheduler"]["scheduler"]
    module.train()
    for i, batch in enumerate(batches):
        if i == warmup:
            t0 = time.perf_counter()
        optimizer.zero_grad(set_to_none=True)
        loss_sum, _ = module._losses(batch, module.train_cfg["label_smoothing"])
        (loss_sum / batch["n_tgt_tokens"]).backward()
        grads = [p.grad for p in module.parameters() if p.grad is not None]
        torch.nn.utils.get_total_norm(grads)  # the module checks it every step (non-finite gradients)
        optimizer.step()
        schedule.step()
    return (time.perf_counter() - t0) / (len(batches) - warmup)


class StepTimer(L.Callback):
    def __init__(self, warmup: int) -> None:
        self.warmup, self.t0, self.t1 = warmup, 0.0, 0.0

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx) -> None:
        if batch_idx == self.warmup:
            self.t0 = time.perf_counter()

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        self.t1 = time.perf_counter()


def lightning_loop(batches: list[dict], warmup: int) -> float:
    """Seconds per step after `warmup` steps of TranslationModule in a Trainer set up as the train stage does."""
    timer = StepTimer(warmup)
    trainer = L.Trainer(accelerator="cpu", devices=1, max_steps=len(batches), logger=False,
                        enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False,
                        log_every_n_steps=50, num_sanity_val_steps=0, callbacks=[timer])
    trainer.fit(new_module(), train_dataloaders=DataLoader(batches, batch_size=None))
    return (timer.t1 - timer.t0) / (len(batches) - warmup)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=60)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--warmup", type=int, default=10)
    args = parser.parse_args()
    warnings.filterwarnings("ignore")  # Lightning's hints about workers and logging intervals
    batches = make_batches(args.steps + args.warmup)
    plain, light = [], []
    for r in range(args.rounds):
        plain.append(plain_loop(batches, args.warmup))
        light.append(lightning_loop(batches, args.warmup))
        print(f"round {r}: plain {plain[-1] * 1e3:.2f} ms/step, lightning {light[-1] * 1e3:.2f} ms/step")
    p, lt = statistics.median(plain), statistics.median(light)
    print(f"RESULT plain_ms_per_step {p * 1e3:.3f}")
    print(f"RESULT lightning_ms_per_step {lt * 1e3:.3f}")
    print(f"RESULT lightning_overhead_ratio {p / lt:.3f}")


if __name__ == "__main__":
    main()
