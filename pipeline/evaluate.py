"""DVC stage `evaluate@{row}-{seed}`: decode dev and test, score them, write eval.json and the hypotheses.

By hand: python pipeline/evaluate.py row=A1 seed=2 decode=greedy
"""
from omegaconf import DictConfig

from aiayn.config import prepare
from aiayn.config.cli import hydra_main


def run(cfg: DictConfig) -> dict:
    from aiayn.eval.stage import evaluate

    return evaluate(prepare(cfg))


if __name__ == "__main__":
    hydra_main(run)
