"""DVC stage `aggregate`: Table 2 and Table 3 over every row and seed in results/, with plots.

By hand: python pipeline/aggregate.py 'tables.rows=[base,A1]' 'tables.seeds=[1,2,3]'
"""

from aiayn.config.cli import hydra_main
from aiayn.config.schema import Config


def run(cfg: Config) -> dict:
    from aiayn.stages.aggregate import aggregate

    return aggregate(cfg)


if __name__ == "__main__":
    hydra_main(run)
