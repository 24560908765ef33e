"""`dvc repro` end to end in a temporary copy of the repository (a real DVC repo) at the smoke scale."""
from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]


def run(args: list[str], cwd: Path, **kw) -> subprocess.CompletedProcess:
    env = dict(os.environ, WANDB_MODE="offline", WANDB_SILENT="true", HYDRA_FULL_ERROR="1",
               PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")
    proc = subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True, **kw)
    assert proc.returncode == 0, f"{' '.join(args)} failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    return proc


def dvc(*args: str, cwd: Path) -> str:
    return run([sys.executable, "-m", "dvc", *args], cwd).stdout


@pytest.fixture(scope="module")
def repo(tmp_path_factory, copy_project) -> Path:
    """The project's files (as git sees them) in a fresh git + DVC repo, set to the smoke scale and 2 seeds."""
    dst = copy_project(tmp_path_factory.mktemp("repo"), scale="smoke", rows=["base"], seeds=[1, 2])
    dvc("repro", cwd=dst)
    git_commit(dst, "smoke-scale reproduction")
    return dst


def git_commit(repo: Path, message: str) -> None:
    run(["git", "add", "-A"], repo)
    run(["git", "-c", "user.name=test", "-c", "user.email=test@example.com", "commit", "-qm", message], repo)


def test_repro_writes_table3_with_every_row_and_seed(repo: Path) -> None:
    with open(repo / "results" / "table3.csv", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    assert [(r["row"], r["n_seeds"]) for r in rows] == [("base", "2")]
    assert (repo / "results" / "table3.md").exists()


def test_second_repro_reruns_nothing(repo: Path) -> None:
    # Bytecode that Python writes into src/ as stages import it (an editable install) changes no stage.
    run([sys.executable, "-m", "compileall", "-q", "src", "pipeline"], repo)
    out = dvc("repro", cwd=repo)
    assert "Running stage" not in out, out
    assert "up to date" in dvc("status", cwd=repo)


def test_every_job_left_an_offline_wandb_run(repo: Path) -> None:
    runs = sorted((repo / "wandb").glob("offline-run-*/run-*.wandb"))
    assert len(runs) == 2 + 2 + 1, runs  # train and eval for two seeds, one aggregate


def test_dag_is_fetch_bpe_train_evaluate_aggregate(repo: Path) -> None:
    dag = dvc("dag", "--md", cwd=repo)
    for edge in ("fetch --> bpe", "bpe --> train@base", "seeds --> train@base", "seeds --> evaluate@base",
                 "train@base --> evaluate@base", "evaluate@base --> aggregate"):
        assert edge.split(" --> ")[0] in dag and edge.split(" --> ")[1] in dag


def test_dvc_plots_draws_a_validation_curve_per_run(repo: Path) -> None:
    spec = json.loads(dvc("plots", "show", "--show-vega", "results/curves.csv", cwd=repo))
    points = spec["data"]["values"]
    assert {p["run"] for p in points} == {"base-s1", "base-s2"} and all(float(p["val_ppl"]) > 1 for p in points)
    assert spec["encoding"]["detail"]["field"] == "run"  # .dvc/plots/runs.json: one line per run, coloured by row


def test_adding_a_row_changes_only_that_rows_stages(repo: Path) -> None:
    (repo / "conf" / "row" / "X1.yaml").write_text("name: X1\ndescription: no dropout\ndropout: 0.0\n")
    params = yaml.safe_load((repo / "params.yaml").read_text())
    params["rows"] = ["base", "X1"]
    (repo / "params.yaml").write_text(yaml.safe_dump(params))
    changed = {line.strip().rstrip(":") for line in dvc("status", cwd=repo).splitlines()
               if line and not line.startswith(("\t", " "))}
    run(["git", "checkout", "-q", "--", "params.yaml"], repo)
    (repo / "conf" / "row" / "X1.yaml").unlink()
    # The seeds stage reruns (it writes every row's seed list), but leaves the other rows' lists as they were.
    assert changed == {"seeds", "train@X1", "evaluate@X1", "aggregate"}, changed


def test_hydra_multirun_runs_two_seeds(repo: Path) -> None:
    run([sys.executable, "pipeline/train.py", "-m", "seed=1,2", "scale=smoke", "logger=none",
         "trainer.enable_progress_bar=false", "paths.runs=multirun_runs"], repo)
    for seed in (1, 2):
        assert (repo / "multirun_runs" / "base" / f"seed{seed}" / "train.json").exists()


def test_exp_run_with_one_more_seed_trains_only_that_seed(repo: Path) -> None:
    before = (repo / "runs" / "base" / "seed1" / "train.json").read_text()
    out = dvc("exp", "run", "-S", "seeds=[1,2,3]", cwd=repo)
    ran = {line.split("'")[1] for line in out.splitlines() if line.startswith("Running stage")}
    assert ran == {"seeds", "train@base", "evaluate@base", "aggregate"}, out
    for seed in (1, 2):  # the row's stage reran, but its finished seeds were skipped, not retrained
        assert f"runs/base/seed{seed}: already trained to step" in out, out
    assert "runs/base/seed3: already trained" not in out
    assert (repo / "runs" / "base" / "seed1" / "train.json").read_text() == before
    with open(repo / "results" / "table3.csv", encoding="utf-8") as f:
        assert next(csv.DictReader(f))["n_seeds"] == "3"
