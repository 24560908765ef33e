"""The attention_figures stage: what base and big (seed 1) attend to in the dev sentences a stated rule picks
(aiayn.inference.attention.pick_sentences), drawn as Figures 3-5 of the paper into results/attention/."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path

from aiayn.config.params import rows_and_seeds
from aiayn.config.schema import Config
from aiayn.inference.attention import look, pick_sentences, write_figures
from aiayn.io import read_lines
from aiayn.run import folders
from aiayn.run.folders import RunSpec

log = logging.getLogger(__name__)

# What the attention_figures stage draws: Table 2's two systems, one seed each, on the dev sentences
# pick_sentences chooses, into results/attention/.
FIGURE_ROWS, FIGURE_SEED = ("base", "big"), 1
FIGURE_DIR = "attention"


def dev_figures(
    runs: Sequence[RunSpec], sources: Sequence[str], references: Sequence[str], bpe_dir: Path, out_dir: Path
) -> list[Path]:
    """For each finished run (a run not finished yet is passed over), the last layer's figures of the dev sentences
    `pick_sentences` chooses, named `{run}-dev{line}` (base-s1-dev44), from dev's weights, which decoded the
    evaluate stage's dev hypotheses (the last checkpoint, or the average of the last row.dev_average_last: the tiny
    scale's 5). Afterwards `out_dir` holds these PNGs and no others."""
    import torch

    from aiayn.inference.trained import finished_run, open_run

    picked = pick_sentences(sources, references)
    written: list[Path] = []
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # one sentence at a time: matrices too small for a second thread to pay for itself
    try:
        for spec in runs:
            try:
                recorded = finished_run(spec.run_dir)
            except (FileNotFoundError, ValueError) as err:
                log.warning("no attention figures of %s: %s", spec.shown(spec.run_dir), err)
                continue
            dev_average = max(1, recorded.row.dev_average_last)
            run = open_run(spec.run_dir, average=dev_average, bpe_dir=bpe_dir)
            for index, feature in picked:
                looked = look(run, sources[index])
                label = f"{spec.name()}, dev line {index + 1} ({feature})"
                written += write_figures(looked, out_dir, f"{spec.name()}-dev{index + 1}", label=label)
    finally:
        torch.set_num_threads(threads)
    for stale in set(Path(out_dir).glob("*.png")) - set(written):
        stale.unlink()
    return written


def attention_figures(cfg: Config) -> list[Path]:
    """The attention_figures stage: results/attention/ holds what FIGURE_ROWS (seed FIGURE_SEED, of the variant the
    tables show, when they are among params.yaml's rows and their runs finished) attend to in the dev sentences
    `pick_sentences` chooses, and no other PNG."""
    rows, seeds, _ = rows_and_seeds(cfg.tables)
    specs = [
        RunSpec.for_row(row, FIGURE_SEED, dict(cfg.variant), cfg.paths.runs, cfg.paths.evals)
        for row in FIGURE_ROWS
        if row in rows and FIGURE_SEED in seeds.get(row, [])
    ]
    raw, out_dir = Path(cfg.paths.raw), Path(cfg.paths.results) / FIGURE_DIR
    out_dir.mkdir(parents=True, exist_ok=True)  # a DVC output even when no run is drawn
    written = dev_figures(
        specs,
        read_lines(raw / folders.raw_file("valid", "src")),
        read_lines(raw / folders.raw_file("valid", "tgt")),
        Path(cfg.paths.bpe),
        out_dir,
    )
    _log(cfg, written)
    return written


def _log(cfg: Config, figures: list[Path]) -> None:
    """The figures as images of one wandb run of job_type attention_figures, beside the aggregate's."""
    from aiayn.run import tracking

    run = tracking.start_run(
        cfg, job_type="attention_figures", name=f"attention-figures-{cfg.scale.name}", group="aggregate"
    )
    if run is None:
        return
    try:
        import wandb

        for png in figures:
            run.log({f"{FIGURE_DIR}/{png.stem}": wandb.Image(str(png))})
    except Exception as err:
        log.warning("could not log the attention figures to wandb: %s", tracking.scrub(str(err)))
    finally:
        tracking.finish(run)
