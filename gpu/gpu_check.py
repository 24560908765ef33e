"""Training speed of base and big at the paper's batch (section 5.1: ~25000 source + 25000 target tokens per step).

Plain PyTorch with only torch and our own model/loss/schedule/FLOP counter (PYTHONPATH=src), so it runs on a GPU
machine without Lightning or Hydra: bf16 autocast, fused scaled-dot-product attention (the model's
F.scaled_dot_product_attention), fused Adam, optionally torch.compile (model and loss together, as train.compile
does). Data: random tokens in batches of one sentence length each, lengths drawn log-normally around WMT14
EN-DE's ~27 subwords per sentence (not real text: the speed depends only on shapes). Prints tokens/s, counted-FLOP
MFU against the device's dense bf16 peak and against a measured bf16 matmul, peak memory, and projected hours for
the paper's steps (base 100k, big 300k).
Run: PYTHONPATH=src python gpu/gpu_check.py --shape base --steps 300 [--compile]; CPU dry run: --shape tiny --steps 2
"""

from __future__ import annotations

import argparse
import math
import time

import torch

from aiayn.config.schema import TrainConfig
from aiayn.cost.flops import peak_flops, training_flops
from aiayn.model.config import ModelConfig
from aiayn.model.transformer import Transformer
from aiayn.train.step import batch_loss, model_loss, optimizer_and_schedule

SHAPES = {  # Table 3 base and big; tiny for a CPU dry run
    "base": dict(
        n_layers=6, d_model=512, d_ff=2048, n_heads=8, d_k=64, d_v=64, dropout=0.1, vocab=37000, paper_steps=100_000
    ),
    "big": dict(
        n_layers=6, d_model=1024, d_ff=4096, n_heads=16, d_k=64, d_v=64, dropout=0.3, vocab=37000, paper_steps=300_000
    ),
    "tiny": dict(
        n_layers=2, d_model=64, d_ff=256, n_heads=4, d_k=16, d_v=16, dropout=0.1, vocab=1000, paper_steps=100_000
    ),
}
PAD = 0


def make_batches(batch_tokens: int, vocab: int, device: torch.device, n: int = 8, seed: int = 0) -> list[dict]:
    """`n` batches of about `batch_tokens` tokens per side, one length each (multiples of 8, as bucketing gives)."""
    g = torch.Generator().manual_seed(seed)
    lengths = torch.empty(n).log_normal_(math.log(27.0), 0.5, generator=g).clamp(4, 200)
    out = []
    for length in lengths.tolist():
        length = int(math.ceil(length / 8) * 8)
        sentences = max(1, batch_tokens // length)
        src = torch.randint(4, vocab, (sentences, length), generator=g)  # (B, S)
        tgt = torch.randint(4, vocab, (sentences, length + 1), generator=g)  # (B, T + 1)
        out.append(
            dict(
                src=src.to(device),
                tgt_in=tgt[:, :-1].to(device),
                tgt_out=tgt[:, 1:].to(device),
                tokens=sentences * length,
                length=length,
            )
        )
    return out


def matmul_tflops(device: torch.device) -> float | None:
    """Measured bf16 8192^3 matmul rate: the ceiling this device actually reaches (GPU only)."""
    if device.type != "cuda":
        return None
    a = torch.randn(8192, 8192, device=device, dtype=torch.bfloat16)
    b = torch.randn(8192, 8192, device=device, dtype=torch.bfloat16)
    for _ in range(3):
        a @ b
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(10):
        a @ b
    torch.cuda.synchronize()
    return 10 * 2 * 8192**3 / (time.perf_counter() - t0) / 1e12


KINDS = (  # kernel name fragments per kind, for the profile's shares (cuBLAS/CUTLASS GEMMs, fused attention)
    ("matmul", ("gemm", "cutlass", "matmul", "sm90_xmma", "sm80_xmma", "wgmma")),
    ("attention", ("flash", "fmha", "attention", "attn")),
    ("optimizer", ("adam", "multi_tensor")),
)


def kind_of(kernel: str) -> str:
    name = kernel.lower()
    return next((kind for kind, parts in KINDS if any(p in name for p in parts)), "elementwise/other")


def profile_steps(step, steps: int, device: torch.device, path: str) -> None:
    """torch.profiler over `steps` training steps: the top kernels (or CPU ops) by self time, written to `path`,
    and the step's time split into matmul, attention, optimizer, elementwise/other kernels and idle (launch gaps
    and host work while the GPU waits)."""
    from torch.autograd import DeviceType
    from torch.profiler import ProfilerActivity, profile

    cuda = device.type == "cuda"
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
    if cuda:
        torch.cuda.synchronize()
    t0 = time.perf_counter()
    with profile(activities=activities) as prof:
        for i in range(steps):
            step(i)
        if cuda:
            torch.cuda.synchronize()
    wall_us = (time.perf_counter() - t0) * 1e6
    events = prof.key_averages()
    sort = "self_device_time_total" if cuda else "self_cpu_time_total"
    lines = [f"torch.profiler over {steps} steps ({wall_us / steps / 1e3:.1f} ms a step, profiler on)", ""]
    if cuda:
        kernels = [e for e in events if e.device_type == DeviceType.CUDA and e.self_device_time_total > 0]
        busy = sum(e.self_device_time_total for e in kernels)
        shares: dict[str, float] = {}
        for e in kernels:
            shares[kind_of(e.key)] = shares.get(kind_of(e.key), 0.0) + e.self_device_time_total
        shares["idle (GPU waiting)"] = max(0.0, wall_us - busy)
        lines += [
            f"{kind:22s} {us / steps / 1e3:8.2f} ms a step  {us / wall_us:6.1%}"
            for kind, us in sorted(shares.items(), key=lambda kv: -kv[1])
        ]
        top = sorted(kernels, key=lambda e: -e.self_device_time_total)[:25]
        lines += ["", "top kernels by GPU time (kind, ms a step, share of the step, calls a step, name):"]
        lines += [
            f"{kind_of(e.key):18s} {e.self_device_time_total / steps / 1e3:8.3f} "
            f"{e.self_device_time_total / wall_us:6.1%} {e.count // steps:5d}  {e.key[:110]}"
            for e in top
        ]
    lines += ["", events.table(sort_by=sort, row_limit=30, max_name_column_width=60)]
    with open(path, "w", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines[:12]))


def count_host_syncs(run, steps: int, what: str = "") -> float | None:
    """Host-device synchronisations per step while `run()` does `steps` steps, as torch's CUDA sync debug mode
    reports them (a step that never waits for the GPU lets the host queue the next one while this one runs).
    Also used by bench/decode_speed.py, for decoding steps."""
    import warnings

    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            torch.cuda.set_sync_debug_mode("warn")
            try:
                run()
            finally:
                torch.cuda.set_sync_debug_mode("default")
        found = [w for w in caught if "synchroniz" in str(w.message)]
        for w in found[:5]:
            print(f"host sync{what}: {w.filename}:{w.lineno}: {str(w.message)[:100]}")
        return len(found) / steps
    except Exception as err:
        print(f"sync count failed ({type(err).__name__}: {err})")
        return None


def train_steps(
    shape: dict,
    batches: list[dict],
    steps: int,
    warmup: int,
    device: torch.device,
    compile_model: bool,
    profile: str | None = None,
    loss_chunk: int = 0,
    compile_mode: str = "default",
) -> dict:
    """Train `steps` steps after `warmup` untimed ones; return seconds per step, tokens and counted FLOPs; with
    `profile`, then profile three more steps into that file."""
    torch.manual_seed(0)
    dims = {k: shape[k] for k in ("n_layers", "d_model", "d_ff", "n_heads", "d_k", "d_v", "dropout")}
    model_cfg = ModelConfig(max_positions=256, **dims)
    model = Transformer(model_cfg, shape["vocab"], PAD).to(device)
    # The training step's parts are the pipeline's (aiayn.train.step), with the paper's recipe (TrainConfig).
    optimizer, schedule = optimizer_and_schedule(model.parameters(), TrainConfig(), shape["d_model"], device)
    whole = model_loss(model, PAD)
    # Compiled as train.compile compiles it (TranslationModule.compile_step): the model and the loss together.
    forward = torch.compile(whole, mode=compile_mode) if compile_model else whole
    cudagraphs = compile_model and compile_mode == "reduce-overhead"
    amp = (
        torch.autocast("cuda", dtype=torch.bfloat16) if device.type == "cuda" else torch.autocast("cpu", enabled=False)
    )
    tokens = flops = 0.0
    loss_sum = torch.zeros((), device=device)

    def step(i: int) -> torch.Tensor:
        batch = batches[i % len(batches)]
        if cudagraphs:  # a new step: the graphs' previous outputs may be overwritten
            torch.compiler.cudagraph_mark_step_begin()
        with amp:  # train.loss_chunk_tokens: the logits never whole (aiayn.train.chunked_loss)
            loss, _ = batch_loss(model, batch, 0.1, PAD, loss_chunk, forward)
        (loss / batch["tokens"]).backward()
        optimizer.step()
        schedule.step()
        optimizer.zero_grad(set_to_none=True)
        return loss.detach() / batch["tokens"]

    for i in range(warmup + steps):
        if i == warmup:
            if device.type == "cuda":
                torch.cuda.synchronize()
                torch.cuda.reset_peak_memory_stats()
            t0 = time.perf_counter()
        loss = step(i)
        if i >= warmup:
            batch = batches[i % len(batches)]
            loss_sum += loss  # on the device: no sync inside the timed loop
            tokens += 2 * batch["tokens"]
            flops += training_flops(
                model_cfg, shape["vocab"], batch["tokens"], batch["tokens"], batch["length"], batch["length"]
            )
    if device.type == "cuda":
        torch.cuda.synchronize()
    seconds = time.perf_counter() - t0
    mean_loss = float(loss_sum) / steps
    if not math.isfinite(mean_loss):
        raise FloatingPointError(f"non-finite training loss ({mean_loss})")
    syncs = count_host_syncs(lambda: [step(i) for i in range(3)], 3) if device.type == "cuda" else None
    if profile:
        try:  # the profile is extra: a profiler failure must not cost the timed result
            profile_steps(step, 3, device, profile)
        except Exception as err:
            print(f"profile failed ({type(err).__name__}: {err}); timed results follow")
    return dict(
        s_per_step=seconds / steps, tokens=tokens, flops=flops, seconds=seconds, loss=mean_loss, syncs_per_step=syncs
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shape", choices=sorted(SHAPES), default="base")
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--warmup", type=int, default=20)
    parser.add_argument("--batch-tokens", type=int, default=25_000, help="per side per step (paper: 25000)")
    parser.add_argument("--compile", action="store_true", help="torch.compile the model")
    parser.add_argument(
        "--compile-mode",
        default="default",
        choices=["default", "reduce-overhead"],
        help="with --compile; reduce-overhead replays CUDA graphs, one per batch shape (the batches "
        "have 8 shapes, as train.length_bucket makes few)",
    )
    parser.add_argument(
        "--loss-chunk-tokens",
        type=int,
        default=0,
        help="train.loss_chunk_tokens: projection + loss in chunks (eager only; 0: whole logits)",
    )
    parser.add_argument("--profile", default=None, help="after timing, write a torch.profiler table of 3 steps here")
    args = parser.parse_args()
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    torch.backends.cuda.matmul.allow_tf32 = True
    shape = SHAPES[args.shape]
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu"
    if args.compile and args.loss_chunk_tokens:
        parser.error("--loss-chunk-tokens runs eager (as train.loss_chunk_tokens does under train.compile)")
    tag = f"{args.shape}{'_compiled' if args.compile else ''}{'_chunked' if args.loss_chunk_tokens else ''}"
    tag += "_cudagraphs" if args.compile and args.compile_mode == "reduce-overhead" else ""
    print(f"device {name}, torch {torch.__version__}, shape {args.shape} {shape}, compile {args.compile}")
    batches = make_batches(
        args.batch_tokens if device.type == "cuda" else min(args.batch_tokens, 512), shape["vocab"], device
    )
    result = train_steps(
        shape,
        batches,
        args.steps,
        min(args.warmup, args.steps),
        device,
        args.compile,
        args.profile,
        args.loss_chunk_tokens,
        args.compile_mode,
    )
    rate = result["flops"] / result["seconds"]
    peak = peak_flops(name, "bf16-mixed")
    measured = matmul_tflops(device)
    hours = result["s_per_step"] * shape["paper_steps"] / 3600
    print(f"mean train loss {result['loss']:.3f} over {args.steps} steps")
    print(f"RESULT {tag}_tokens_per_s {result['tokens'] / result['seconds']:.0f}")
    print(f"RESULT {tag}_ms_per_step {result['s_per_step'] * 1e3:.1f}")
    print(f"RESULT {tag}_model_tflops {rate / 1e12:.1f}")
    if measured is not None:
        print(f"RESULT {tag}_matmul_tflops_measured {measured:.0f}")
        print(f"RESULT {tag}_mfu_vs_measured_matmul {rate / 1e12 / measured:.3f}")
        print(f"RESULT {tag}_peak_memory_gib {torch.cuda.max_memory_allocated(device) / 2**30:.1f}")
    if result["syncs_per_step"] is not None:
        print(f"RESULT {tag}_host_syncs_per_step {result['syncs_per_step']:.1f}")
    print(f"RESULT {tag}_projected_hours_{shape['paper_steps'] // 1000}k_steps {hours:.2f}")
    if peak is not None:
        print(f"RESULT {tag}_mfu {rate / peak:.3f}")  # headline: against the datasheet dense bf16 peak


if __name__ == "__main__":
    main()
