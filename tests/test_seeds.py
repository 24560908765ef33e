"""python -m aiayn.seeds: which rows get more seeds, how many, and the params.yaml it leaves (no training here:
`dvc repro` is replaced by a stand-in; tests/pipeline/test_adaptive_seeds.py runs the real one)."""
from __future__ import annotations

import csv
import shutil
import sys
from pathlib import Path

import pytest

from aiayn.config.params import read_extra_seeds, seeds_per_row
from aiayn.seeds import main, new_seeds, plan_round, run


def line(row: str, verdict: str, needed: int | None) -> dict[str, str]:
    return {"row": row, "verdict": verdict, "seeds_needed": "" if needed is None else str(needed)}


TABLE = [line("base", "—", None), line("A1", "unresolved", 5), line("A2", "unresolved", 51),
         line("A3", "—", None), line("B1", "reproduced", 3), line("B2", "unresolved", None),
         line("C1", "unresolved", 2), line("C2", "contradicted", 4), line("C3", "unresolved", 8)]
SEEDS = {row: [1, 2, 3] for row in ("base", "A1", "A2", "A3", "B1", "B2", "C1", "C2", "C3")}


def test_picks_unresolved_rows_that_max_seeds_can_resolve():
    plan = plan_round(TABLE, SEEDS, max_seeds=6)
    # A1 needs 5: two more. C1 needs 2 but is still unresolved with 3: one more. C3 needs 8 > 6, A2 51: out of
    # reach. B2 has no spread to plan with; B1, C2 are resolved; A3 has nothing to resolve.
    assert plan.adds == {"base": [4, 5], "A1": [4, 5], "C1": [4]}
    assert plan.why["A1"] == "unresolved, 5 seeds needed, has 3" and "base" not in plan.why


def test_never_past_max_and_base_gets_only_what_it_lacks():
    seeds = dict(SEEDS, base=[1, 2, 3, 4, 5], A1=[1, 2, 3, 4, 5], C3=[1, 2, 3, 7])
    plan = plan_round(TABLE, seeds, max_seeds=8)
    assert plan.adds == {"base": [6, 8], "A1": [6], "C1": [4], "C3": [4, 5, 6, 8]}
    assert plan_round(TABLE, seeds, max_seeds=5).adds == {"C1": [4]}  # base already has seed 4
    assert plan_round(TABLE, {row: [1, 2, 3, 4, 5, 6] for row in SEEDS}, max_seeds=6).adds == {}


def test_new_seeds_fill_the_smallest_gaps():
    assert new_seeds([1, 2, 3], 2) == [4, 5] and new_seeds([2, 5], 3) == [1, 3, 4] and new_seeds([1], 0) == []


@pytest.fixture
def project(repo_root: Path, tmp_path: Path) -> Path:
    """The shipped params.yaml and a Table 3 where A1 and C1 can be resolved with more seeds."""
    shutil.copy(repo_root / "params.yaml", tmp_path / "params.yaml")
    (tmp_path / "results").mkdir()
    write_table(tmp_path / "results" / "table3.csv", TABLE)
    return tmp_path


def write_table(path: Path, lines: list[dict[str, str]]) -> None:
    with open(path, "w", encoding="utf-8", newline="") as f:
        writer = csv.DictWriter(f, ["row", "n_seeds", "verdict", "seeds_needed"])
        writer.writeheader()
        writer.writerows({**r, "n_seeds": "3"} for r in lines)


def test_rounds_edit_params_and_repro_until_nothing_is_left(project: Path, capsys):
    """A stand-in for `dvc repro` resolves A1 after the first round; C1 stays unresolved until it reaches --max."""
    table, params = project / "results" / "table3.csv", project / "params.yaml"
    rewrite_table = ("import csv, sys; w = csv.writer(open(sys.argv[1], 'w', newline='')); w.writerows(["
                     "['row', 'n_seeds', 'verdict', 'seeds_needed'], ['A1', '5', 'reproduced', '5'], "
                     "['C1', '4', 'unresolved', '2']])")
    plans = run(params, table, max_seeds=5, until_resolved=True, dry=False,
                repro=(sys.executable, "-c", rewrite_table, str(table)))
    assert [p.adds for p in plans] == [{"base": [4, 5], "A1": [4, 5], "C1": [4]}, {"C1": [5]}]
    assert read_extra_seeds(params) == {"base": [4, 5], "A1": [4, 5], "C1": [4, 5]}
    assert seeds_per_row(params)["C1"] == [1, 2, 3, 4, 5] and seeds_per_row(params)["B1"] == [1, 2, 3]
    out = capsys.readouterr().out
    assert "round 1:" in out and "round 2:" in out and "no unresolved row can be resolved with at most 5" in out
    assert "now: A1 reproduced, C1 unresolved" in out


def test_one_round_without_until_resolved_and_dry_writes_nothing(project: Path, capsys):
    params = project / "params.yaml"
    before = params.read_text()
    main(["--dry", "--params", str(params), "--table", str(project / "results" / "table3.csv"), "--max", "6"])
    assert params.read_text() == before
    assert "A1: + seeds 4 5 (unresolved, 5 seeds needed, has 3)" in capsys.readouterr().out
    plans = run(params, project / "results" / "table3.csv", 6, until_resolved=False, dry=False,
                repro=(sys.executable, "-c", "pass"))
    assert len(plans) == 1 and read_extra_seeds(params)["A1"] == [4, 5]


def test_without_a_table_it_says_to_run_dvc_repro(tmp_path: Path):
    with pytest.raises(SystemExit, match="run `dvc repro` first"):
        main(["--table", str(tmp_path / "none.csv"), "--params", str(tmp_path / "params.yaml")])
