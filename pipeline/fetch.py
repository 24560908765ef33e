"""DVC stage `fetch`: the raw parallel corpus in data/raw/{train,valid,test}.{src,tgt} and data/raw/stats.json.

By hand: python pipeline/fetch.py data=synthetic   (or data=local data.path=..., data=multi30k, data=wmt14_en_de)
"""

from aiayn.config.cli import hydra_main
from aiayn.config.schema import Config


def run(cfg: Config) -> dict:
    from aiayn.stages.fetch import fetch

    return fetch(cfg)


if __name__ == "__main__":
    hydra_main(run)
