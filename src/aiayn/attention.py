"""Draw what a trained run attends to in one sentence, as Figures 3-5 of the paper do.

    python -m aiayn.attention runs/base/seed1 "The dog that sees the ball sleeps."
    python -m aiayn.attention runs/big/seed1 "The dog that sees the ball sleeps." --layer 2 --out figures/

The run is opened as the evaluate stage opens it (aiayn.eval.trained: the mean of its last `row.average_last`
checkpoints, its tokenizer) and translates the sentence with its decode settings. Its own translation is then fed
back through the model's training forward pass (teacher forcing) with the attention weights captured
(aiayn.model.capture), and three figures are written for the chosen layer (1 to n_layers; default the last):

- `{name}-encoder{L}-lines.png`: the encoder's self-attention over the source, a line from each token (left) to the
  tokens it attends to (right), every head in its own colour, width and opacity by weight;
- `{name}-encoder{L}-heads.png`: the same weights as one heat map per head (query x key);
- `{name}-cross{L}.png`: the decoder's encoder-decoder attention, target tokens x source tokens, the mean of the
  heads and each head; row t is the step that chose target token t (the last: EOS).

Tokens are the tokenizer's subword pieces ("▁" starts a word), the source ending in EOS as the model reads it.
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from aiayn.translate import positive

if TYPE_CHECKING:
    from aiayn.eval.trained import OpenedRun
    from aiayn.runspec import RunSpec

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Looked:
    """One sentence through a run: its source and output pieces, the translation, and per layer (first to last)
    the encoder's self-attention (H, S, S) and the decoder's encoder-decoder attention (H, T, S)."""

    source: list[str]  # S pieces, EOS last
    target: list[str]  # T pieces: the translation's, then EOS
    translation: str
    encoder: list[np.ndarray]
    cross: list[np.ndarray]


def look(run: OpenedRun, sentence: str) -> Looked:
    """Translate `sentence` with the run's decode settings, then capture the attention of the teacher-forced pass
    over that translation."""
    import torch

    from aiayn.decode.translate import autocast, source_ids
    from aiayn.eval.trained import decode_precision, search_with
    from aiayn.model.capture import capture_attention

    model, tokenizer = run.model, run.tokenizer
    src = source_ids(tokenizer, [sentence], model.cfg.max_positions)[0]
    if not src:
        raise ValueError(f"{sentence!r} has no tokens to attend over; give a sentence")
    output = search_with(run.cfg, model, tokenizer, [sentence], run.device, "attention")[0]
    with (
        torch.inference_mode(),
        autocast(decode_precision(run.cfg), run.device),
        capture_attention(model) as record,
    ):
        model.features(
            torch.tensor([src], device=run.device), torch.tensor([[tokenizer.bos_id, *output]], device=run.device)
        )
    return Looked(
        source=[tokenizer.piece(i) for i in src],
        target=[tokenizer.piece(i) for i in [*output, tokenizer.eos_id]],
        translation=tokenizer.decode([output])[0],
        encoder=[calls[0][0].float().cpu().numpy() for calls in record.encoder],
        cross=[calls[0][0].float().cpu().numpy() for calls in record.cross],
    )


def figure_names(name: str, layer: int) -> tuple[str, str, str]:
    """The three files `write_figures` writes for a layer (1-based): encoder lines, encoder heads, cross."""
    return f"{name}-encoder{layer}-lines.png", f"{name}-encoder{layer}-heads.png", f"{name}-cross{layer}.png"


def write_figures(looked: Looked, out_dir: Path, name: str, layer: int | None = None, label: str = "") -> list[Path]:
    """The three figures of `layer` (1 to n_layers; None: the last) into `out_dir`, named by `figure_names`;
    `label` (the run, the sentence's origin) heads each title."""
    from aiayn.report.attention import plot_attention_grid, plot_attention_lines

    n_layers = len(looked.encoder)
    layer = n_layers if layer is None else layer
    if not 1 <= layer <= n_layers:
        raise ValueError(f"--layer {layer}: the model has layers 1 to {n_layers}")
    lines, heads, cross = (Path(out_dir) / f for f in figure_names(name, layer))
    head = f"{label}: " if label else ""
    source, target = looked.source, looked.target
    return [
        plot_attention_lines(
            looked.encoder[layer - 1], source, lines, f"{head}encoder self-attention, layer {layer} of {n_layers}"
        ),
        plot_attention_grid(
            looked.encoder[layer - 1],
            source,
            source,
            heads,
            f"{head}encoder self-attention, layer {layer} of {n_layers}, per head (row attends to column)",
        ),
        plot_attention_grid(
            looked.cross[layer - 1],
            target,
            source,
            cross,
            f"{head}encoder-decoder attention, layer {layer} of {n_layers}\n"
            f"{looked.translation!r}: output token (row) attends to source token (column)",
            with_mean=True,
        ),
    ]


# What the aggregate stage draws: Table 2's two systems, one seed each, on the dev sentences
# aiayn.report.attention.pick_sentences chooses, into results/attention/.
FIGURE_ROWS, FIGURE_SEED = ("base", "big"), 1
FIGURE_DIR = "attention"


def dev_figures(
    runs: Sequence[RunSpec], sources: Sequence[str], references: Sequence[str], bpe_dir: Path, out_dir: Path
) -> list[Path]:
    """For each finished run (a run not finished yet is passed over), the last layer's figures of the dev sentences
    `pick_sentences` chooses, named `{run}-dev{line}` (base-s1-dev44), from the run's last checkpoint (dev's
    weights, which decoded the evaluate stage's dev hypotheses). Afterwards `out_dir` holds these PNGs
    and no others."""
    import torch

    from aiayn.eval.trained import finished_run, open_run
    from aiayn.report.attention import pick_sentences

    picked = pick_sentences(sources, references)
    written: list[Path] = []
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # one sentence at a time: matrices too small for a second thread to pay for itself
    try:
        for spec in runs:
            try:
                finished_run(spec.run_dir)
            except (FileNotFoundError, ValueError) as err:
                log.warning("no attention figures of %s: %s", spec.shown(spec.run_dir), err)
                continue
            run = open_run(spec.run_dir, average=1, bpe_dir=bpe_dir)
            for index, feature in picked:
                looked = look(run, sources[index])
                label = f"{spec.name()}, dev line {index + 1} ({feature})"
                written += write_figures(looked, out_dir, f"{spec.name()}-dev{index + 1}", label=label)
    finally:
        torch.set_num_threads(threads)
    for stale in set(Path(out_dir).glob("*.png")) - set(written):
        stale.unlink()
    return written


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m aiayn.attention", description=__doc__.splitlines()[0])
    parser.add_argument("run_dir", type=Path, help="a finished run folder, e.g. runs/base/seed1")
    parser.add_argument("sentence", help="the source sentence, raw text")
    parser.add_argument("--layer", type=int, help="the layer to draw, 1 to n_layers (default: the last)")
    parser.add_argument("--out", type=Path, default=Path("attention"), help="output folder (default: attention/)")
    parser.add_argument("--name", default="sentence", help="the files' name prefix (default: sentence)")
    parser.add_argument("--average", type=positive, help="average the last K checkpoints (default: the row's)")
    parser.add_argument("--bpe", type=Path, help="the bpe folder holding the run's spm.model (default: paths.bpe)")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s: %(message)s", stream=sys.stderr)
    from aiayn.eval.trained import open_run

    try:
        run = open_run(args.run_dir, args.average, args.bpe)
        looked = look(run, args.sentence)
        paths = write_figures(looked, args.out, args.name, args.layer, label=str(args.run_dir))
    except (FileNotFoundError, ValueError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    print(f"translation: {looked.translation}")
    for path in paths:
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
