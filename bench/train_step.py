"""Seconds per training update of the Multi30k Transformer-tiny recipe (conf/scale/m30k_tiny.yaml) on CPU: today's
step against candidate steps that should compute the same function faster (issue 61, part 1; target: >= 2x).

The step is the one Lightning runs for src/aiayn/train/module.py with that recipe: the forward pass, the projection
and label-smoothed loss in chunks of train.loss_chunk_tokens=1024 target tokens (aiayn.train.chunked_loss), the
per-token mean, the non-finite flags, backward, the gradient norm of on_before_optimizer_step, clipping at 25,
fused Adam and the Eq. 3 schedule; trainer.deterministic (torch.use_deterministic_algorithms) and trainer.threads=2.
Batches: random token ids of Multi30k-like lengths (sorted by source as train.batch_order=source does: a batch
shares a source length of 12-15 tokens, its target lengths vary around it, sd --tgt-spread), sentences added until
8,192 real target tokens (about 560 sentences); a fixed seed.

Every variant trains its own copy of the same initial weights on the same batches with its own copy of the same
RNG stream (torch's CPU generator, swapped in around each of its steps), the variants' steps interleaved update by
update in a rotating order, so load from other processes on the machine hurts all alike. Per variant: the median
over updates of today's seconds / its seconds in the same update, and the largest |loss - today's loss| over the N
updates (equal to float tolerance: the same function; a variant that draws its dropout masks differently cannot
match and is a departure, its curve then compared by the mean loss of the last half). Headline last:
`RESULT train_step_speedup`, today's seconds / those of the fastest variant that keeps the function.
The library keys: skip_pad is train.loss_skip_pad, no_fill train.deterministic_fill=false. mtdrop draws bernoulli_'s
own dropout masks through numpy (the same function, on CPUs where torch does not draw them with MKL). The other
variants (threads1, clip_once, randdrop, compile*, skip_pad_c256, all_*) were measured once and are kept for reruns.
Run: python bench/train_step.py [--steps 50] [--variants today,no_fill,skip_pad,no_fill_skip_pad] [--smoke]
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import math
import statistics
import struct
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import torch
from torch import Tensor, nn

from aiayn.config.schema import TrainConfig
from aiayn.model.config import ModelConfig
from aiayn.model.transformer import Transformer
from aiayn.train.step import batch_loss, optimizer_and_schedule

PAD, BOS, EOS = 0, 1, 2
EPS, CLIP = 0.1, 25.0
# conf/scale/m30k_tiny.yaml
TINY = dict(n_layers=4, d_model=128, d_ff=256, n_heads=4, d_k=32, d_v=32, dropout=0.3, max_positions=256)
TRAIN = dict(batch_tokens=8192, max_tokens=8192, warmup_steps=800, lr_factor=1.6, grad_clip=CLIP)
VOCAB, CHUNK = 10000, 1024
TOLERANCE = 1e-4  # largest |loss difference| over the updates that still counts as the same function


def make_batches(n: int, tokens: int, spread: float, seed: int, vocab: int = VOCAB) -> list[dict[str, Tensor]]:
    """`n` batches of about `tokens` real target tokens (EOS counted), source and target right-padded."""
    g = torch.Generator().manual_seed(seed)
    out = []
    for _ in range(n):
        src_len = int(torch.randint(12, 16, (), generator=g))
        lengths = []
        while sum(lengths) < tokens:
            t = round(src_len + spread * float(torch.randn((), generator=g)))
            lengths.append(min(max(t, 2), 60))  # target tokens with EOS
        b, t_max = len(lengths), max(lengths)
        src = torch.randint(3, vocab, (b, src_len + 1), generator=g)
        src[:, -1] = EOS
        y = torch.randint(3, vocab, (b, t_max), generator=g)
        pos = torch.arange(t_max)[None]
        lens = torch.tensor(lengths)[:, None]
        y = torch.where(pos < lens - 1, y, torch.where(pos == lens - 1, EOS, PAD))
        tgt_in = torch.cat([torch.full((b, 1), BOS), y[:, :-1]], 1).masked_fill(y == PAD, PAD)
        out.append(dict(src=src, tgt_in=tgt_in, tgt_out=y, n_tgt_tokens=(y != PAD).sum()))
    return out


class RandDropout(nn.Module):
    """Dropout whose mask is torch.rand(...) >= p (a departure: other draws than bernoulli_'s)."""

    def __init__(self, p: float) -> None:
        super().__init__()
        self.p = p

    def forward(self, x: Tensor) -> Tensor:
        if not self.training or self.p == 0.0:
            return x
        return x * ((torch.rand_like(x) >= self.p) * (1.0 / (1.0 - self.p)))


class MTDropout(nn.Module):
    """Dropout with bernoulli_'s own masks, drawn outside torch: the 64-bit draws of torch's CPU mt19937 stream
    (its state read through torch.get_rng_state, advanced the same way) made by numpy's MT19937 in bulk, an element
    kept when its 53-bit uniform is < 1 - p, as at::bernoulli_distribution does. The same function as bernoulli_'s
    portable kernel (AMD, or any CPU without MKL); on Intel CPUs torch draws with MKL's streams instead."""

    def __init__(self, p: float) -> None:
        super().__init__()
        self.p = p
        self.cut = math.ceil((1.0 - p) * 2.0**53)  # u = k / 2^53 < 1 - p  <=>  k < cut (exact: k is an integer)

    def forward(self, x: Tensor) -> Tensor:
        if not self.training or self.p == 0.0:
            return x
        state = bytearray(torch.get_rng_state().numpy().tobytes())
        seed, left, seeded, nxt = struct.unpack_from("<QiiQ", state, 0)  # at::mt19937's data: left counts down
        key = np.frombuffer(state, dtype=np.uint64, count=624, offset=24).astype(np.uint32)
        bits = np.random.MT19937()
        bits.state = {"bit_generator": "MT19937", "state": {"key": key, "pos": int(nxt) if left > 1 else 624}}
        raw = bits.random_raw(2 * x.numel())  # two 32-bit draws per element, the first the high half
        k = ((raw[0::2] & 0x1FFFFF) << 32) | raw[1::2]  # the low 53 bits of the 64-bit draw
        keep = torch.from_numpy(k < self.cut).view(x.shape)
        after = bits.state["state"]
        struct.pack_into("<QiiQ", state, 0, seed, 624 - after["pos"] + 1, seeded, after["pos"])
        state[24 : 24 + 624 * 8] = after["key"].astype(np.uint64).tobytes()
        torch.set_rng_state(torch.frombuffer(state, dtype=torch.uint8).clone())
        return x * keep * (1.0 / (1.0 - self.p))


@dataclass
class Variant:
    """How a candidate step differs from today's."""

    fill: bool = True  # torch.utils.deterministic.fill_uninitialized_memory (on under use_deterministic_algorithms)
    threads: int = 2
    dropout: str = "bernoulli"  # or "rand" (departure), or "mt" (bernoulli_'s masks drawn by numpy)
    loss: str = "chunked"  # or "fast": aiayn.train.chunked_loss with pad rows skipped (loss_skip_pad)
    chunk: int = CHUNK
    compile: str = ""  # "" | "features" (model.features, dynamic shapes) | "features_fallback" (eager's RNG ops)
    clip_once: bool = False  # clip with the norm on_before_optimizer_step computed, not a second one
    notes: list[str] = field(default_factory=list)


VARIANTS: dict[str, Variant] = {
    "today": Variant(),
    "no_fill": Variant(fill=False),
    "clip_once": Variant(clip_once=True),
    "threads1": Variant(threads=1),
    "skip_pad": Variant(loss="fast"),
    "skip_pad_c256": Variant(loss="fast", chunk=256),
    "randdrop": Variant(dropout="rand"),
    "mtdrop": Variant(dropout="mt"),
    "no_fill_skip_pad_mtdrop": Variant(fill=False, loss="fast", dropout="mt"),
    "compile": Variant(compile="features"),
    "compile_fallback": Variant(compile="features_fallback"),
    "no_fill_skip_pad": Variant(fill=False, loss="fast"),
    "all_same_fn": Variant(fill=False, loss="fast", clip_once=True, compile="features_fallback"),
    "all_departure": Variant(fill=False, loss="fast", clip_once=True, compile="features"),
}


class Runner:
    """One variant's model, optimizer, schedule and RNG stream."""

    def __init__(self, name: str, v: Variant, init: Transformer, seed: int) -> None:
        self.name, self.v = name, v
        self.model = copy.deepcopy(init).train()
        if v.dropout != "bernoulli":
            swap = {"rand": RandDropout, "mt": MTDropout}[v.dropout]
            for mod in list(self.model.modules()):
                for child_name, child in list(mod.named_children()):
                    if isinstance(child, nn.Dropout):
                        setattr(mod, child_name, swap(child.p))
        train = TrainConfig(**TRAIN, loss_chunk_tokens=v.chunk)
        cpu = torch.device("cpu")
        self.opt, self.sched = optimizer_and_schedule(self.model.parameters(), train, TINY["d_model"], cpu)
        self.params = list(self.model.parameters())
        self.rng = torch.Generator().manual_seed(seed).get_state()
        self.features: Callable[[Tensor, Tensor], Tensor] = self.model.features
        if v.compile:
            import torch._inductor.config as inductor_config

            inductor_config.fallback_random = v.compile.endswith("fallback")
            self.features = torch.compile(self.model.features, dynamic=True)
        self.first_bad = torch.tensor(-1)
        self.seconds: list[float] = []
        self.losses: list[float] = []

    def _flag(self, value: Tensor, step: int) -> None:
        self.first_bad.masked_fill_(~torch.isfinite(value) & (self.first_bad < 0), step)

    def _losses(self, batch: dict[str, Tensor]) -> tuple[Tensor, Tensor]:
        if self.v.loss == "chunked" and not self.v.compile:
            return batch_loss(self.model, batch, EPS, PAD, self.v.chunk, None)  # type: ignore[arg-type]
        from aiayn.train.chunked_loss import chunked_label_smoothed_nll_loss

        states = self.features(batch["src"], batch["tgt_in"])
        skip = self.v.loss == "fast"
        return chunked_label_smoothed_nll_loss(
            states, self.model.output_weight, batch["tgt_out"], EPS, PAD, self.v.chunk, skip_pad=skip
        )

    def step(self, batch: dict[str, Tensor], index: int) -> None:
        v = self.v
        saved_rng, saved_threads = torch.get_rng_state(), torch.get_num_threads()
        torch.set_rng_state(self.rng)
        torch.set_num_threads(v.threads)
        torch.utils.deterministic.fill_uninitialized_memory = v.fill  # type: ignore[attr-defined]
        if v.compile:
            import torch._inductor.config as inductor_config

            inductor_config.fallback_random = v.compile.endswith("fallback")
        t0 = time.perf_counter()
        loss_sum, _ = self._losses(batch)
        loss = loss_sum / max(int(batch["n_tgt_tokens"]), 1)
        self._flag(loss, index)
        loss.backward()
        grads = [p.grad for p in self.params if p.grad is not None]
        norm = torch.nn.utils.get_total_norm(grads)
        self._flag(norm, index)
        if v.clip_once:
            torch.nn.utils.clip_grads_with_norm_(self.params, CLIP, norm)
        else:
            torch.nn.utils.clip_grad_norm_(self.params, CLIP)
        self.opt.step()
        self.sched.step()
        self.opt.zero_grad()
        self.seconds.append(time.perf_counter() - t0)
        self.losses.append(loss.item())
        self.rng = torch.get_rng_state()
        torch.set_rng_state(saved_rng)
        torch.set_num_threads(saved_threads)
        torch.utils.deterministic.fill_uninitialized_memory = True  # type: ignore[attr-defined]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=50, help="updates per variant (losses compared over them)")
    parser.add_argument("--warmup", type=int, default=3, help="first updates left out of the timing")
    parser.add_argument(
        "--variants",
        default="today,no_fill,skip_pad,no_fill_skip_pad",
        help="comma-separated, from: " + ",".join(VARIANTS),
    )
    parser.add_argument("--tokens", type=int, default=8192, help="real target tokens per batch (train.batch_tokens)")
    parser.add_argument("--tgt-spread", type=float, default=3.0, help="sd of target length around the source's")
    parser.add_argument("--batches", type=int, default=16, help="distinct batches, cycled")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--smoke", action="store_true", help="a tiny model and batch: checks the script runs")
    args = parser.parse_args()
    if args.smoke:  # a 1-layer d_model 32 model, vocabulary 1000, 256-token batches: seconds in all
        args.steps, args.warmup, args.tokens, args.batches = min(args.steps, 3), 1, 256, 2
    names = ["today"] + [n for n in args.variants.split(",") if n and n != "today"]
    unknown = [n for n in names if n not in VARIANTS]
    if unknown:
        parser.error(f"unknown variants {unknown}; known: {sorted(VARIANTS)}")
    torch.use_deterministic_algorithms(True)  # trainer.deterministic (Lightning sets it)
    torch.manual_seed(args.seed)
    cfg = dict(TINY)
    if args.smoke:
        cfg.update(n_layers=1, d_model=32, d_ff=64, d_k=8, d_v=8)
        TINY["d_model"] = 32
    init = Transformer(ModelConfig(**cfg), 1000 if args.smoke else VOCAB, PAD)
    batches = make_batches(args.batches, args.tokens, args.tgt_spread, args.seed, init.output_weight.size(0))
    runners = [Runner(n, VARIANTS[n], init, args.seed) for n in names]
    padded = statistics.mean(b["tgt_out"].numel() for b in batches)
    print(
        f"{len(batches[0]['src'])} sentences, {args.tokens} target tokens in {padded:.0f} padded positions a batch "
        f"(mean over {len(batches)}); {torch.get_num_threads()} threads, {torch.backends.cpu.get_cpu_capability()}"
    )
    for i in range(args.steps):
        batch = batches[i % len(batches)]
        order = runners[i % len(runners) :] + runners[: i % len(runners)]
        for r in order:
            r.step(batch, i)
    base = runners[0]
    timed = slice(min(args.warmup, args.steps - 1), None)
    best, best_ratio = None, 0.0
    for r in runners:
        ratios = [a / b for a, b in zip(base.seconds[timed], r.seconds[timed])]
        ratio = statistics.median(ratios)
        diff = max(abs(a - b) for a, b in zip(base.losses, r.losses))
        same = diff <= TOLERANCE and not bool(r.first_bad >= 0)
        half = len(r.losses) // 2
        tail = statistics.mean(r.losses[half:]) - statistics.mean(base.losses[half:])
        print(
            f"{r.name:18s} {statistics.median(r.seconds[timed]):.3f} s/step  x{ratio:.3f} of today  "
            f"max|dloss| {diff:.2e} ({'same function' if same else 'DIFFERENT'}), last-half mean dloss {tail:+.4f}"
        )
        print(f"RESULT {r.name}_s_per_step {statistics.median(r.seconds[timed]):.4f}")
        print(f"RESULT {r.name}_speedup {ratio:.4f}")
        print(f"RESULT {r.name}_max_loss_diff {diff:.3e}")
        if same and ratio > best_ratio:
            best, best_ratio = r.name, ratio
    print(f"fastest that keeps the function: {best}")
    print(f"RESULT train_step_speedup {best_ratio:.4f}")


if __name__ == "__main__":
    with contextlib.suppress(KeyboardInterrupt):
        main()
