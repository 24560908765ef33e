"""bench/gpu_pipeline.py's carry for the GPU image: what `prepare` packs as wheels, from pyproject.toml's dependencies
less what the image's package list satisfies (run as the command a user runs, `lock`)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from aiayn.project import REPO


def lock(image: Path) -> dict[str, str]:
    out = subprocess.run(
        [sys.executable, "bench/gpu_pipeline.py", "lock", "--image", str(image)],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return dict(line.split("==") for line in out.splitlines())


def test_the_shipped_image_list_carries_what_the_image_lacks_or_holds_too_old(tmp_path: Path) -> None:
    carried = lock(REPO / "bench/gpu-image.txt")
    assert {"dvc", "hydra-core", "omegaconf", "sacremoses", "antlr4-python3-runtime"} <= set(carried)
    assert "sentencepiece" in carried  # the image's 0.2.2 is older than pyproject's >=0.2.3
    assert not {"torch", "lightning", "wandb", "numpy", "pyyaml", "requests"} & set(carried)


def test_a_package_the_image_satisfies_is_not_carried_nor_what_only_it_needs(tmp_path: Path) -> None:
    shipped = (REPO / "bench/gpu-image.txt").read_text(encoding="utf-8")
    image = tmp_path / "image.txt"
    image.write_text(shipped.replace("sentencepiece==0.2.2", "sentencepiece==99.0") + "dvc\n", encoding="utf-8")
    carried = lock(image)
    assert "sentencepiece" not in carried and "dvc" not in carried
    assert not {"dvc-data", "scmrepo", "pygit2"} & set(carried)  # dvc's own dependencies: the image's dvc brings them
    assert {"hydra-core", "sacremoses"} <= set(carried)
    image.write_text("", encoding="utf-8")  # an empty image: everything but the GPU's own stack is carried
    assert {"numpy", "scipy", "dvc", "pyyaml"} <= set(lock(image)) and "torch" not in lock(image)
