"""Translate stdin to stdout with a trained run, as fairseq-interactive, onmt_translate and marian-decoder do.

    python -m aiayn.translate runs/base/seed1 < sentences.en > sentences.de
    python -m aiayn.translate runs/base/seed1 --beam 8 --alpha 1.0 --average 1 < sentences.en
    python -m aiayn.translate runs/base/seed1 --greedy < sentences.en

One raw-text sentence a line in, its translation a line out, in the same order and as many lines: an empty line
stays empty, a line longer than the model's positions is translated from its first max_positions - 1 subword tokens
(with a warning on stderr). Sentences are batched by tokens (decode.batch_tokens). The run's own tokenizer
(paths.bpe, checked against the checkpoint's fingerprint) and decoding settings (its config.yaml's decode: beam
size, length penalty, max_len_b, precision) apply unless a flag says otherwise; the weights are the mean of its last
`row.average_last` checkpoints (Table 2's; the last checkpoint for a row that averages none). Loading and decoding
are the evaluate stage's own (aiayn.eval.trained), so the same sentences with the same settings give the evaluate
stage's hypotheses.
"""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path

from omegaconf import DictConfig, OmegaConf


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


def with_decode(cfg: DictConfig, beam: int | None, alpha: float | None, greedy: bool) -> DictConfig:
    """The run's config with the decode settings the flags change (the others as the run has them)."""
    changes: dict[str, object] = {"strategy": "greedy"} if greedy else {}
    if beam is not None:
        changes |= {"strategy": "beam", "beam_size": beam}
    if alpha is not None:
        changes["length_penalty"] = alpha
    merged = OmegaConf.merge(cfg, {"decode": changes})
    assert isinstance(merged, DictConfig), "a DictConfig merged with a dict is one"
    return merged


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m aiayn.translate", description=__doc__.splitlines()[0])
    parser.add_argument("run_dir", type=Path, help="a finished run folder, e.g. runs/base/seed1")
    search = parser.add_mutually_exclusive_group()
    search.add_argument("--beam", type=positive, help="beam size (default: the run's decode.beam_size)")
    search.add_argument("--greedy", action="store_true", help="greedy search instead of the run's beam search")
    parser.add_argument("--alpha", type=float, help="length penalty alpha (default: the run's decode.length_penalty)")
    parser.add_argument(
        "--average", type=positive, help="average the last K checkpoints (default: the row's average_last, or 1)"
    )
    parser.add_argument("--bpe", type=Path, help="the bpe folder holding the run's spm.model (default: paths.bpe)")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s: %(message)s", stream=sys.stderr)
    from aiayn.eval.trained import open_run, translate_with  # torch: after the arguments are checked

    try:
        run = open_run(args.run_dir, args.average, args.bpe)
        cfg = with_decode(run.cfg, args.beam, args.alpha, args.greedy)
        lines = read_lines(sys.stdin.buffer)
        hyps = translate_with(cfg, run.model, run.tokenizer, lines, run.device, "translate")
    except (FileNotFoundError, ValueError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    sys.stdout.buffer.write("".join(h + "\n" for h in hyps).encode("utf-8"))
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
