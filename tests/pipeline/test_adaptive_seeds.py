"""`python -m aiayn.seeds --until-resolved` end to end: params.yaml edited, `dvc repro` trains only the new seeds of
the picked row and base, the table pairs them, and the loop stops at --max. A temporary DVC repo, smoke scale."""
from __future__ import annotations

import csv
import sys
from pathlib import Path

import pytest
import yaml

from aiayn.config.params import read_extra_seeds

pytestmark = pytest.mark.slow  # 2.5-3 minutes on 2 shared CPU cores: a repro of three rows, then one of two


def test_until_resolved_runs_only_the_seeds_that_can_resolve_a_row(tmp_path: Path, copy_project) -> None:
    # The helpers of test_dvc.py (a module, not a conftest), loaded by path as pytest's importlib mode requires.
    import importlib.util

    spec = importlib.util.spec_from_file_location("test_dvc", Path(__file__).with_name("test_dvc.py"))
    helpers = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(helpers)
    repo = copy_project(tmp_path, scale="smoke", rows=["base", "D1", "E"], seeds=[1, 2])
    helpers.dvc("repro", cwd=repo)
    # Smoke runs learn nothing, so their own table has nothing to resolve: plant the verdicts a real run could give
    # (D1 unresolved and 3 seeds would do; E out of reach). The rerun's aggregate rewrites the table for real.
    table = repo / "results" / "table3.csv"
    with open(table, encoding="utf-8", newline="") as f:
        lines = list(csv.DictReader(f))
    planted = {"D1": ("unresolved", "3"), "E": ("unresolved", "60")}
    for line in lines:
        line["verdict"], line["seeds_needed"] = planted.get(line["row"], (line["verdict"], line["seeds_needed"]))
    with open(table, "w", encoding="utf-8", newline="") as f:
        writer = csv.DictWriter(f, list(lines[0]))
        writer.writeheader()
        writer.writerows(lines)

    out = helpers.run([sys.executable, "-m", "aiayn.seeds", "--until-resolved", "--max", "3"], repo).stdout
    assert "D1: + seeds 3 (unresolved, 3 seeds needed, has 2)" in out and "  E: + seeds" not in out
    ran = {line.split("'")[1] for line in out.splitlines() if line.startswith("Running stage")}
    assert ran == {"seeds", "train@base", "evaluate@base", "train@D1", "evaluate@D1", "aggregate"}, out
    assert "runs/D1/seed1: already trained to step" in out  # finished seeds are skipped, not retrained
    assert "nothing to run: no unresolved row can be resolved with at most 3 seeds" in out and "round 2" not in out
    assert read_extra_seeds(repo / "params.yaml") == {"base": [3], "D1": [3]}
    assert yaml.safe_load((repo / "seeds" / "D1.yaml").read_text()) == {"seeds": [1, 2, 3]}
    assert (repo / "runs" / "D1" / "seed3" / "train.json").exists() and not (repo / "runs" / "E" / "seed3").exists()
    with open(table, encoding="utf-8", newline="") as f:
        rows = {r["row"]: r for r in csv.DictReader(f)}
    assert [(r, rows[r]["n_seeds"], rows[r]["delta_bleu_n_pairs"]) for r in ("base", "D1", "E")] == [
        ("base", "3", ""), ("D1", "3", "3"), ("E", "2", "2")]
    assert "Running stage" not in helpers.dvc("repro", cwd=repo)  # the edited params.yaml is what DVC recorded
