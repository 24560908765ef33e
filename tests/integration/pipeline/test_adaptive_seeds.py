"""`aiayn-extend` end to end: the pilot's plan extends params.yaml once, `dvc repro` trains only
the new seeds of the planned row and base, the table pairs them and calls its verdicts final, and a second extension is
refused. A temporary DVC repo, smoke scale."""

from __future__ import annotations

import csv
import json
import sys
from pathlib import Path

import pytest
import yaml

from aiayn.config.params import Params
from aiayn.verdicts.extension import main as extension_main

pytestmark = pytest.mark.slow  # a repro of two rows, then an extension of both


def test_the_one_extension_runs_only_the_planned_seeds(tmp_path: Path, copy_project) -> None:
    # The helpers of test_dvc.py (a module, not a conftest), loaded by path as pytest's importlib mode requires.
    import importlib.util

    spec = importlib.util.spec_from_file_location("test_dvc", Path(__file__).with_name("test_dvc.py"))
    helpers = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(helpers)
    repo = copy_project(tmp_path, scale="smoke", rows=["base", "D1"], seeds=[1, 2])
    # The design is declared before the pilot (its record freezes it with the first table): at most 3 seeds a row.
    (repo / "params.yaml").write_text((repo / "params.yaml").read_text().replace("max_seeds: 10", "max_seeds: 3"))
    helpers.dvc("repro", cwd=repo)
    # Smoke runs learn nothing, so their own plan means nothing: plant the plan a real pilot could give (D1 needs 3
    # seeds). The extension's aggregate rewrites it for real. A row planned past design.max_seeds stays where it is:
    # tests/verdicts/test_extension.py (the plan alone, no training).
    table, plan = repo / "results" / "table3.csv", repo / "results" / "plan.json"
    planned = json.loads(plan.read_text())
    planned["rows"]["D1"]["seeds_planned"] = 3
    plan.write_text(json.dumps(planned))

    seed1 = repo / "runs" / "D1" / "seed1"
    finished = {f: f.read_bytes() for f in [seed1 / "train.json", *seed1.rglob("*.ckpt")]}
    out = helpers.run([sys.executable, "-m", "aiayn.verdicts.extension"], repo).stdout
    assert "D1: BLEU difference, resolve the sign of Δ" in out and "3 planned, has 2; + seeds 3" in out
    assert '"shown"' in (repo / "results" / "design.json").read_text()  # the pilot's record
    ran = {line.split("'")[1] for line in out.splitlines() if line.startswith("Running stage")}
    assert ran == {
        "seeds",
        "train@base",
        "evaluate@base",
        "train@D1",
        "evaluate@D1",
        "aggregate",
        "attention_figures",
    }, out
    # Finished seeds are skipped, not retrained: D1 seed 1's summary and checkpoints keep their bytes (DVC relinks
    # them from its cache, so not their times). Read from the files: the "already trained" log line was once missing
    # from the captured output, in a loaded slow-tier run with two forked jobs writing to one pipe (cause not found).
    assert len(finished) >= 2 and {f: f.read_bytes() for f in finished} == finished
    assert Params.read(repo / "params.yaml").extra_seeds() == {"base": [3], "D1": [3]}
    assert yaml.safe_load((repo / "seeds" / "D1.yaml").read_text()) == {"seeds": [1, 2, 3]}
    assert (repo / "runs" / "D1" / "seed3" / "train.json").exists()
    with open(table, encoding="utf-8", newline="") as f:
        rows = {r["row"]: r for r in csv.DictReader(f)}
    assert [(r, rows[r]["n_seeds"], rows[r]["delta_bleu_n_pairs"]) for r in ("base", "D1")] == [
        ("base", "3", ""),
        ("D1", "3", "3"),
    ]
    assert rows["D1"]["verdict_final"] == "True"  # the extension was made
    assert "Running stage" not in helpers.dvc("repro", cwd=repo)  # the edited params.yaml is what DVC recorded
    with pytest.raises(SystemExit, match="one extension was made"):
        extension_main(["--dry", "--params", str(repo / "params.yaml"), "--plan", str(plan)])
