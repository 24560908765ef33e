"""Translate stdin to stdout with a trained run, as fairseq-interactive, onmt_translate and marian-decoder do.

    aiayn-translate runs/base/seed1 < sentences.en > sentences.de
    aiayn-translate runs/base/seed1 --beam 8 --alpha 1.0 --average 1 < sentences.en
    aiayn-translate runs/base/seed1 --greedy < sentences.en
    aiayn-translate runs/base/seed1 runs/base/seed2 < sentences.en    # an ensemble of two runs
    aiayn-translate runs/base/seed1 --nbest 4 < sentences.en          # Moses n-best lists
    aiayn-translate runs/base/seed1 --score sentences.de < sentences.en  # each reference's
    log-probability aiayn-translate runs/base/seed1 --align -1 < sentences.en         # translation
    ||| s-t pairs

One raw-text sentence a line in, one line out per sentence (n lines per sentence with --nbest), in the same order:
an empty line stays empty, a line longer than the model's positions is translated from its first
max_positions - 1 subword tokens (with a warning on stderr). Sentences are batched by tokens (decode.batch_tokens).
The run's own tokenizer (paths.bpe, checked against the checkpoint's fingerprint) and decoding settings (its
config.yaml's decode: beam size, length penalty, max_len_b, precision) apply unless a flag says otherwise; the
weights are the mean of its last `row.average_last` checkpoints (Table 2's; the last checkpoint for a row that
averages none). Several run folders decode as an ensemble (log-probabilities averaged at every step; the first
run's settings). The code is aiayn.inference's, the evaluate stage's own, so the same sentences with the same
settings give the evaluate stage's hypotheses.

Outputs: --nbest K writes `i ||| hypothesis ||| logprob= L tokens= N ||| score` (Moses n-best; i from 0, score =
logprob / lp(|Y|)). --score FILE writes `logprob<TAB>tokens<TAB>logprob per token<TAB>ppl` per pair, EOS counted (an
empty source: an empty line). --align LAYER[:HEAD] writes `translation ||| s-t ...`: for each subword token t of
the translation the source subword token s its encoder-decoder attention weighs most in that decoder layer (-1:
the last) and head (default: the mean over heads), 0-based, EOS left out; attention, not alignment.
"""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path


def positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"{value}: give a number of 1 or more")
    return value


def read_lines(stream) -> list[str]:
    """The lines of a UTF-8 byte stream, without their line ends (\\n or \\r\\n) and only those: a form feed or a
    Unicode line separator inside a line does not split it."""
    data = stream.read()
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as err:
        raise ValueError(f"stdin is not UTF-8 (byte {err.start}); convert it first, e.g. iconv -t UTF-8") from None
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()  # the last line's end
    return [line.removesuffix("\r") for line in lines]


def alignment_spec(text: str) -> tuple[int, int | None]:
    """ "LAYER" or "LAYER:HEAD" -> (layer, head or None)."""
    layer, _, head = text.partition(":")
    try:
        return int(layer), (int(head) if head else None)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{text!r}: give a decoder layer, e.g. -1, or a layer and a head, e.g. 2:0"
        ) from None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="aiayn-translate", description=__doc__.splitlines()[0])
    parser.add_argument("run_dir", type=Path, nargs="+", help="finished run folders (several: an ensemble)")
    search = parser.add_mutually_exclusive_group()
    search.add_argument("--beam", type=positive, help="beam size (default: the run's decode.beam_size)")
    search.add_argument("--greedy", action="store_true", help="greedy search instead of the run's beam search")
    parser.add_argument("--alpha", type=float, help="length penalty alpha (default: the run's decode.length_penalty)")
    parser.add_argument(
        "--length-norm",
        choices=("gnmt", "power"),  # aiayn.config.schema.LENGTH_NORMS (imported with torch, after the arguments)
        help="what alpha divides scores by: gnmt ((5+|Y|)/6)^alpha, or power |Y|^alpha as fairseq's --lenpen "
        "(default: the run's decode.length_norm)",
    )
    parser.add_argument(
        "--average", type=positive, help="average the last K checkpoints (default: the row's average_last, or 1)"
    )
    parser.add_argument("--bpe", type=Path, help="the bpe folder holding the run's spm.model (default: paths.bpe)")
    task = parser.add_mutually_exclusive_group()
    task.add_argument("--nbest", type=positive, help="write the K best hypotheses of each sentence (Moses format)")
    task.add_argument("--score", type=Path, metavar="FILE", help="score FILE's lines as translations of stdin's")
    task.add_argument(
        "--align", type=alignment_spec, metavar="LAYER[:HEAD]", help="append encoder-decoder attention pairs"
    )
    args = parser.parse_args(argv)
    if args.greedy and args.nbest:
        parser.error("--nbest needs beam search; drop --greedy")
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s: %(message)s", stream=sys.stderr)
    from aiayn.inference import load  # torch: after the arguments are checked

    try:
        model = load(*args.run_dir, average=args.average, bpe=args.bpe)
        lines = read_lines(sys.stdin.buffer)
        out = _outputs(model, args, lines)
    except (FileNotFoundError, ValueError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    sys.stdout.buffer.write("".join(line + "\n" for line in out).encode("utf-8"))
    sys.stdout.flush()
    return 0


def _outputs(model, args: argparse.Namespace, lines: list[str]) -> list[str]:
    if args.score is not None:
        with open(args.score, "rb") as f:
            targets = read_lines(f)
        if len(targets) != len(lines):
            raise ValueError(f"{args.score} has {len(targets)} lines, stdin {len(lines)}: give one target per source")
        scores = model.score(lines, targets)
        return ["" if s is None else f"{s.logprob:.6f}\t{s.tokens}\t{s.mean:.6f}\t{s.ppl:.6f}" for s in scores]
    if args.nbest:
        found = model.nbest(lines, args.nbest, beam=args.beam, alpha=args.alpha, length_norm=args.length_norm)
        return [
            f"{i} ||| {c.text} ||| logprob= {c.logprob:.6f} tokens= {len(c.tokens) + 1} ||| {c.score:.6f}"
            for i, candidates in enumerate(found)
            for c in candidates
        ]
    hyps = model.translate(lines, beam=args.beam, alpha=args.alpha, greedy=args.greedy, length_norm=args.length_norm)
    if args.align is None:
        return hyps
    layer, head = args.align
    pairs = model.align(lines, hyps, layer=layer, head=head)
    return [f"{h} ||| {'' if a is None else a.pharaoh()}" for h, a in zip(hyps, pairs)]


if __name__ == "__main__":
    sys.exit(main())
