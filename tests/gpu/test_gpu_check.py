"""gpu/gpu_check.sh, the one prepared script of the GPU checks, run here on CPU (`--dry-run`): GPU minutes come
a few at a time (15 a session, the machine's start included), too scarce to find a shell slip, a missing package
or a part that cannot be resumed there."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

# The project's dependencies that the GPU machine's image lacks (the device tool's KINDS.md lists what it has:
# torch, lightning, numpy, scipy, pyyaml, sacrebleu, sentencepiece, ...): the GPU scripts must run without them.
NOT_ON_THE_GPU_IMAGE = ("hydra", "hydra_plugins", "omegaconf", "wandb", "dvc", "sacremoses", "submitit", "ruamel")
BLOCKER = f'''"""Makes this Python look like the GPU image: these packages cannot be imported
(tests/gpu/test_gpu_check.py)."""
import importlib.abc
import sys

MISSING = {set(NOT_ON_THE_GPU_IMAGE)!r}


class NotOnTheImage(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] in MISSING:
            raise ModuleNotFoundError(f"No module named {{name!r}} (not on the GPU image)", name=name)
        return None


sys.meta_path.insert(0, NotOnTheImage())
'''


@pytest.fixture()
def gpu_image_env(tmp_path):
    """An environment whose Pythons cannot import what the GPU image lacks (a sitecustomize on PYTHONPATH)."""
    site = tmp_path / "gpu_image_site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(BLOCKER)
    return {**os.environ, "PYTHONPATH": str(site), "PYTHON": sys.executable}


def gpu_check(repo_root: Path, env: dict, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["bash", "gpu/gpu_check.sh", "--dry-run", *args],
        cwd=repo_root,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )


def results(out: subprocess.CompletedProcess) -> list[tuple[str, str]]:
    return [tuple(line.split()[1:3]) for line in out.stdout.splitlines() if line.startswith("RESULT ")]


def test_the_gpu_scripts_import_with_only_what_the_gpu_image_has(repo_root, gpu_image_env):
    env = {**gpu_image_env, "PYTHONPATH": os.pathsep.join([gpu_image_env["PYTHONPATH"], "src", "gpu", "bench"])}
    code = "import gpu_check, decode_speed, aiayn.cost.devices; print('imported')"
    ok = subprocess.run([sys.executable, "-c", code], cwd=repo_root, env=env, capture_output=True, text=True)
    assert ok.returncode == 0 and "imported" in ok.stdout, ok.stderr[-2000:]
    # the blocker blocks: the pipeline's own modules do need what the image lacks
    refused = subprocess.run(
        [sys.executable, "-c", "import aiayn.config.composition"],
        cwd=repo_root,
        env=env,
        capture_output=True,
        text=True,
    )
    assert refused.returncode != 0 and "not on the GPU image" in refused.stderr


def test_a_part_runs_within_the_budget_and_only_once(repo_root, gpu_image_env, tmp_path):
    """--budget: a part starts only with time left, and is then not done (status 1, 'run the same command
    again'); done, its kept log spares it the next call; a kept log made by other code does not."""
    env = {**gpu_image_env, "OUT": str(tmp_path / "out")}
    none = gpu_check(repo_root, env, "--only", "decode", "--budget", "0")
    assert none.returncode == 1, none.stdout[-2000:] + none.stderr[-2000:]
    assert "== decode: not started" in none.stdout and "parts not done: decode: run the same command" in none.stdout
    assert dict(results(none))["decode_newstest_s"] == "nan"

    first = gpu_check(repo_root, env, "--only", "decode")
    assert first.returncode == 0, first.stdout[-2000:] + first.stderr[-2000:]
    assert "== decode: up to 80 s" in first.stdout and "parts done: decode" in first.stdout
    seconds = dict(results(first))["decode_newstest_s"]
    assert float(seconds) > 0 and results(first)[-1] == ("mfu_base", "nan")  # no base part asked for

    again = gpu_check(repo_root, env, "--only", "decode")
    assert again.returncode == 0 and "== decode: done in an earlier call" in again.stdout
    assert dict(results(again))["decode_newstest_s"] == seconds  # from the kept log

    kept = tmp_path / "out" / "gpu_check_dry" / "decode.txt"
    kept.write_text(kept.read_text().replace(", code ", ", code 0ld", 1))  # as if the sources had changed since
    rerun = gpu_check(repo_root, env, "--only", "decode")
    assert rerun.returncode == 0 and "== decode: up to 80 s" in rerun.stdout


@pytest.mark.slow
def test_the_whole_flow_runs_on_cpu_without_what_the_gpu_image_lacks(repo_root, gpu_image_env, tmp_path):
    """Every part at tiny shapes, under the GPU image's packages: the RESULT lines in order with the headline last,
    three files under $OUT (the device tool brings back at most eight), the shipped devices.yaml untouched; a
    second call finds every part done; a part stopped by its time limit is not done, and the next call runs it."""
    from aiayn.cost.devices import TABLE

    before = TABLE.read_text()
    env = {**gpu_image_env, "OUT": str(tmp_path / "out")}
    out = gpu_check(repo_root, env)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-2000:]
    names = [name for name, _ in results(out)]
    assert names[-4:] == ["mfu_base", "mfu_big", "decode_newstest_s", "mfu_base"]
    assert {
        "mfu_base_eager",
        "mfu_base_compiled",
        "mfu_base_chunked",
        "mfu_base_cudagraphs",
        "decode_newstest_s_compact1",
    } <= set(names)
    parts = ["base", "big", "decode", "base_compiled", "base_chunked", "decode_compact1", "base_cudagraphs"]
    assert f"parts done: {' '.join(parts)}" in out.stdout
    files = {p.name for p in (tmp_path / "out").iterdir() if p.is_file()}
    assert files == {"gpu_check.txt", "profile_base.txt", "devices.yaml"}
    log = (tmp_path / "out" / "gpu_check.txt").read_text()
    assert all(f"######## {part}\n" in log for part in [*parts, "summary"])
    assert "RESULT tiny_chunked_tokens_per_s" in log and "RESULT tiny_compiled_cudagraphs_ms_per_step" in log
    assert "torch.profiler over 3 steps" in (tmp_path / "out" / "profile_base.txt").read_text()
    assert (tmp_path / "out" / "devices.yaml").read_text() == before and TABLE.read_text() == before

    again = gpu_check(repo_root, env)
    assert again.returncode == 0 and again.stdout.count("done in an earlier call") == len(parts)
    assert results(again) == results(out)[-9:]  # the summary's lines, from the kept logs

    # a part cut short (--part-limit 1: not even torch's import) leaves a log without its RESULT, and is not done
    cut = gpu_check(repo_root, env, "--fresh", "--only", "base", "--part-limit", "1")
    assert cut.returncode == 1 and "== base: up to 1 s" in cut.stdout and "parts not done: base" in cut.stdout
    assert not (tmp_path / "out" / "gpu_check_dry" / "big.txt").exists()  # --fresh dropped the kept logs
    done = gpu_check(repo_root, env, "--only", "base")
    assert done.returncode == 0 and "== base: up to 100 s" in done.stdout and "parts done: base" in done.stdout
