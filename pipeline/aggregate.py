"""DVC stage `aggregate`: Table 2 and Table 3 over every row and seed in results/, with plots.

By hand: python pipeline/aggregate.py 'aggregate.rows=[base,A1]' 'aggregate.seeds=[1,2,3]'
"""

from omegaconf import DictConfig

from aiayn.config.cli import hydra_main
from aiayn.config.resolve import prepare


def run(cfg: DictConfig) -> dict:
    from aiayn.report.stage import tabulate

    return tabulate(prepare(cfg))


if __name__ == "__main__":
    hydra_main(run)
