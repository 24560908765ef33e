"""Dev-set choice of beam size and length penalty (section 6.1); not a DVC stage, a sweep run by hand.

Sweep: python pipeline/tune_decode.py -m +tune=decode row=base seed=1
   or: python pipeline/tune_decode.py -m row=base seed=1 decode.beam_size=1,4 decode.length_penalty=0.0,0.6
Each job decodes the dev split only and writes decode_tuning/{row}/seed{seed}/beam{b}-lp{a}.json (with
decode.length_norm=power: beam{b}-lp{a}-power.json); the folder's chosen.json, table.md and decode/tuned.yaml
always reflect every setting written so far.
Use the choice: python pipeline/evaluate.py row=base seed=1 --config-dir decode_tuning/base/seed1 decode=tuned
"""

from aiayn.config.cli import hydra_main
from aiayn.config.schema import Config
from aiayn.stages.tune_decode import (
    tune_decode,  # imported before the launcher forks a seed's job (hydra/launcher=parallel)
)


def run(cfg: Config) -> dict:
    return tune_decode(cfg)


if __name__ == "__main__":
    hydra_main(run)
