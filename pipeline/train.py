"""DVC stage `train@{row}`: train one row with one seed into its run folder (aiayn.run.folders: runs/{row}/seed{seed}/,
runs/{row}/{variant}/seed{seed}/ for a variant).

DVC runs `python pipeline/train.py hydra/launcher=parallel row=A1 seeds_from=seeds/A1.yaml`: a Hydra multirun over
the row's seeds, one stage per row (a Python start-up with Lightning costs seconds); a seed whose run already
finished is skipped. By hand: python pipeline/train.py row=A1 seed=2     Sweep: python pipeline/train.py -m seed=1,2,3
"""

from aiayn.config.cli import hydra_main
from aiayn.config.schema import Config
from aiayn.run.kept import idle
from aiayn.stages.train import train  # imported before the launcher forks a seed's job (hydra/launcher=parallel)


def run(cfg: Config) -> dict:
    return train(cfg)


if __name__ == "__main__":
    hydra_main(run, idle=idle)
