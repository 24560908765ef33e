"""The project as git sees it, copied into a fresh folder: what bench/pipeline_time.py and bench/gpu_pipeline.py time
and the DVC tests run `dvc repro` in, never the developer's own data or runs."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import yaml

from aiayn.io import CHECKOUT

REPO = CHECKOUT  # the checkout this package is installed from (pip install -e)


def project_files(root: Path = REPO) -> list[str]:
    """The files of the checkout at `root` as `git ls-files -co --exclude-standard` lists them (tracked, and untracked
    but not ignored), read with dulwich (a DVC dependency), so no git binary is needed."""
    from dulwich import porcelain
    from dulwich.repo import Repo

    with Repo(str(root)) as repo:
        tracked = {path.decode() for path in repo.open_index()}
    untracked = porcelain.status(str(root), untracked_files="all").untracked
    return sorted(tracked | {p.decode() if isinstance(p, bytes) else p for p in untracked})


def copy_project(dst: Path, **params: Any) -> Path:
    """The project's files as git sees them (project_files) copied into `dst`, a fresh git repository, with `params`
    written over params.yaml's values."""
    from dulwich.repo import Repo

    for rel in project_files():
        if (REPO / rel).is_file():
            (dst / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(REPO / rel, dst / rel)
    merged = yaml.safe_load((dst / "params.yaml").read_text()) | params
    (dst / "params.yaml").write_text(yaml.safe_dump(merged))
    Repo.init(str(dst)).close()
    return Path(dst)
