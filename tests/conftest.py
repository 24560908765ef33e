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


def _copy_project(dst: Path, **params) -> Path:
    """The project's files as git sees them (tracked, and untracked but not ignored) copied into `dst`, with
    `params` written over params.yaml: a fresh repository for DVC tests, never the developer's own data or runs."""
    import shutil
    import subprocess

    import yaml

    listed = subprocess.run(["git", "ls-files", "-co", "--exclude-standard"], cwd=REPO, capture_output=True,
                            text=True, check=True).stdout.splitlines()
    for rel in listed:
        if (REPO / rel).is_file():
            (dst / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(REPO / rel, dst / rel)
    merged = yaml.safe_load((dst / "params.yaml").read_text()) | params
    (dst / "params.yaml").write_text(yaml.safe_dump(merged))
    return dst


@pytest.fixture(scope="session")
def copy_project():
    """`copy_project(dst, **params) -> dst`: the project copied into dst with params.yaml values replaced."""
    return _copy_project
