"""Draw what a trained run attends to in one sentence, as Figures 3-5 of the paper do; the attention_figures stage.

    aiayn-attention runs/base/seed1 "The dog that sees the ball sleeps."
    aiayn-attention runs/big/seed1 "The dog that sees the ball sleeps." --layer 2 --out figures/

The run is opened as the evaluate stage opens it (aiayn.inference.trained: the mean of its last `row.average_last`
checkpoints, its tokenizer) and translates the sentence with its decode settings. Its own translation is then fed
back through the model's training forward pass (teacher forcing) with the attention weights captured
(aiayn.model.capture), and three figures are written for the chosen layer (1 to n_layers; default the last):

- `{name}-encoder{L}-lines.png`: the encoder's self-attention over the source, a line from each token (left) to the
  tokens it attends to (right), every head in its own colour, width and opacity by weight;
- `{name}-encoder{L}-heads.png`: the same weights as one heat map per head (query x key);
- `{name}-cross{L}.png`: the decoder's encoder-decoder attention, target tokens x source tokens, the mean of the
  heads and each head; row t is the step that chose target token t (the last: EOS).

Tokens are the tokenizer's subword pieces ("▁" starts a word), the source ending in EOS as the model reads it.
The DVC stage `attention_figures` (pipeline/attention_figures.py, beside aggregate: the tables read JSON and text, the
figures reopen the models) draws base's and big's seed 1 on the dev sentences `pick_sentences` chooses, into
results/attention/. Drawn with matplotlib's Agg, no pyplot state.
"""

from __future__ import annotations

import argparse
import itertools
import logging
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from aiayn.data import synthetic_lexicon as lx
from aiayn.inference.drawing import plot_attention_grid, plot_attention_lines
from aiayn.inference.translate import positive

if TYPE_CHECKING:
    from aiayn.inference.trained import OpenedRun

log = logging.getLogger(__name__)

# The dev sentences the stage draws --------------------------------------------------------------------------------

# In the German-like references (aiayn.data.synthetic): a comma then a relative pronoun opens a relative clause,
# whose pronoun agrees with its noun in gender and number across the comma and whose finite verb comes last,
# agreeing with the clause's subject; a subordinator (or "dass" after a verb of saying) opens a verb-final clause.
RELATIVE_PRONOUNS = frozenset(lx.REL_PRONOUN.values())
SUBORDINATORS = frozenset({de for _, de in lx.SUBORDINATORS} | {"dass"})
MAX_WORDS = 16  # source words of a sentence the figures draw: longer ones make unreadable columns


def _words(text: str) -> list[str]:
    return [w.strip(",.?!").lower() for w in text.split()]


def has_relative_clause(reference: str) -> bool:
    words = reference.split()
    return any(a.endswith(",") and b.lower() in RELATIVE_PRONOUNS for a, b in itertools.pairwise(words))


def has_subordinate_clause(reference: str) -> bool:
    return any(w in SUBORDINATORS for w in _words(reference))


FEATURES = (("relative clause", has_relative_clause), ("subordinate clause", has_subordinate_clause))


def pick_sentences(sources: Sequence[str], references: Sequence[str]) -> list[tuple[int, str]]:
    """(index, feature) of the dev sentences to draw: for each of FEATURES in turn, the first sentence in file order
    of at most MAX_WORDS source words whose reference has it and that no earlier feature took; the first dev
    sentence, as "first dev sentence", when none has any."""
    picked: list[tuple[int, str]] = []
    for feature, test in FEATURES:
        taken = {i for i, _ in picked}
        found = next(
            (
                i
                for i, (src, ref) in enumerate(zip(sources, references))
                if i not in taken and len(src.split()) <= MAX_WORDS and test(ref)
            ),
            None,
        )
        if found is not None:
            picked.append((found, feature))
    return picked or ([(0, "first dev sentence")] if sources else [])


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

    from aiayn.decode.search import autocast, source_ids
    from aiayn.model.capture import capture_attention

    model, tokenizer = run.model, run.tokenizer
    src = source_ids(tokenizer, [sentence], model.cfg.max_positions)[0]
    if not src:
        raise ValueError(f"{sentence!r} has no tokens to attend over; give a sentence")
    decoding = run.decoding
    output = decoding.search(model, tokenizer, [sentence], "attention")[0]
    with (
        torch.inference_mode(),
        autocast(decoding.precision, decoding.device),
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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="aiayn-attention", description=__doc__.splitlines()[0])
    parser.add_argument("run_dir", type=Path, help="a finished run folder, e.g. runs/base/seed1")
    parser.add_argument("sentence", help="the source sentence, raw text")
    parser.add_argument("--layer", type=int, help="the layer to draw, 1 to n_layers (default: the last)")
    parser.add_argument("--out", type=Path, default=Path("attention"), help="output folder (default: attention/)")
    parser.add_argument("--name", default="sentence", help="the files' name prefix (default: sentence)")
    parser.add_argument("--average", type=positive, help="average the last K checkpoints (default: the row's)")
    parser.add_argument("--bpe", type=Path, help="the bpe folder holding the run's spm.model (default: paths.bpe)")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s: %(message)s", stream=sys.stderr)
    from aiayn.inference.trained import open_run

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
