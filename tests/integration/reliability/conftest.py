"""Fixtures of the reliability tests: encoded smoke data once per session, an uninterrupted reference run."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from tests.integration.pipeline.smoke import overrides as smoke_overrides
from tests.integration.pipeline.smoke import stage as load_stage

from aiayn.config.composition import compose
from aiayn.config.resolve import prepare

REPO = Path(__file__).resolve().parents[3]
# What an uninterrupted run and a resumed run must agree on exactly (CPU, same seed); wall time is not one.
EXACT = ("steps", "tokens_seen", "train_loss", "val_loss", "val_ppl")


@pytest.fixture(scope="session")
def stage() -> Callable:
    return load_stage


@pytest.fixture(scope="session")
def data_dir(tmp_path_factory) -> Path:
    """data/raw and data/bpe of the smoke scale, shared read-only by every test here."""
    root = tmp_path_factory.mktemp("data")
    args = [f"paths.raw={root}/raw", f"paths.bpe={root}/bpe", "scale=smoke", "logger=none"]
    load_stage("fetch").run(prepare(compose(args)))
    load_stage("bpe").run(prepare(compose(args)))
    return root


@pytest.fixture(scope="session")
def overrides(data_dir: Path) -> Callable[..., list[str]]:
    """Overrides of a smoke run writing under `tmp` and reading the shared data."""

    def make(tmp: Path, *extra: str) -> list[str]:
        return smoke_overrides(tmp, *extra, data=data_dir)

    return make


@pytest.fixture(scope="session")
def reference(tmp_path_factory, overrides) -> Path:
    """The run folder of an uninterrupted smoke run of base, seed 1 (12 steps, a checkpoint every 2)."""
    tmp = tmp_path_factory.mktemp("reference")
    load_stage("train").run(prepare(compose(overrides(tmp))))
    return tmp / "runs" / "base" / "seed1"


@pytest.fixture(scope="session")
def exact() -> Callable[[Path], dict]:
    """The train.json values that a resumed run must reproduce bit for bit."""

    def read(run_dir: Path) -> dict:
        summary = json.loads((run_dir / "train.json").read_text())
        return {k: summary[k] for k in EXACT}

    return read


@pytest.fixture(scope="session")
def cli() -> Callable[..., subprocess.Popen]:
    """Start `python pipeline/<script>.py args` as a user would (offline wandb), its output captured."""

    def start(script: str, args: list[str], cwd: Path, env: dict | None = None) -> subprocess.Popen:
        full_env = dict(os.environ, WANDB_MODE="offline", WANDB_SILENT="true", HYDRA_FULL_ERROR="1", **(env or {}))
        return subprocess.Popen(
            [sys.executable, str(REPO / "pipeline" / f"{script}.py"), *args],
            cwd=cwd,
            env=full_env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )

    return start
