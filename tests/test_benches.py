"""Every benchmark under bench/ runs: a few steps of each, as a user would start it, its RESULT lines parsed and its
headline figure (docs/benchmarks.md) printed last. The numbers of such short runs mean nothing; that the script runs
to its end after a refactor does. Benchmarks with tests of their own (gpu_check, gpu_pipeline, learning_parity's
arithmetic, the plan's devices.yaml) are tested there; design_sim's simulation is also tested in
tests/report/test_verdicts.py. Not run here: pipeline_time (a whole `dvc repro`, about 30 minutes), learning_parity's
training (its smallest run prepares Multi30k and trains and decodes five systems: over 10 minutes of two cores), and
gpu_pipeline.sh's run (a GPU's)."""

from __future__ import annotations

import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]

# script, its smallest arguments, the headline RESULT it must print last
SMOKE = [
    ("lightning_overhead.py", ["--steps", "4", "--rounds", "1", "--warmup", "1"], "lightning_overhead_ratio"),
    ("train_throughput.py", ["--shape", "tiny", "--steps", "2", "--rounds", "1"], "train_throughput_tiny_ratio"),
    (
        "chunked_loss.py",
        ["--tokens", "256", "--chunk", "64", "--vocab", "500", "--d-model", "32", "--steps", "1", "--rounds", "1"],
        "chunks_memory_ratio",
    ),
    (
        "decode_speed.py",
        ["--shape", "small", "--vocab", "300", "--sentences-b64", "4", "--sentences-b1", "2", "--src-len", "5"],
        "decode_cache_speedup",
    ),
]


def results(output: str) -> list[tuple[str, float]]:
    """The `RESULT name value` lines of a benchmark's output, in order."""
    found = []
    for line in output.splitlines():
        if line.startswith("RESULT "):
            _, name, value = line.split()
            found.append((name, float(value)))
    return found


def run_bench(script: str, *args: str, cwd: Path = REPO, **env_vars: str) -> list[tuple[str, float]]:
    env = {**os.environ, "WANDB_MODE": "offline", **env_vars}
    done = subprocess.run(
        [sys.executable, str(REPO / "bench" / script), *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, f"{script} failed:\n{done.stdout[-2000:]}\n{done.stderr[-4000:]}"
    return results(done.stdout)


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


def test_dev_noise_reads_a_finished_pipeline(tmp_path: Path) -> None:
    """studies/dev_noise.py over evaluation folders laid out as the evaluate stage writes them (fabricated here:
    base and a row, three seeds, hypotheses of known quality)."""
    from tests.report.conftest import degrade, reference_lines, write_run

    refs = reference_lines()
    raw = tmp_path / "data" / "raw"
    raw.mkdir(parents=True)
    (raw / "valid.tgt").write_text("\n".join(refs) + "\n")
    for seed, bleu in ((1, 30.0), (2, 31.0), (3, 29.5)):
        write_run(tmp_path / "evals", "base", seed, dev_bleu=bleu, dev_ppl=5.0, hyps=degrade(refs, 5))
        write_run(tmp_path / "evals", "A1", seed, dev_bleu=bleu - 1 - seed, dev_ppl=5.5, hyps=degrade(refs, 2 + seed))
    found = dict(run_bench("dev_noise.py", "--repo", str(tmp_path), "--samples", "50"))
    assert found["dev_noise_sentences"] == len(refs) and found["dev_noise_seed_sd_median"] > 0
    assert list(found)[-1] == "dev_noise_share_median"


def test_the_design_simulation_runs_and_prints_its_headline_last() -> None:
    """src/aiayn/verdicts/simulation.py as a user starts it, at 20 simulated studies a scenario: its headline (the worst
    false-verdict rate over its bound) is last; 0, no false verdict, is its best value, so only the bound must be
    positive."""
    found = run_bench("design_sim.py", "--studies", "20")
    names, values = [name for name, _ in found], dict(found)
    assert names[-1] == "design_family_rate_worst_over_bound", names
    assert values["design_family_rate_bound"] > 0 and all(
        0 <= v <= 1 for k, v in values.items() if "rate" in k and "over" not in k
    )
    assert values["design_family_rate_worst_over_bound"] >= 0
