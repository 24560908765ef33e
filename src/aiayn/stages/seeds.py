"""The seeds stage: each row's seeds (params.yaml's `seeds`, then the row's `extra_seeds`) in its own file."""

from __future__ import annotations

from pathlib import Path

from aiayn.config.params import EXTRA_SEEDS, Params
from aiayn.io import atomic_write_text


def seeds(params_file: str | Path, out_dir: str | Path) -> dict[str, list[int]]:
    """One `{row}.yaml` holding `seeds: [...]` per row of the params file: what train@{row} and evaluate@{row} run
    (seeds_from) and track, so a row's stages rerun only when its own seeds change."""
    per_row = Params.read(params_file).seeds_per_row()
    for row, row_seeds in per_row.items():
        atomic_write_text(
            Path(out_dir) / f"{row}.yaml",
            f"# {row}'s seeds: seeds + {EXTRA_SEEDS}.{row} of {Path(params_file).name} "
            f"(written by pipeline/seeds.py)\nseeds: [{', '.join(map(str, row_seeds))}]\n",
        )
    return per_row
