"""Shared fixtures: where ../shared lives (tests that need it skip cleanly when it is absent)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("AIAYN_SHARED", REPO.parent / "shared"))


@pytest.fixture(scope="session")
def repo_root() -> Path:
    return REPO


@pytest.fixture(scope="session")
def shared_dir() -> Path:
    """The team's shared folder; skip the test when it is not there."""
    if not SHARED.is_dir():
        pytest.skip(f"{SHARED} is absent")
    return SHARED


@pytest.fixture(scope="session")
def copy_project():
    """`copy_project(dst, **params) -> dst`: the project copied into dst, a fresh git repository, with params.yaml
    values replaced (aiayn.run.checkout's, which bench/pipeline_time.py times the default pipeline in too)."""
    from aiayn.run.checkout import copy_project

    return copy_project
