"""aiayn-extend: the design's one extension from the pilot's plan, the params.yaml it leaves, and
what it refuses (a second extension, a design changed since its pilot, a second look, --until-resolved). No training
here: `dvc repro` is replaced by a stand-in; tests/integration/pipeline/test_adaptive_seeds.py runs the real one."""

from __future__ import annotations

import dataclasses
import json
import re
import shutil
import sys
from pathlib import Path

import pytest

from aiayn.config.params import Params
from aiayn.verdicts import record
from aiayn.verdicts.decide import PlanRecord, new_seeds, plan_extension
from aiayn.verdicts.extension import main, planned_seeds, run
from aiayn.verdicts.significance import Design


def line(row: str, test: str, planned: int | None, verdict: str = "unresolved") -> dict[str, object]:
    """A row of the pilot's Table 3 (decide's columns) whose BLEU claim plans `planned` seeds and whose PPL claim
    needs 3 (or is out of reach for an equivalence row); base has no claims."""
    if row == "base":
        return {"row": row, "family_level": 0.9987}
    return {
        "row": row,
        "seeds_planned": planned,
        "test": test,
        "expected_delta_bleu": -0.1 if test == "equivalence" else -1.2,
        "margin_bleu": 0.5,
        "planning_sd": 0.41,
        "seeds_planned_bleu": planned,
        "test_ppl": test,
        "expected_delta_log_ppl": 0.001 if test == "equivalence" else 0.05,
        "margin_log_ppl": 0.02,
        "planning_sd_ppl": 0.01,
        "seeds_planned_ppl": None if test != "difference" else 3,
        "family_level": 0.9987,
        "verdict": verdict,
        "verdict_ppl": "unresolved",
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
    plan = plan_extension(planned_seeds(PlanRecord.of(TABLE)), SEEDS, max_seeds=10)
    assert plan.adds == {"base": [4, 5, 6, 7, 8], "A1": [4, 5], "A3": [4, 5, 6, 7, 8]}
    assert plan.why["A1"] == "5 planned, has 3" and plan.why["C1"] == "2 planned, has 3: its verdict is final"
    assert "12 planned > design.max_seeds 10" in plan.why["C3"] and "not planned" in plan.why["A2"]
    capped = plan_extension(planned_seeds(PlanRecord.of(TABLE)), SEEDS, max_seeds=6)
    assert capped.adds == {"base": [4, 5], "A1": [4, 5]}


def test_the_plan_ignores_every_verdict():
    """The same plans with every verdict flipped give the same extension: nothing is added because a row is (or
    is not) resolved yet, which is what kept the old --until-resolved from its promise."""
    flipped = [dict(r, verdict="reproduced" if r.get("verdict") == "unresolved" else "unresolved") for r in TABLE]
    as_flipped = plan_extension(planned_seeds(PlanRecord.of(flipped)), SEEDS, 10)
    assert as_flipped.adds == plan_extension(planned_seeds(PlanRecord.of(TABLE)), SEEDS, 10).adds


def test_new_seeds_fill_the_smallest_gaps():
    assert new_seeds([1, 2, 3], 2) == [4, 5] and new_seeds([2, 5], 3) == [1, 3, 4] and new_seeds([1], 0) == []


@pytest.fixture
def project(repo_root: Path, tmp_path: Path) -> Path:
    """The shipped params.yaml, a pilot's Table 3 that plans more seeds for A1 and A3, and the design record the
    aggregate stage wrote with it."""
    with_seeds(shutil.copy(repo_root / "params.yaml", tmp_path / "params.yaml"), [1, 2, 3])
    (tmp_path / "results").mkdir()
    write_plan(tmp_path / "results" / "plan.json", TABLE)
    params = Params.read(tmp_path / "params.yaml")
    design = Design(**dataclasses.asdict(params.design()))
    record.update(tmp_path / "results" / record.FILE, design, params.seeds(), SEEDS)
    return tmp_path


def with_seeds(params: Path, seeds: list[int]) -> None:
    """params.yaml's `seeds` list replaced, its comments kept."""
    listed = "".join(f"  - {s}\n" for s in seeds)
    params.write_text(re.sub(r"^seeds:\n(  - \d+\n)+", f"seeds:\n{listed}", params.read_text(), flags=re.M))


def write_plan(path: Path, lines: list[dict[str, object]]) -> None:
    """The plan the aggregate stage writes from these Table 3 rows (results/plan.json)."""
    path.write_text(json.dumps(PlanRecord.of(lines).to_json()))


def test_one_extension_edits_params_runs_repro_and_a_second_is_refused(project: Path, capsys):
    table, params = project / "results" / "plan.json", project / "params.yaml"
    lines = [
        dict(line("A1", "difference", 5), verdict="reproduced", verdict_ppl="reproduced"),
        line("A3", "equivalence", 8),
    ]
    final = f"import sys; open(sys.argv[1], 'w').write({json.dumps(PlanRecord.of(lines).to_json())!r})"
    plan = run(
        params, table, dry=False, repro=(sys.executable, "-c", final, str(table)), record_path=record_of(project)
    )
    assert plan.adds == {"base": [4, 5, 6, 7, 8], "A1": [4, 5], "A3": [4, 5, 6, 7, 8]}
    assert Params.read(params).extra_seeds() == plan.adds
    per_row = Params.read(params).seeds_per_row()
    assert per_row["A3"] == [1, 2, 3, 4, 5, 6, 7, 8] and per_row["B1"] == [1, 2, 3]
    out = capsys.readouterr().out
    assert "(BLEU; log PPL) BLEU 0.41, PPL 0.01; every claim decided by its family interval at level 0.9987" in out
    assert (
        "A1: BLEU difference, resolve the sign of Δ -1.2: 5 seeds; PPL difference, resolve the sign of Δ +0.05: 3 "
        "seeds; 5 planned, has 3; + seeds 4 5" in out
    )
    assert "A3: BLEU equivalence, show |Δ| < 0.5: 8 seeds; " in out and "8 planned, has 3; + seeds 4 5 6 7 8" in out
    # A claim the plan cannot reach says what power it would have at max_seeds (the stand-in table is not consistent).
    assert "A2: BLEU equivalence, show |Δ| < 0.5: out of reach (> 100 seeds; power at 10: 0.12)" in out
    assert "no claim within reach; stays at 3" in out
    assert "final: A1 BLEU reproduced, PPL reproduced, A3 BLEU unresolved, PPL unresolved" in out
    with pytest.raises(ValueError, match="one extension was made.*optional stopping"):
        run(params, table, dry=False, repro=(sys.executable, "-c", "pass"), record_path=record_of(project))


def record_of(project: Path) -> Path:
    return project / "results" / record.FILE


def test_a_design_changed_since_its_pilot_table_is_not_extended(project: Path):
    """The pilot's table froze the design's keys in its record: params.yaml edited afterwards (a larger cap, another
    margin) is refused, naming each change; restoring the keys makes the extension possible again."""
    params, table = project / "params.yaml", project / "results" / "plan.json"
    declared = params.read_text()
    params.write_text(
        declared.replace("max_seeds: 10", "max_seeds: 12").replace("margin_bleu: 0.5", "margin_bleu: 0.3")
    )
    with pytest.raises(ValueError) as refused:
        run(params, table, dry=True, record_path=record_of(project))
    text = str(refused.value)
    assert "design.margin_bleu: 0.5 in the record, 0.3 now" in text and "design.max_seeds: 10 in the record" in text
    assert "a design changed after its pilot was seen is not the design's test" in text
    params.write_text(declared)
    assert run(params, table, dry=True, record_path=record_of(project)).adds


def test_a_new_study_over_runs_already_shown_is_a_second_look(project: Path):
    """The extension's seeds moved into `seeds` and extra_seeds cleared, as if a new study began: its pilot would be
    runs the old study's tables showed, so the aggregate keeps the old record and the extension is refused. A new
    study on seeds no table has shown starts a record of its own."""
    params, table, path = project / "params.yaml", project / "results" / "plan.json", record_of(project)
    design = Design(pilot_seeds=(1, 2, 3))
    record.update(path, design, [1, 2, 3], {"base": [1, 2, 3, 4, 5], "A1": [1, 2, 3, 4, 5]})  # the extended table
    with_seeds(params, [1, 2, 3, 4, 5])
    again = record.update(path, design, [1, 2, 3, 4, 5], {"base": [1, 2, 3, 4, 5]})
    assert again == ["seeds: [1, 2, 3] in the record, [1, 2, 3, 4, 5] now"]  # the table's legend says it
    with pytest.raises(ValueError, match=r"seeds \[1, 2, 3, 4, 5\] were shown by the study's tables already"):
        run(params, table, dry=True, record_path=path)
    assert record.update(path, design, [11, 12, 13], {"base": [11, 12, 13]}) == []  # fresh seeds: a new study
    assert record.read(path)["pilot_seeds"] == [11, 12, 13]


def test_dry_writes_nothing_and_the_cap_comes_from_params(project: Path, capsys):
    params = project / "params.yaml"
    before = params.read_text()
    table = project / "results" / "plan.json"
    main(["--dry", "--params", str(params), "--plan", str(table), "--record", str(record_of(project))])
    assert params.read_text() == before
    assert "5 planned, has 3; + seeds 4 5" in capsys.readouterr().out
    params.write_text(before.replace("max_seeds: 10", "max_seeds: 6"))
    record_of(project).unlink()  # a cap declared before the pilot's table: a record that says 6
    design = Design(**dataclasses.asdict(Params.read(params).design()))
    record.update(record_of(project), design, [1, 2, 3], SEEDS)
    assert run(params, table, dry=True, record_path=record_of(project)).adds == {"base": [4, 5], "A1": [4, 5]}


def test_until_resolved_and_max_are_refused_with_the_reason(project: Path, capsys):
    for flag in (["--until-resolved"], ["--max", "10"]):
        with pytest.raises(SystemExit):
            main([*flag, "--params", str(project / "params.yaml")])
    err = capsys.readouterr().err
    assert "optional stopping" in err and "design.max_seeds in params.yaml" in err


def test_without_a_table_it_says_to_run_dvc_repro(tmp_path: Path, repo_root: Path):
    shutil.copy(repo_root / "params.yaml", tmp_path / "params.yaml")
    for missing in ("--plan", "--record"):
        args = {
            "--plan": str(tmp_path / "plan.json"),
            "--record": str(tmp_path / "r.json"),
            "--params": str(tmp_path / "params.yaml"),
        }
        with pytest.raises(SystemExit, match="run `dvc repro` first"):
            main([x for k, v in args.items() for x in (k, v)])
        del missing
