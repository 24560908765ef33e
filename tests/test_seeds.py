"""python -m aiayn.seeds: the design's one extension from the pilot's plan, the params.yaml it leaves, and what it
refuses (a second extension, --until-resolved). No training here: `dvc repro` is replaced by a stand-in;
tests/pipeline/test_adaptive_seeds.py runs the real one."""

from __future__ import annotations

import csv
import shutil
import sys
from pathlib import Path

import pytest

from aiayn.config.params import Params
from aiayn.seeds import COLUMNS, main, new_seeds, plan_extension, planned_seeds, run


def line(row: str, test: str, planned: int | None, verdict: str = "unresolved") -> dict[str, str]:
    return {
        "row": row,
        "seeds_planned": "" if planned is None else str(planned),
        "test": test,
        "expected_delta_bleu": "-0.1" if test == "equivalence" else "-1.2",
        "margin_bleu": "0.5",
        "planning_sd": "0.41",
        "family_level": "0.9974",
        "verdict": verdict,
    }


TABLE = [
    line("base", "", None, ""),
    line("A1", "difference", 5),
    line("A2", "equivalence", None),
    line("B1", "difference", 3, "reproduced"),
    line("C1", "difference", 2),
    line("C3", "difference", 12),
    line("A3", "equivalence", 8),
]
SEEDS = {row: [1, 2, 3] for row in ("base", "A1", "A2", "B1", "C1", "C3", "A3")}


def test_rows_planned_for_more_seeds_within_max_get_them_and_base_gets_every_one():
    """A1 planned 5 and A3 8: they get 4-5 and 4-8. B1 (3) and C1 (2) have enough: final as they are, whatever
    their verdict (unresolved C1 gets nothing more: the plan, not the verdict, decides). C3 needs 12 > 10 and A2
    is out of reach: they stay at the pilot."""
    plan = plan_extension(planned_seeds(TABLE), SEEDS, max_seeds=10)
    assert plan.adds == {"base": [4, 5, 6, 7, 8], "A1": [4, 5], "A3": [4, 5, 6, 7, 8]}
    assert plan.why["A1"] == "5 planned, has 3" and plan.why["C1"] == "2 planned, has 3: its verdict is final"
    assert "12 planned > aggregate.max_seeds 10" in plan.why["C3"] and "not planned" in plan.why["A2"]
    assert plan_extension(planned_seeds(TABLE), SEEDS, max_seeds=6).adds == {"base": [4, 5], "A1": [4, 5]}


def test_the_plan_ignores_every_verdict():
    """The same plans with every verdict flipped give the same extension: nothing is added because a row is (or
    is not) resolved yet, which is what kept the old --until-resolved from its promise."""
    flipped = [dict(r, verdict="reproduced" if r["verdict"] == "unresolved" else "unresolved") for r in TABLE]
    assert (
        plan_extension(planned_seeds(flipped), SEEDS, 10).adds == plan_extension(planned_seeds(TABLE), SEEDS, 10).adds
    )


def test_new_seeds_fill_the_smallest_gaps():
    assert new_seeds([1, 2, 3], 2) == [4, 5] and new_seeds([2, 5], 3) == [1, 3, 4] and new_seeds([1], 0) == []


@pytest.fixture
def project(repo_root: Path, tmp_path: Path) -> Path:
    """The shipped params.yaml and a pilot's Table 3 that plans more seeds for A1 and A3."""
    shutil.copy(repo_root / "params.yaml", tmp_path / "params.yaml")
    (tmp_path / "results").mkdir()
    write_table(tmp_path / "results" / "table3.csv", TABLE)
    return tmp_path


def write_table(path: Path, lines: list[dict[str, str]]) -> None:
    with open(path, "w", encoding="utf-8", newline="") as f:
        writer = csv.DictWriter(f, COLUMNS)
        writer.writeheader()
        writer.writerows(lines)


def test_one_extension_edits_params_runs_repro_and_a_second_is_refused(project: Path, capsys):
    table, params = project / "results" / "table3.csv", project / "params.yaml"
    final = (
        "import csv, sys; w = csv.writer(open(sys.argv[1], 'w', newline='')); w.writerows(["
        f"{list(COLUMNS)!r}, ['A1', '5', 'difference', '-1.2', '0.5', '0.4', '0.99', 'reproduced'], "
        "['A3', '8', 'equivalence', '', '0.5', '0.4', '0.99', 'unresolved']])"
    )
    plan = run(params, table, dry=False, repro=(sys.executable, "-c", final, str(table)))
    assert plan.adds == {"base": [4, 5, 6, 7, 8], "A1": [4, 5], "A3": [4, 5, 6, 7, 8]}
    assert Params.read(params).extra_seeds() == plan.adds
    per_row = Params.read(params).seeds_per_row()
    assert per_row["A3"] == [1, 2, 3, 4, 5, 6, 7, 8] and per_row["B1"] == [1, 2, 3]
    out = capsys.readouterr().out
    assert "pooled SD of the paired differences 0.41; each row decided by its family interval at level 0.9974" in out
    assert "A1: difference, resolve the sign of Δ -1.20; 5 planned, has 3; + seeds 4 5" in out
    assert "A3: equivalence, show |Δ| < 0.50; 8 planned, has 3; + seeds 4 5 6 7 8" in out
    # A row the plan cannot reach says what power it would have at max_seeds (the stand-in table is not consistent).
    assert "A2: equivalence, show |Δ| < 0.50; out of reach (> 100 seeds; power at 10: 0.21); stays at 3" in out
    assert "final: A1 reproduced, A3 unresolved" in out
    with pytest.raises(ValueError, match="one extension was made.*optional stopping"):
        run(params, table, dry=False, repro=(sys.executable, "-c", "pass"))


def test_dry_writes_nothing_and_the_cap_comes_from_params(project: Path, capsys):
    params = project / "params.yaml"
    before = params.read_text()
    main(["--dry", "--params", str(params), "--table", str(project / "results" / "table3.csv")])
    assert params.read_text() == before
    assert "A1: difference, resolve the sign of Δ -1.20; 5 planned, has 3; + seeds 4 5" in capsys.readouterr().out
    params.write_text(before.replace("max_seeds: 10", "max_seeds: 6"))
    assert run(params, project / "results" / "table3.csv", dry=True).adds == {"base": [4, 5], "A1": [4, 5]}


def test_until_resolved_and_max_are_refused_with_the_reason(project: Path, capsys):
    for flag in (["--until-resolved"], ["--max", "10"]):
        with pytest.raises(SystemExit):
            main([*flag, "--params", str(project / "params.yaml")])
    err = capsys.readouterr().err
    assert "optional stopping" in err and "aggregate.max_seeds in params.yaml" in err


def test_without_a_table_it_says_to_run_dvc_repro(tmp_path: Path, repo_root: Path):
    shutil.copy(repo_root / "params.yaml", tmp_path / "params.yaml")
    with pytest.raises(SystemExit, match="run `dvc repro` first"):
        main(["--table", str(tmp_path / "none.csv"), "--params", str(tmp_path / "params.yaml")])
