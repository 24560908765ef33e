"""The project as git sees it, copied into a fresh folder: what bench/pipeline_time.py and bench/gpu_pipeline.py time
and the DVC tests run `dvc repro` in, never the developer's own data or runs."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[2]  # the checkout this package is installed from (pip install -e)


def copy_project(dst: Path, **params: Any) -> Path:
    """The project's files as git sees them (tracked, and untracked but not ignored) copied into `dst`, a fresh git
    repository, with `params` written over params.yaml's values."""
    listed = subprocess.run(
        ["git", "ls-files", "-co", "--exclude-standard"], cwd=REPO, capture_output=True, text=True, check=True
    ).stdout.splitlines()
    for rel in listed:
        if (REPO / rel).is_file():
            (dst / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(REPO / rel, dst / rel)
    merged = yaml.safe_load((dst / "params.yaml").read_text()) | params
    (dst / "params.yaml").write_text(yaml.safe_dump(merged))
    subprocess.run(["git", "init", "-q"], cwd=dst, check=True)
    return Path(dst)
