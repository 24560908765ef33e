"""The package as a user installs it from a release (`pip install .`, not editable), used outside the checkout: a run
folder copied anywhere translates and exports (it carries its tokenizer), and every console script of
pyproject.toml's [project.scripts] and its `python -m` form answers."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from omegaconf import OmegaConf

from aiayn.inference import load
from aiayn.run.checkout import REPO, copy_project

tomllib = pytest.importorskip("tomllib")  # Python 3.11
SCRIPTS = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]["scripts"]


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> Path:
    """The package built from a copy of the checkout (what git sees) and installed into a folder of its own with
    `pip install --no-deps --target` (the environment's torch and the rest serve as its dependencies)."""
    tmp = tmp_path_factory.mktemp("installed")
    source = copy_project(tmp / "source")
    site = tmp / "site"
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation", "--no-index"]
        + ["--target", str(site), str(source)],
        check=True,
        capture_output=True,
        text=True,
    )
    return site


def _run(site: Path, cwd: Path, *argv: str, stdin: str | None = None) -> subprocess.CompletedProcess:
    """A command run in `cwd` with the installed package first on the path and no checkout to fall back on."""
    env = {**os.environ, "PYTHONPATH": str(site), "PATH": f"{site / 'bin'}{os.pathsep}{os.environ['PATH']}"}
    env.pop("AIAYN_CONF", None)
    return subprocess.run(argv, cwd=cwd, env=env, input=stdin, capture_output=True, text=True, timeout=300)


def test_the_installed_package_is_not_the_checkout(installed: Path, tmp_path: Path):
    out = _run(installed, tmp_path, sys.executable, "-c", "import aiayn.paper as p; print(p.__file__)")
    assert out.returncode == 0, out.stderr
    assert Path(out.stdout.strip()).is_relative_to(installed)
    paper = "from aiayn.paper import paper_base_bleu; from aiayn.cost.devices import load; print(paper_base_bleu(), "
    out = _run(installed, tmp_path, sys.executable, "-c", paper + "sorted(load()))")
    assert out.returncode == 0 and "25.8" in out.stdout, out.stderr  # packaged data: the paper's tables, devices


@pytest.mark.parametrize("script", sorted(SCRIPTS))
def test_every_console_script_and_its_module_answer(installed: Path, tmp_path: Path, script: str):
    module = SCRIPTS[script].split(":")[0]
    module = module.removesuffix(".cli")  # aiayn.export.cli's main is `python -m aiayn.export` (its __main__)
    for argv in ([str(installed / "bin" / script), "--help"], [sys.executable, "-m", module, "--help"]):
        out = _run(installed, tmp_path, *argv)
        assert out.returncode == 0, f"{' '.join(argv)}: {out.stderr}"
        assert "usage:" in out.stdout


def test_a_copied_run_folder_translates_and_exports_outside_the_checkout(installed: Path, workspace: Path, tmp_path):
    run = shutil.copytree(workspace / "runs" / "base" / "seed1", tmp_path / "elsewhere" / "my-run")
    assert (run / "spm.model").is_file()  # the run folder's own tokenizer
    sources = (workspace / "data" / "raw" / "valid.src").read_text().splitlines()[:5]
    expected = "".join(line + "\n" for line in load(workspace / "runs" / "base" / "seed1").translate(sources))
    for argv in (["aiayn-translate", str(run)], [sys.executable, "-m", "aiayn.inference.translate", str(run)]):
        out = _run(installed, tmp_path, *argv, stdin="".join(line + "\n" for line in sources))
        assert out.returncode == 0, out.stderr
        assert out.stdout == expected
    pytest.importorskip("ctranslate2")  # the Hugging Face export's own tests: tests/export
    out = _run(installed, tmp_path, "aiayn-export", str(run), "exported-ct2", "--to", "ct2")
    assert out.returncode == 0, out.stderr
    assert {"model.bin", "spm.model", "README.md"} <= {p.name for p in (tmp_path / "exported-ct2").iterdir()}


def test_a_run_folder_without_its_tokenizer_names_what_is_missing(installed: Path, workspace: Path, tmp_path: Path):
    run = shutil.copytree(workspace / "runs" / "base" / "seed1", tmp_path / "my-run")
    (run / "spm.model").unlink()
    config = OmegaConf.load(run / "config.yaml")
    config.paths.bpe = "data/bpe"  # as dvc repro's runs name it: relative, and not here
    OmegaConf.save(config, run / "config.yaml")
    out = _run(installed, tmp_path, "aiayn-translate", str(run), stdin="a\n")
    assert out.returncode != 0 and "spm.model not found" in out.stderr and "--bpe" in out.stderr
