"""Beam search speed: key/value-cached decoding against recomputing the whole prefix every step (CPU).

Same random-weight model, same sentences, same run. Outputs are forced to a length of about 30 tokens (EOS is
impossible before source length + `--extra`, certain at it), so both modes do the same amount of search.
Prints sentences per second at batch sizes 1 and 64 and the cache speedup; ends with RESULT lines.
"""

from __future__ import annotations

import argparse
import time

import torch
from torch import Tensor, nn

from aiayn.decode import beam_search
from aiayn.decode.search import batch_by_length, pad_batch
from aiayn.model.cache import KVCache
from aiayn.model.config import ModelConfig
from aiayn.model.transformer import Transformer

PAD, BOS, EOS = 0, 2, 3
SHAPES = {
    "small": dict(n_layers=3, d_model=256, d_ff=1024, n_heads=4, d_k=64, d_v=64),
    "base": dict(n_layers=6, d_model=512, d_ff=2048, n_heads=8, d_k=64, d_v=64),
}


class FixedLength(nn.Module):
    """Wraps a Transformer so that each output ends after exactly (non-pad source length + extra) tokens."""

    def __init__(self, model: Transformer, extra: int) -> None:
        super().__init__()
        self.model, self.extra = model, extra

    def encode(self, src: Tensor, src_mask: Tensor) -> Tensor:
        return self.model.encode(src, src_mask)

    def decode(
        self, tgt_in: Tensor, memory: Tensor, src_mask: Tensor, tgt_mask: Tensor | None, cache: KVCache | None = None
    ) -> Tensor:
        start = 0 if cache is None else cache.length  # read before decode appends the new positions
        logits = self.model.decode(tgt_in, memory, src_mask, tgt_mask, cache)  # (B, T, V)
        position = torch.arange(start, start + tgt_in.size(1), device=tgt_in.device)  # (T,)
        target = src_mask.sum(dim=(1, 2, 3)) + self.extra  # output length of each sentence
        if cache is not None:  # a cache holds the source once per sentence, for its cache.group rows (beams)
            target = target.repeat_interleave(cache.group)  # (B,)
        at_end = position[None, :] >= target[:, None]  # (B, T)
        logits[..., EOS] = torch.where(at_end, 1e4, -1e4)
        return logits


def make_sources(n: int, vocab: int, mean_len: int, seed: int) -> list[list[int]]:
    """n random sentences of length around mean_len (+-5), each ending in EOS."""
    gen = torch.Generator().manual_seed(seed)
    lengths = torch.randint(mean_len - 5, mean_len + 6, (n,), generator=gen).tolist()
    return [torch.randint(4, vocab, (length,), generator=gen).tolist() + [EOS] for length in lengths]


def timed_search(
    model: nn.Module, sources: list[list[int]], batch_size: int, incremental: bool, beam_size: int, device: str = "cpu"
) -> tuple[float, float]:
    """(seconds, mean output length) to beam-search all sources in batches of batch_size."""
    start, lengths = time.perf_counter(), []
    with torch.inference_mode():
        for i in range(0, len(sources), batch_size):
            src = pad_batch(sources[i : i + batch_size], PAD, device)
            hyps = beam_search(
                model,
                src,
                beam_size=beam_size,
                alpha=0.6,
                max_len_b=50,
                bos_id=BOS,
                eos_id=EOS,
                pad_id=PAD,
                incremental=incremental,
            )
            lengths += [len(h[0].tokens) for h in hyps]  # reading the results waits for the device
    return time.perf_counter() - start, sum(lengths) / len(lengths)


def newstest(args: argparse.Namespace) -> None:
    """Decode a newstest2014-sized input as the evaluate stage does: 3003 sentences with WMT-like lengths
    (log-normal around 27 subwords), batched by source tokens (decode.batch_tokens), beam 4, alpha 0.6, max length
    input + 50, outputs as long as their inputs; base at paper scale, bf16 autocast on a GPU. Prints its seconds."""
    import math

    gen = torch.Generator().manual_seed(1)
    lengths = torch.empty(args.sentences).log_normal_(math.log(27.0), 0.5, generator=gen).clamp(3, 150).int()
    sources = [torch.randint(4, args.vocab, (int(n),), generator=gen).tolist() + [EOS] for n in lengths]
    torch.manual_seed(0)
    net = Transformer(ModelConfig(dropout=0.0, **SHAPES[args.shape]), args.vocab, PAD).eval().to(args.device)
    model = FixedLength(net, args.extra)
    amp = torch.autocast("cuda", dtype=torch.bfloat16, enabled=args.device.startswith("cuda"))
    batches = batch_by_length([len(s) for s in sources], args.batch_tokens)

    def run(subset: list[list[int]], compact_every: int) -> tuple[float, int]:
        start, tokens = time.perf_counter(), 0
        with torch.inference_mode(), amp:
            for batch in subset:
                src = pad_batch([sources[i] for i in batch], PAD, args.device)
                hyps = beam_search(
                    model,
                    src,
                    beam_size=args.beam_size,
                    alpha=0.6,
                    max_len_b=50,
                    bos_id=BOS,
                    eos_id=EOS,
                    pad_id=PAD,
                    compact_every=compact_every,
                )
                tokens += sum(len(h[0].tokens) for h in hyps)
        return time.perf_counter() - start, tokens

    compacts = [int(c) for c in args.compact_every.split(",")]
    run(batches[:2], compacts[0])  # warm-up
    results = {}
    for compact in compacts:
        seconds, tokens = results[compact] = run(batches, compact)
        print(
            f"newstest-size input: {len(sources)} sentences ({int(lengths.sum())} source tokens) in {len(batches)} "
            f"batches of <= {args.batch_tokens} tokens, {args.shape} on {args.device}, compact_every {compact}: "
            f"{seconds:.1f} s, {len(sources) / seconds:.1f} sentences/s, {tokens / seconds:.0f} output tokens/s"
        )
    if args.device.startswith("cuda"):
        for compact in compacts:
            per_step = syncs_per_step(model, [sources[i] for i in batches[len(batches) // 2]], args, amp, compact)
            if per_step is not None:
                print(f"RESULT decode_host_syncs_per_step_compact{compact} {per_step:.2f}")
    for compact in compacts[1:]:
        print(f"RESULT decode_newstest_s_compact{compact} {results[compact][0]:.2f}")
    seconds = results[compacts[0]][0]
    print(f"RESULT decode_newstest_sentences_per_s {len(sources) / seconds:.2f}")
    print(f"RESULT decode_newstest_s {seconds:.2f}")


def syncs_per_step(
    model: nn.Module, batch: list[list[int]], args: argparse.Namespace, amp, compact_every: int
) -> float | None:
    """Host-device synchronisations per decoding step of one batch, as CUDA's sync debug mode reports them."""
    from gpu_check import count_host_syncs  # bench/, beside this script

    src = pad_batch(batch, PAD, args.device)
    steps = int((src != PAD).sum(dim=1).max()) + args.extra + 1  # FixedLength: the longest output, EOS included

    def run() -> None:
        with torch.inference_mode(), amp:
            beam_search(
                model,
                src,
                beam_size=args.beam_size,
                alpha=0.6,
                max_len_b=50,
                bos_id=BOS,
                eos_id=EOS,
                pad_id=PAD,
                compact_every=compact_every,
            )

    return count_host_syncs(run, steps, f" (compact_every {compact_every})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--shape", choices=sorted(SHAPES), default="small")
    parser.add_argument("--vocab", type=int, default=8000)
    parser.add_argument("--sentences-b64", type=int, default=64)
    parser.add_argument("--sentences-b1", type=int, default=16)
    parser.add_argument("--beam-size", type=int, default=4)
    parser.add_argument("--src-len", type=int, default=25, help="mean source length")
    parser.add_argument("--extra", type=int, default=5, help="output length = source length + extra")
    parser.add_argument("--device", default="cpu", help="the measurement is specified on cpu; cuda for reference")
    parser.add_argument(
        "--newstest",
        action="store_true",
        help="instead: seconds to decode a newstest2014-sized input (3003 sentences; use with "
        "--shape base --vocab 37000 --device cuda, as bench/gpu_check.sh does)",
    )
    parser.add_argument("--sentences", type=int, default=3003, help="with --newstest")
    parser.add_argument("--batch-tokens", type=int, default=4096, help="with --newstest: decode.batch_tokens")
    parser.add_argument(
        "--compact-every",
        default="8,1",
        help="with --newstest: decode.compact_every values to time, comma-separated; the first is "
        "the headline (8: the GPU default; 1: the search reading the device every step)",
    )
    parser.add_argument(
        "--threads",
        type=int,
        default=1,
        help="intra-op threads; 1 by default: on shared cores, thread barriers dominate small ops",
    )
    args = parser.parse_args()

    torch.set_num_threads(args.threads)
    if args.newstest:
        return newstest(args)
    torch.manual_seed(0)
    net = Transformer(ModelConfig(dropout=0.0, **SHAPES[args.shape]), args.vocab, PAD).eval().to(args.device)
    model = FixedLength(net, args.extra)
    sources = make_sources(args.sentences_b64, args.vocab, args.src_len, seed=1)
    print(
        f"shape={args.shape} vocab={args.vocab} beam={args.beam_size} device={args.device} "
        f"threads={torch.get_num_threads()}"
    )

    timed_search(model, sources[:2], 2, True, args.beam_size, args.device)  # warm-up
    results = {}
    for batch_size, subset in ((1, sources[: args.sentences_b1]), (64, sources)):
        for incremental in (True, False):
            seconds, mean_len = timed_search(model, subset, batch_size, incremental, args.beam_size, args.device)
            results[batch_size, incremental] = seconds
            mode = "cached" if incremental else "full  "
            print(
                f"batch {batch_size:2d} {mode}: {len(subset)} sentences in {seconds:6.2f} s = "
                f"{len(subset) / seconds:7.2f} sentences/s, mean output length {mean_len:.1f}"
            )
    speedup_b1 = results[1, False] / results[1, True]
    speedup_b64 = results[64, False] / results[64, True]
    print(f"cache speedup: batch 1 {speedup_b1:.2f}x, batch 64 {speedup_b64:.2f}x (target >= 3x)")
    print(f"RESULT decode_sentences_per_s_b1 {args.sentences_b1 / results[1, True]:.3f}")
    print(f"RESULT decode_sentences_per_s_b64 {len(sources) / results[64, True]:.3f}")
    print(f"RESULT decode_cache_speedup_b1 {speedup_b1:.3f}")
    print(f"RESULT decode_cache_speedup {speedup_b64:.3f}")


if __name__ == "__main__":
    main()
