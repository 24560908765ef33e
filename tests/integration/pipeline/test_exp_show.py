"""`dvc exp show` as the README runs it reads at 200 columns: results/metrics.json holds the few numbers a person
compares across experiments (one column each), every row's numbers going to rows.json, which DVC does not spread into
columns. The widest headline the aggregate stage writes (Table 3's claims, both of Table 2's systems, the Multi30k
literature's BLEU) is rendered by DVC itself in a real repository."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from aiayn.report.table2 import table2_headline
from aiayn.report.table3 import table3_headline
from aiayn.run.checkout import copy_project


def widest_headline() -> dict[str, float]:
    table3 = [
        {"row": "base", "bleu_mean": 91.1, "ppl_gmean": 1.2534, "verdict": None, "verdict_ppl": None},
        {"row": "A2", "bleu_mean": 90.98, "ppl_gmean": 1.2612, "verdict": "reproduced", "verdict_ppl": "unresolved"},
        {"row": "D1", "bleu_mean": 93.68, "ppl_gmean": 1.2433, "verdict": "contradicted", "verdict_ppl": "higher"},
    ]
    table2 = [
        {"row": row, "pair": "en_de", "source": source, "bleu_mean": bleu, "bleu_tok_mean": bleu + 1.5}
        | {"bleu_lc_tok_mean": bleu + 2.25}
        for row, source, bleu in (("base", "ours", 93.26), ("big", "ours", 94.69), ("base", "ensemble", 94.1))
    ]
    return table3_headline(table3) | table2_headline(table2, literature=True)


def test_the_headline_is_a_few_numbers():
    headline = widest_headline()
    assert set(headline) == {
        "dev_bleu",
        "dev_ppl",
        "decided",
        "reproduced",
        "contradicted",
        "base_test_bleu",
        "base_test_bleu_lc_tok",
        "big_test_bleu",
        "big_test_bleu_lc_tok",
    }
    assert (headline["decided"], headline["reproduced"], headline["contradicted"]) == (3, 1, 1)


@pytest.mark.skipif(shutil.which("git") is None, reason="needs git for a DVC repository with a commit")
def test_dvc_exp_show_at_200_columns_shows_every_headline_number(tmp_path: Path):
    repo = copy_project(tmp_path / "repo")
    env = {**os.environ, "COLUMNS": "200", "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t"}
    env["GIT_COMMITTER_EMAIL"] = "t@t"
    subprocess.run(["git", "add", "-A"], cwd=repo, check=True, capture_output=True, env=env)
    subprocess.run(["git", "commit", "-qm", "project"], cwd=repo, check=True, capture_output=True, env=env)
    headline = widest_headline()
    (repo / "results").mkdir(exist_ok=True)
    (repo / "results" / "metrics.json").write_text(json.dumps(headline))
    params = (repo / "params.yaml").read_text()
    (repo / "params.yaml").write_text(params.replace("lr_factor: null", "lr_factor: 2", 1))  # an experiment's -S
    dvc = [sys.executable, "-m", "dvc"]
    command = ["exp", "show", "--no-pager", "--only-changed", "--drop", "runs|evals|.*/.*"]  # the README's
    shown = subprocess.run([*dvc, *command], cwd=repo, env=env, text=True, capture_output=True)
    assert shown.returncode == 0, shown.stderr
    assert "…" not in shown.stdout, shown.stdout
    header = next(line for line in shown.stdout.splitlines() if "Experiment" in line)
    assert all(name in header for name in headline) and "train.lr_factor" in header, shown.stdout
    workspace = next(line for line in shown.stdout.splitlines() if "workspace" in line).split()
    assert {str(v) for v in headline.values()} <= set(workspace), shown.stdout
    assert max(len(line) for line in shown.stdout.splitlines()) <= 200
    metrics = subprocess.run([*dvc, "metrics", "show"], cwd=repo, env=env, text=True, capture_output=True)
    assert metrics.returncode == 0 and max(len(line) for line in metrics.stdout.splitlines()) <= 200, metrics.stdout
