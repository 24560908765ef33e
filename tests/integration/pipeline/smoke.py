"""The smoke-scale pipeline the stage tests share: each stage's run() in a temporary folder, as DVC would call it."""

from __future__ import annotations

import importlib.util
from pathlib import Path

from aiayn.config.composition import compose
from aiayn.config.resolve import prepare

REPO = Path(__file__).resolve().parents[3]


def stage(name: str):
    """Import pipeline/<name>.py without running it (nothing runs at import time)."""
    spec = importlib.util.spec_from_file_location(f"pipeline_{name}", REPO / "pipeline" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def data_overrides(data: Path) -> list[str]:
    """A smoke run reading the corpus and the tokenizer under `data` (raw/, bpe/)."""
    return [
        "scale=smoke",
        "logger=none",
        "trainer.enable_progress_bar=false",
        # The machine's own kernels: a pin lasts for the process, and these stages share pytest's (bf16 decoding
        # among them). tests/run/test_floatpath.py checks the pin in fresh interpreters.
        "trainer.cpu_isa=null",
        f"paths.raw={data}/raw",
        f"paths.bpe={data}/bpe",
    ]


def overrides(tmp: Path, *extra: str, data: Path | None = None) -> list[str]:
    """A smoke run writing runs, evaluations and results under `tmp`, its data under `data` (default tmp/data)."""
    return [
        *data_overrides(tmp / "data" if data is None else data),
        f"paths.runs={tmp}/runs",
        f"paths.evals={tmp}/evals",
        f"paths.results={tmp}/results",
        *extra,
    ]


def run_pipeline(tmp: Path) -> Path:
    """fetch -> bpe -> train (base, 2 seeds) -> evaluate (2 seeds) -> aggregate and attention_figures in `tmp`,
    through each script's run()."""
    (tmp / "params.yaml").write_text("rows: [base]\nseeds: [1, 2]\n")
    stage("fetch").run(prepare(compose(overrides(tmp))))
    stage("bpe").run(prepare(compose(overrides(tmp))))
    for seed in (1, 2):
        stage("train").run(prepare(compose(overrides(tmp, f"seed={seed}"))))
        stage("evaluate").run(prepare(compose(overrides(tmp, f"seed={seed}"))))
    for name in ("aggregate", "attention_figures"):
        stage(name).run(prepare(compose(overrides(tmp, f"tables.params_file={tmp}/params.yaml"))))
    return tmp
