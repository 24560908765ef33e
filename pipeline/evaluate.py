"""DVC stage `evaluate@{row}`: decode dev (and test, for Table 2's systems), score, and write
its evaluation folder (aiayn.run.folders: evals/{row}/[{variant}/]seed{seed}/): eval.json and the
hypotheses. DVC passes seeds_from=seeds/{row}.yaml: a multirun over the
row's seeds on params.yaml's launcher, as for train.

By hand: python pipeline/evaluate.py row=A1 seed=2 decode=greedy
"""

from aiayn.config.cli import hydra_main
from aiayn.config.schema import Config
from aiayn.run.kept import idle
from aiayn.stages.evaluate import evaluate  # imported before the launcher forks a seed's job (hydra/launcher=parallel)


def run(cfg: Config) -> dict:
    return evaluate(cfg)


if __name__ == "__main__":
    hydra_main(run, idle=idle)
