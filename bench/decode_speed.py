"""Beam search speed: key/value-cached decoding against recomputing the whole prefix every step (CPU).

Same random-weight model, same sentences, same run. Outputs are forced to a length of about 30 tokens (EOS is
impossible before source length + `--extra`, certain at it), so both modes do the same amount of search.
Prints sentences per second at batch sizes 1 and 64 and the cache speedup; ends with RESULT lines.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import torch
from torch import Tensor, nn

from aiayn.decode.beam import beam_search
from aiayn.decode.search import batch_by_length, pad_batch
from aiayn.model.cache import KVCache
from aiayn.model.config import ModelConfig
from aiayn.model.transformer import Transformer

PAD, BOS, EOS = 0, 2, 3
SHAPES = {
    "tiny": dict(n_layers=3, d_model=64, d_ff=256, n_heads=8, d_k=8, d_v=8),  # the default pipeline's (scale=tiny)
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
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "gpu"))  # the GPU recipes' helpers
    from gpu_check import count_host_syncs

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


def ct2_compare(args: argparse.Namespace) -> None:
    """Ours against CTranslate2 on the same exported model and the same sentences, beam `--beam-size`: sentences per
    second at one thread and two, CTranslate2 in float32 and int8. Outputs are forced to source length + `--extra`
    tokens in both (ours: FixedLength; CTranslate2: min and max decoding length, sources of one length), so both
    search the same number of steps. Random weights at `--shape`; `--run RUN_DIR` adds the dev BLEU of each path
    on a trained run (exported the same way), so a fast path that translates worse shows."""
    import tempfile
    from pathlib import Path

    import ctranslate2

    from aiayn.export.ct2 import convert_ct2, ct2_spec

    torch.manual_seed(0)
    net = Transformer(ModelConfig(dropout=0.0, **SHAPES[args.shape]), args.vocab, PAD).eval()
    pieces = ["<pad>", "<unk>", "<s>", "</s>", *(f"w{i}" for i in range(4, args.vocab))]
    gen = torch.Generator().manual_seed(1)
    n, length = args.sentences_b64, args.src_len
    sources = [torch.randint(4, args.vocab, (length,), generator=gen).tolist() + [EOS] for _ in range(n)]
    out_len = length + 1 + args.extra  # FixedLength: EOS at (non-pad source length + extra)
    ours = FixedLength(net, args.extra)
    batch = args.ct2_batch
    print(
        f"shape={args.shape} vocab={args.vocab} beam={args.beam_size} {n} sentences of {length} tokens, batch {batch}"
    )
    with tempfile.TemporaryDirectory() as tmp:
        folders = {}
        for quant in ("float32", "int8"):
            folders[quant] = Path(tmp) / quant
            convert_ct2(ct2_spec(net, pieces), folders[quant], None if quant == "float32" else quant)
        tokens = [[pieces[i] for i in src[:-1]] for src in sources]  # CTranslate2 appends EOS itself
        speeds: dict[str, float] = {}
        for threads in (1, 2):
            torch.set_num_threads(threads)
            timed_search(ours, sources[:batch], batch, True, args.beam_size)  # warm-up
            seconds, mean_len = timed_search(ours, sources, batch, True, args.beam_size)
            assert mean_len == out_len, (mean_len, out_len)
            speeds[f"ours_t{threads}"] = n / seconds
            for quant, folder in folders.items():
                translator = ctranslate2.Translator(str(folder), device="cpu", intra_threads=threads, inter_threads=1)
                kwargs = dict(
                    beam_size=args.beam_size,
                    max_batch_size=batch,
                    min_decoding_length=out_len,
                    max_decoding_length=out_len,
                    length_penalty=0.6,
                )
                translator.translate_batch(tokens[:batch], **kwargs)  # warm-up
                start = time.perf_counter()
                done = translator.translate_batch(tokens, **kwargs)
                speeds[f"ct2_{quant}_t{threads}"] = n / (time.perf_counter() - start)
                lengths = {len(r.hypotheses[0]) for r in done}
                assert lengths == {out_len}, f"CTranslate2 output lengths {lengths}, ours {out_len}: not the same work"
            print(
                f"threads {threads}: ours {speeds[f'ours_t{threads}']:.1f}, CTranslate2 float32 "
                f"{speeds[f'ct2_float32_t{threads}']:.1f}, int8 {speeds[f'ct2_int8_t{threads}']:.1f} sentences/s"
            )
        if args.run:
            dev_bleu(args, Path(tmp))
    for threads in (2, 1):
        print(f"RESULT decode_vs_ct2_int8_t{threads} {speeds[f'ours_t{threads}'] / speeds[f'ct2_int8_t{threads}']:.3f}")
    print(f"RESULT decode_vs_ct2_float32_t2 {speeds['ours_t2'] / speeds['ct2_float32_t2']:.3f}")
    print(f"RESULT decode_vs_ct2_float32_t1 {speeds['ours_t1'] / speeds['ct2_float32_t1']:.3f}")


def dev_bleu(args: argparse.Namespace, tmp) -> None:
    """Dev BLEU of a trained run: ours (its evaluate stage's search), and its CTranslate2 export in float32 and
    int8, beam `--beam-size`, each with our per-sentence length limit and our search's suppressed tokens."""
    import ctranslate2
    import sacrebleu

    from aiayn.decode.search import output_limits
    from aiayn.export.cli import export_run
    from aiayn.inference import load
    from aiayn.io import read_lines

    model = load(args.run, bpe=args.run_bpe)
    raw = args.run_raw or Path(model.cfg.paths.raw)
    sources, refs = read_lines(raw / "valid.src"), read_lines(raw / "valid.tgt")
    torch.set_num_threads(1)
    start = time.perf_counter()
    hyps = model.translate(sources, beam=args.beam_size)
    print(f"RESULT dev_bleu_ours {sacrebleu.corpus_bleu(hyps, [refs]).score:.2f} ({time.perf_counter() - start:.1f} s)")
    ids = model.tokenizer.encode(sources)
    limits = output_limits([len(i) + 1 for i in ids], model.cfg.decode.max_len_b, model.models[0].cfg.max_positions)
    pieces = [[model.tokenizer.piece(t) for t in i] for i in ids]
    vocab = {model.tokenizer.piece(i): i for i in range(model.tokenizer.vocab_size)}
    for quant in ("float32", "int8"):
        out = tmp / f"run-{quant}"
        export_run(Path(args.run), out, "ct2", bpe_dir=args.run_bpe, quantization=None if quant == "float32" else quant)
        translator = ctranslate2.Translator(str(out), device="cpu", intra_threads=1)
        start = time.perf_counter()
        texts = []
        for piece, limit in zip(pieces, limits):
            result = translator.translate_batch(
                [piece],
                beam_size=args.beam_size,
                length_penalty=model.cfg.decode.length_penalty,
                max_decoding_length=limit,
                suppress_sequences=[["<pad>"], ["<s>"]],
            )[0].hypotheses[0]
            texts.append(model.tokenizer.decode([[vocab[p] for p in result]])[0])
        bleu = sacrebleu.corpus_bleu(texts, [refs]).score
        print(f"RESULT dev_bleu_ct2_{quant} {bleu:.2f} ({time.perf_counter() - start:.1f} s, one sentence at a time)")


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
        "--shape base --vocab 37000 --device cuda, as gpu/gpu_check.sh does)",
    )
    parser.add_argument("--sentences", type=int, default=3003, help="with --newstest")
    parser.add_argument(
        "--ct2", action="store_true", help="instead: ours against CTranslate2 (float32, int8; 1 and 2 threads)"
    )
    parser.add_argument("--ct2-batch", type=int, default=32, help="with --ct2: sentences per batch")
    parser.add_argument("--run", help="with --ct2: a finished run folder whose dev BLEU each path is scored on")
    parser.add_argument("--run-raw", type=Path, help="with --run: its data/raw folder (default: its paths.raw)")
    parser.add_argument("--run-bpe", type=Path, help="with --run: its data/bpe folder (default: its paths.bpe)")
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
    if args.ct2:
        return ct2_compare(args)
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
