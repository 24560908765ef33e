"""Memory and time of the output projection + label-smoothed loss, whole logits (train.loss_chunk_tokens=0)
against chunks (train.loss_chunk_tokens=K), forward and backward, at base's width and the paper's vocabulary.

Each mode runs in its own process (peak memory is the process's high-water mark less its size before the first
step), same hidden states and weight, alternating modes over rounds; medians. On CPU by default (the logits of
one micro-batch of 4096 target tokens: 4096 x 37000 float32 = 0.6 GB); `--device cuda` measures the allocator's
peak instead. Headline: peak memory of chunks / whole (lower is better; target <= 0.5), and the time ratio.
Run: python bench/chunked_loss.py [--tokens 4096] [--chunk 1024] [--rounds 3] [--device cpu]
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import subprocess
import sys
import time


def one(mode: str, tokens: int, chunk: int, vocab: int, d_model: int, steps: int, device: str) -> dict:
    import torch
    import torch.nn.functional as F

    from aiayn.train.chunked_loss import chunked_label_smoothed_nll_loss
    from aiayn.train.label_smoothing import label_smoothed_nll_loss

    torch.set_num_threads(2)
    g = torch.Generator().manual_seed(0)
    hidden = torch.randn(tokens, d_model, generator=g).to(device).requires_grad_()
    weight = (torch.randn(vocab, d_model, generator=g) * d_model**-0.5).to(device).requires_grad_()
    target = torch.randint(1, vocab, (tokens,), generator=g).to(device)
    if device == "cuda":
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        base = torch.cuda.memory_allocated()
    else:
        base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    times = []
    for _ in range(steps):
        t0 = time.perf_counter()
        if mode == "whole":
            loss, _ = label_smoothed_nll_loss(F.linear(hidden, weight), target, 0.1, 0)
        else:
            loss, _ = chunked_label_smoothed_nll_loss(hidden, weight, target, 0.1, 0, chunk)
        loss.backward()
        if device == "cuda":
            torch.cuda.synchronize()
        times.append(time.perf_counter() - t0)
        hidden.grad = weight.grad = None
    peak = (
        torch.cuda.max_memory_allocated()
        if device == "cuda"
        else resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    ) - base
    return dict(peak_bytes=peak, seconds=statistics.median(times[1:] or times), loss=float(loss.detach()))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tokens", type=int, default=4096, help="target tokens (train.max_tokens)")
    parser.add_argument("--chunk", type=int, default=1024, help="train.loss_chunk_tokens")
    parser.add_argument("--vocab", type=int, default=37000)
    parser.add_argument("--d-model", type=int, default=512)
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--child", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(one(args.child, args.tokens, args.chunk, args.vocab, args.d_model, args.steps, args.device)))
        return
    runs: dict[str, list[dict]] = {"whole": [], "chunks": []}
    for r in range(args.rounds):
        for mode in ("whole", "chunks") if r % 2 == 0 else ("chunks", "whole"):
            out = subprocess.run(
                [sys.executable, __file__, "--child", mode, *sys.argv[1:]], check=True, capture_output=True, text=True
            ).stdout
            runs[mode].append(json.loads(out.strip().splitlines()[-1]))
        print(
            f"round {r}: "
            + ", ".join(
                f"{m} {runs[m][-1]['peak_bytes'] / 2**20:.0f} MiB {runs[m][-1]['seconds'] * 1e3:.0f} ms" for m in runs
            )
        )
    peak = {m: statistics.median(x["peak_bytes"] for x in v) for m, v in runs.items()}
    sec = {m: statistics.median(x["seconds"] for x in v) for m, v in runs.items()}
    assert abs(runs["whole"][0]["loss"] - runs["chunks"][0]["loss"]) <= 1e-4 * abs(runs["whole"][0]["loss"])
    print(
        f"{args.tokens} target tokens x vocabulary {args.vocab}, d_model {args.d_model}, chunks of {args.chunk} "
        f"on {args.device}: same loss {runs['whole'][0]['loss']:.4f}"
    )
    print(f"RESULT whole_peak_mib {peak['whole'] / 2**20:.0f}")
    print(f"RESULT chunks_peak_mib {peak['chunks'] / 2**20:.0f}")
    print(f"RESULT chunks_time_ratio {sec['chunks'] / sec['whole']:.3f}")
    print(f"RESULT chunks_memory_ratio {peak['chunks'] / peak['whole']:.3f}")


if __name__ == "__main__":
    main()
