"""The stage scripts' command line: a misspelt key gets the same "did you mean" as params.yaml's, on every entry
point, before Hydra composes anything (Hydra's own message would suggest `+`, which then fails with a traceback)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from aiayn.config.cli import check_override_keys
from aiayn.config.schema import ConfigError

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("arg", ["train.lr_factr=2", "+train.lr_factr=2", "++train.lr_factr=2"])
def test_a_misspelt_key_is_named_with_the_key_meant(arg: str):
    with pytest.raises(ConfigError, match=r"unknown key 'train.lr_factr' \(did you mean 'train.lr_factor'\?\)"):
        check_override_keys(["row=base", arg])


def test_keys_groups_and_hydras_own_pass():
    check_override_keys(
        ["-m", "row=A1", "seed=1,2", "scale=tiny", "+tune=decode", "hydra/launcher=slurm", "hydra.run.dir=x"]
        + ["train.lr_factor=2", "row.average_last=0", "paths.runs=/tmp/r", "tables.rows=[base]", "variant.x=1"]
    )


@pytest.mark.parametrize("script", ["train", "evaluate", "aggregate"])
def test_every_stage_script_says_it_before_hydra_runs(script: str):
    out = subprocess.run(
        [sys.executable, str(REPO / "pipeline" / f"{script}.py"), "row=base", "decode.beam=2"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 1 and out.stdout == ""
    assert out.stderr == "error: the command line: unknown key 'decode.beam' (did you mean 'decode.beam_size'?)\n"
