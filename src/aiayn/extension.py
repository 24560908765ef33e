"""The design's one extension: the seeds each Table 3 row runs after the pilot, planned from the pilot alone.

Table 3 decides in two stages (docs/verdicts.md). Every row first runs params.yaml's `seeds`: the pilot. The
pilot's table plans each row's seeds (its `seeds_planned` column: the most any of its claims, dev BLEU and dev PPL,
needs) from the median of the rows' spreads and each claim's difference of interest, never from the row's own
observed difference. It extends only the study its design record (results/design.json) describes. This command gives
every row whose plan asks for more seeds than it has, and at most `aggregate.max_seeds`, the seeds it lacks (and
base every seed a row gets: differences are paired by seed), writes them to params.yaml's `extra_seeds` and runs
`dvc repro`. The table it leaves is the design's one test. It extends once: retesting after every round and adding
seeds until a row is resolved (optional stopping) would make the verdicts wrong far more often than `alpha`.

    python -m aiayn.extension --dry     # the plan, explained; writes nothing, runs nothing
    python -m aiayn.extension           # the extension: params.yaml's extra_seeds, then dvc repro
"""

from __future__ import annotations

import argparse
import csv
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

from aiayn.config.params import Params, add_extra_seeds
from aiayn.report import record
from aiayn.report.decide import BASE, Plan, plan_extension
from aiayn.report.significance import EQUIVALENCE, SEEDS_UP_TO, power

TABLE = "results/table3.csv"
PARAMS = "params.yaml"
RECORD = "results/design.json"
COLUMNS = (
    "row",
    "seeds_planned",
    "test",
    "expected_delta_bleu",
    "margin_bleu",
    "planning_sd",
    "seeds_planned_bleu",
    "test_ppl",
    "expected_delta_log_ppl",
    "margin_log_ppl",
    "planning_sd_ppl",
    "seeds_planned_ppl",
    "family_level",
    "verdict",
    "verdict_ppl",
)


def read_table(path: Path) -> list[dict[str, str]]:
    """table3.csv's rows as strings; a missing table says how to make one."""
    if not Path(path).is_file():
        raise FileNotFoundError(f"{path} not found: run `dvc repro` first, which writes Table 3")
    with open(path, encoding="utf-8", newline="") as f:
        rows = list(csv.DictReader(f))
    missing = sorted(set(COLUMNS) - set(rows[0] if rows else {}))
    if rows and missing:
        raise ValueError(f"{path}: no column {missing}; rerun `dvc repro` to rewrite Table 3")
    return rows


def planned_seeds(table: Sequence[Mapping[str, str]]) -> dict[str, int | None]:
    """Each row's planned seeds from table3.csv (None: out of reach or nothing to plan), base left out."""
    return {
        line["row"]: int(line["seeds_planned"]) if line["seeds_planned"] else None
        for line in table
        if line["row"] != BASE
    }


# Each claim's columns in table3.csv: its test, difference of interest, margin, planning spread and plan.
CLAIMS = {
    "BLEU": ("test", "expected_delta_bleu", "margin_bleu", "planning_sd", "seeds_planned_bleu"),
    "PPL": ("test_ppl", "expected_delta_log_ppl", "margin_log_ppl", "planning_sd_ppl", "seeds_planned_ppl"),
}


def describe(plan: Plan, table: Sequence[Mapping[str, str]], max_seeds: int) -> str:
    """The plan's basis (the planning spreads, family level) and one line a row: each claim's test, difference of
    interest and plan, what the plan gives the row and, for a claim out of reach, its power at max_seeds."""
    first = next(iter(table), {})
    level = _number(first.get("family_level"))
    spreads = ", ".join(f"{name} {_shown(_number(first.get(keys[3])), '.3g')}" for name, keys in CLAIMS.items())
    lines = [
        f"planned from the pilot: the rows' spread of paired differences (BLEU; log PPL) {spreads}; every claim "
        f"decided by its family interval at level {_shown(level, '.4f')}; aggregate.max_seeds {max_seeds}"
    ]
    for line in table:
        row = line["row"]
        if row == BASE:
            continue
        aims = [_aim(name, keys, line, level, max_seeds) for name, keys in CLAIMS.items() if line.get(keys[0])]
        gets = f"+ seeds {' '.join(map(str, plan.adds[row]))}" if row in plan.adds else "no new seeds"
        why = plan.why.get(row, "").replace("not planned", "no claim within reach")
        lines.append(f"  {row}: {'; '.join(aims)}; {why}; {gets}")
    if BASE in plan.adds:
        lines.append(f"  base: + seeds {' '.join(map(str, plan.adds[BASE]))} (the rows above pair with it)")
    return "\n".join(lines)


def _aim(name: str, keys: Sequence[str], line: Mapping[str, str], level: float | None, max_seeds: int) -> str:
    """One claim of a row in the plan: what it shows and the seeds it needs (or its power at max_seeds)."""
    kind, effect, margin, sd, planned = (line.get(k) or "" for k in keys)
    effect_n, margin_n, sd_n = _number(effect), _number(margin), _number(sd)
    aim = (
        f"show |Δ| < {_shown(margin_n, '.3g')}"
        if kind == EQUIVALENCE
        else f"resolve the sign of Δ {_shown(effect_n, '+.3g')}"
    )
    if planned:
        return f"{name} {kind}, {aim}: {planned} seeds"
    if sd_n is None or effect_n is None or level is None:
        return f"{name} {kind}, {aim}: nothing to plan (no spread or no scale)"
    reach = power(kind, max_seeds, 0.0 if kind == EQUIVALENCE else effect_n, margin_n, sd_n, level)[0]
    return f"{name} {kind}, {aim}: out of reach (> {SEEDS_UP_TO} seeds; power at {max_seeds}: {reach:.2f})"


def _number(text: str | None) -> float | None:
    return float(text) if text else None


def _shown(x: float | None, spec: str) -> str:
    return "—" if x is None else format(x, spec)


def run(
    params: Path,
    table: Path,
    dry: bool,
    repro: Sequence[str] = (sys.executable, "-m", "dvc", "repro"),
    record_path: Path = Path(RECORD),
) -> Plan:
    """Plan the extension from the pilot's table, print it, then (unless dry) write it and run `repro`. Refused
    when the study was extended already, or when params.yaml no longer says what its design record froze."""
    declared = Params.read(params)
    made = declared.extra_seeds()
    if made:
        raise ValueError(
            f"{params}: extra_seeds is already {made}: the design's one extension was made, and the table's "
            "verdicts are its final test. More seeds now would test the same rows again (optional stopping: "
            "every further look raises the chance of a false verdict). A new study needs seeds no table has "
            "shown: list them in `seeds`, clear `extra_seeds`, and run `dvc repro`."
        )
    design = declared.design()
    refused = record.refuse_extension(record_path, design, declared.seeds())
    if refused:
        raise ValueError(refused)
    rows = read_table(table)
    max_seeds = int(design["max_seeds"])
    plan = plan_extension(planned_seeds(rows), declared.seeds_per_row(), max_seeds)
    print(describe(plan, rows, max_seeds), flush=True)
    if not plan.adds:
        print("nothing to run: no row's plan asks for more seeds within aggregate.max_seeds; every verdict is final")
        return plan
    if dry:
        print(f"dry run: {params} unchanged, `dvc repro` not run")
        return plan
    extra = add_extra_seeds(params, plan.adds)
    print(f"{params}: extra_seeds = {extra}; running dvc repro", flush=True)
    subprocess.run(list(repro), check=True)
    final = {line["row"]: line for line in read_table(table)}
    print(
        "final: "
        + ", ".join(
            f"{row} BLEU {final.get(row, {}).get('verdict', '?')}, PPL {final.get(row, {}).get('verdict_ppl', '?')}"
            for row in plan.adds
            if row != BASE
        ),
        flush=True,
    )
    return plan


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m aiayn.extension", description=__doc__.splitlines()[0])
    parser.add_argument("--dry", action="store_true", help="print the plan; write and run nothing")
    parser.add_argument("--params", type=Path, default=Path(PARAMS), help=f"the DVC params file (default {PARAMS})")
    parser.add_argument("--table", type=Path, default=Path(TABLE), help=f"Table 3 as CSV (default {TABLE})")
    parser.add_argument(
        "--record", type=Path, default=Path(RECORD), help=f"the study's design record (default {RECORD})"
    )
    parser.add_argument("--until-resolved", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--max", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.until_resolved:
        parser.error(
            "--until-resolved is gone: adding seeds until a row is resolved is optional stopping, which "
            "makes false verdicts several times likelier than alpha. The design extends once, to the "
            "seeds the pilot plans: `python -m aiayn.extension` (docs/verdicts.md)"
        )
    if args.max is not None:
        parser.error("--max is declared with the design, before the runs: set aggregate.max_seeds in params.yaml")
    try:
        run(args.params, args.table, args.dry, record_path=args.record)
    except (FileNotFoundError, ValueError, subprocess.CalledProcessError) as err:
        sys.exit(f"error: {err}")


if __name__ == "__main__":
    main()
