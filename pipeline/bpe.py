"""DVC stage `bpe`: a joint subword model (data/bpe/spm.model) and the encoded splits the loader memory-maps.

By hand: python pipeline/bpe.py data.vocab_size=4000
"""

from aiayn.config.cli import hydra_main
from aiayn.config.schema import Config


def run(cfg: Config) -> dict:
    from aiayn.stages.bpe import bpe

    return bpe(cfg)


if __name__ == "__main__":
    hydra_main(run)
