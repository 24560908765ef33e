"""The second command of DVC stage `evaluate@{row}`: Table 2's row as the ensemble of its seeds (aiayn.stages.ensemble),
after each seed's own evaluation; nothing for a row outside Table 2. dvc.yaml passes the row's seeds as the seeds
stage wrote them (seeds_from=seeds/{row}.yaml), here one list rather than a multirun.

By hand: python pipeline/ensemble.py row=base seeds_from=seeds/base.yaml
"""

import sys

from aiayn.config.cli import hydra_main, seeds_listed
from aiayn.config.schema import Config
from aiayn.stages.ensemble import ensemble

SEEDS: list[int] = []


def run(cfg: Config) -> dict | None:
    return ensemble(cfg, SEEDS or [int(cfg.seed)])


if __name__ == "__main__":
    sys.argv[1:], SEEDS[:] = seeds_listed(sys.argv[1:])
    hydra_main(run)
