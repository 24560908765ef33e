"""DVC stage `attention_figures`: what base and big (seed 1) attend to in a few dev sentences, into results/attention/
(aiayn.inference.attention). Beside aggregate, which reads JSON and text only: this stage reopens the models.

By hand: python pipeline/attention_figures.py 'tables.rows=[base]' 'tables.seeds=[1]'
"""

from aiayn.config.cli import hydra_main
from aiayn.config.schema import Config


def run(cfg: Config) -> list:
    from aiayn.stages.attention_figures import attention_figures

    return attention_figures(cfg)


if __name__ == "__main__":
    hydra_main(run)
