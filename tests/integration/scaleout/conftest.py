"""Shared helpers of the scale-out tests: a smoke-scale data workspace and running pipeline scripts as processes."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from tests.integration.pipeline import smoke

from aiayn.config.composition import compose
from aiayn.config.resolve import prepare


def env() -> dict[str, str]:
    """The environment of a child process: offline wandb, full Hydra errors, this venv's tools first on PATH."""
    return dict(
        os.environ,
        WANDB_MODE="offline",
        WANDB_SILENT="true",
        HYDRA_FULL_ERROR="1",
        PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
    )


def _sh(args: list[str], cwd: Path, timeout: float = 600) -> subprocess.CompletedProcess:
    proc = subprocess.run(args, cwd=cwd, env=env(), capture_output=True, text=True, timeout=timeout)
    assert proc.returncode == 0, f"{' '.join(map(str, args))} failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    return proc


@pytest.fixture(scope="package")
def sh():
    """`sh(args, cwd, timeout=600)`: run a command, failing the test with the tail of its output on a non-zero exit."""
    return _sh


def data_overrides(tmp: Path) -> list[str]:
    return smoke.data_overrides(tmp / "data")


@pytest.fixture(scope="package")
def smoke_data(tmp_path_factory) -> Path:
    """fetch and bpe at the smoke scale (about a second), through the stages' run()."""
    tmp = tmp_path_factory.mktemp("smoke_data")
    for name in ("fetch", "bpe"):
        smoke.stage(name).run(prepare(compose(data_overrides(tmp))))
    return tmp


@pytest.fixture(scope="package")
def smoke_overrides(smoke_data: Path) -> list[str]:
    """Overrides that point a pipeline script at the smoke workspace's data (add paths.runs per test)."""
    return data_overrides(smoke_data)
