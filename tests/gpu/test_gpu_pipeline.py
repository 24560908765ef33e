"""gpu/gpu_pipeline.py: its carry for the GPU image (what `prepare` packs as wheels, from pyproject.toml's
dependencies less what the image's package list satisfies, run as the command a user runs, `lock`) and the m30k
recipe's flow at a CPU smoke size."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from aiayn.run.checkout import REPO


def lock(image: Path) -> dict[str, str]:
    out = subprocess.run(
        [sys.executable, "gpu/gpu_pipeline.py", "lock", "--image", str(image)],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return dict(line.split("==") for line in out.splitlines())


def test_the_shipped_image_list_carries_what_the_image_lacks_or_holds_too_old(tmp_path: Path) -> None:
    carried = lock(REPO / "gpu/gpu-image.txt")
    assert {"dvc", "hydra-core", "omegaconf", "sacremoses", "antlr4-python3-runtime"} <= set(carried)
    assert "sentencepiece" in carried  # the image's 0.2.2 is older than pyproject's >=0.2.3
    assert not {"torch", "lightning", "wandb", "numpy", "pyyaml", "requests"} & set(carried)


def test_a_package_the_image_satisfies_is_not_carried_nor_what_only_it_needs(tmp_path: Path) -> None:
    shipped = (REPO / "gpu/gpu-image.txt").read_text(encoding="utf-8")
    image = tmp_path / "image.txt"
    image.write_text(shipped.replace("sentencepiece==0.2.2", "sentencepiece==99.0") + "dvc\n", encoding="utf-8")
    carried = lock(image)
    assert "sentencepiece" not in carried and "dvc" not in carried
    assert not {"dvc-data", "scmrepo", "pygit2"} & set(carried)  # dvc's own dependencies: the image's dvc brings them
    assert {"hydra-core", "sacremoses"} <= set(carried)
    image.write_text("", encoding="utf-8")  # an empty image: everything but the GPU's own stack is carried
    assert {"numpy", "scipy", "dvc", "pyyaml"} <= set(lock(image)) and "torch" not in lock(image)


SHARED_TOK = REPO.parent / "shared/data/multi30k-tok"


@pytest.mark.skipif(not SHARED_TOK.is_dir(), reason=f"no {SHARED_TOK} (the published lc.norm.tok files)")
@pytest.mark.parametrize("recipe", ["m30k", "m30k_budget"])
def test_the_m30k_recipes_run_as_the_device_call_does(tmp_path: Path, recipe: str) -> None:
    """`--recipe m30k[_budget] --cpu-smoke`: the GPU call's whole flow (a copy, ../shared's files linked as a mirror,
    dvc repro of base x 2 seeds side by side, Table 2 with the Multi30k BLEU), on the CPU with a tiny model; the
    evaluated seeds come back under $OUT/evals, as `aiayn-keep` takes them."""
    env = dict(os.environ, OUT=str(tmp_path / "out"), WANDB_MODE="offline")
    (tmp_path / "out").mkdir()
    args = ["run", "--recipe", recipe, "--cpu-smoke", "--seeds", "1", "2", "--workdir", str(tmp_path / "work")]
    done = subprocess.run(
        [sys.executable, "gpu/gpu_pipeline.py", *args], cwd=REPO, env=env, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert (tmp_path / "work/mirror/multi30k-test_2016_flickr.lc.norm.tok.de").resolve() == (
        SHARED_TOK / "test_2016_flickr.lc.norm.tok.de"
    ).resolve()
    runs = json.loads((tmp_path / "out/runs.json").read_text())["runs"]
    assert set(runs) == {"base/seed1", "base/seed2"}
    assert all(r["test_bleu_lc_tok"] is not None and r["averaged"] == 5 for r in runs.values())
    table2 = (tmp_path / "out/table2.md").read_text()
    assert "Transformer-tiny (Wu et al. 2021)" in table2 and "data: multi30k (lc.norm.tok)" in table2
    assert done.stdout.strip().splitlines()[-1].startswith("RESULT base_test_bleu_lc_tok ")
    kept = tmp_path / "kept"
    keep = [sys.executable, "-m", "aiayn.run.kept", *(str(tmp_path / f"out/evals/base/seed{n}") for n in (1, 2))]
    subprocess.run([*keep, "--kept", str(kept)], check=True, capture_output=True)
    scale = f"{'m30k_tiny' if recipe == 'm30k' else recipe}_gpu_smoke"
    assert sorted(p.name for p in (kept / scale / "multi30k-lc.norm.tok/base").iterdir()) == ["seed1", "seed2"]
    if recipe == "m30k_budget":
        assert re.search(r"^RESULT table2_base_test_bleu_lc_tok \d+\.\d\d$", done.stdout, re.MULTILINE), done.stdout


def test_the_budget_recipe_runs_under_its_own_name_and_its_own_updates() -> None:
    """On a GPU the budget recipe keeps its scale's name (so the seeds kept from CPU runs count, and those trained
    there join them) and refuses --steps (its rate decays to zero at its 1,800 updates); a smoke has its own name."""
    sys.path.insert(0, str(REPO / "gpu"))
    try:
        import gpu_pipeline
    finally:
        sys.path.remove(str(REPO / "gpu"))
    import yaml

    config = yaml.safe_load(gpu_pipeline.m30k_scale_config(None, False, "m30k_budget"))
    assert config["defaults"] == ["m30k_budget", "_self_"] and config["scale"]["name"] == "m30k_budget"
    assert config["trainer"] == {"precision": "32-true"} and "train" not in config and "model" not in config
    assert yaml.safe_load(gpu_pipeline.m30k_scale_config(40, True, "m30k_budget"))["scale"]["name"] == (
        "m30k_budget_gpu_smoke"
    )
    assert yaml.safe_load(gpu_pipeline.m30k_scale_config(None, False))["scale"]["name"] == "m30k_tiny_gpu"
    refused = subprocess.run(
        [sys.executable, "gpu/gpu_pipeline.py", "run", "--recipe", "m30k_budget", "--steps", "900"],
        cwd=REPO,
        capture_output=True,
        text=True,
    )
    assert refused.returncode == 2 and "1,800 updates are its recipe" in refused.stderr
