"""Every benchmark under bench/ runs: a few steps of each, as a user would start it, its RESULT lines parsed and its
headline figure (docs/benchmarks.md) printed last. The numbers of such short runs mean nothing; that the script runs
to its end after a refactor does. Not run here: pipeline_time (a whole `dvc repro`, about 30 minutes). The studies
and the GPU recipes are tested in tests/studies and tests/gpu, the design's simulation in tests/verdicts."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from tests.scripts import run_script

# script, its smallest arguments, the headline RESULT it must print last
SMOKE = [
    ("lightning_overhead.py", ["--steps", "4", "--rounds", "1", "--warmup", "1"], "lightning_overhead_ratio"),
    ("train_throughput.py", ["--shape", "tiny", "--steps", "2", "--rounds", "1"], "train_throughput_tiny_ratio"),
    (
        "chunked_loss.py",
        ["--tokens", "256", "--chunk", "64", "--vocab", "500", "--d-model", "32", "--steps", "1", "--rounds", "1"],
        "chunks_memory_ratio",
    ),
    ("train_step.py", ["--smoke", "--variants", "today,no_fill,skip_pad"], "train_step_speedup"),
    (
        "decode_speed.py",
        ["--shape", "small", "--vocab", "300", "--sentences-b64", "4", "--sentences-b1", "2", "--src-len", "5"],
        "decode_cache_speedup",
    ),
]


def run_bench(script: str, *args: str, **env_vars: str) -> list[tuple[str, float]]:
    return run_script(f"bench/{script}", *args, **env_vars)


@pytest.mark.parametrize("script, args, headline", SMOKE, ids=[s for s, _, _ in SMOKE])
def test_the_benchmark_runs_and_prints_its_headline_last(script: str, args: list[str], headline: str) -> None:
    found = run_bench(script, *args)
    assert found and found[-1][0] == headline, found
    assert all(math.isfinite(value) for _, value in found) and found[-1][1] > 0, found  # a gap may be negative


def test_the_data_pipeline_benchmark_runs(shared_dir: Path) -> None:
    """bench/data_pipeline.py trains its tokenizer on the shared WMT sample (skipped without it)."""
    args = ["--pairs", "2000", "--vocab-size", "300", "--max-tokens", "2000"]
    found = run_bench("data_pipeline.py", *args, AIAYN_SHARED=str(shared_dir))
    assert found and found[-1][0] == "encode_sentences_per_s" and found[-1][1] > 0, found


def test_decode_speed_against_ctranslate2_runs() -> None:
    pytest.importorskip("ctranslate2")
    args = ["--ct2", "--shape", "tiny", "--vocab", "300", "--sentences-b64", "8", "--src-len", "6", "--ct2-batch", "4"]
    found = run_bench("decode_speed.py", *args)
    assert [name for name, _ in found][-1] == "decode_vs_ct2_float32_t1" and all(v > 0 for _, v in found)


def _intel_with_mkl() -> bool:
    """Whether torch's bernoulli_ draws with MKL's streams here (Intel CPUs, MKL builds) rather than its portable
    kernel over the CPU generator's mt19937, which bench/train_step.py's mtdrop reproduces."""
    import torch

    cpuinfo = Path("/proc/cpuinfo")
    vendor = "GenuineIntel" in cpuinfo.read_text() if cpuinfo.exists() else True
    return vendor and torch.backends.mkl.is_available()


def test_train_step_mtdrop_draws_bernoullis_own_masks() -> None:
    """mtdrop's masks come from numpy, yet its losses equal today's exactly: the same draws as bernoulli_'s."""
    if _intel_with_mkl():
        pytest.skip("bernoulli_ draws with MKL on Intel CPUs; mtdrop reproduces the portable kernel")
    found = dict(run_bench("train_step.py", "--smoke", "--variants", "mtdrop,randdrop"))
    assert found["mtdrop_max_loss_diff"] == 0.0, found
    assert found["randdrop_max_loss_diff"] > 1e-3, found  # other draws: the comparison can tell them apart
