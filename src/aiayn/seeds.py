"""The design's one extension: the seeds each Table 3 row runs after the pilot, planned from the pilot alone.

Table 3 decides in two stages (docs/verdicts.md). Every row first runs params.yaml's `seeds`: the pilot. The
pilot's table plans each row's seeds (its `seeds_planned` column) from the pooled spread of all rows' differences
from base and the row's difference of interest, never from the row's own observed difference. This command gives
every row whose plan asks for more seeds than it has, and at most `aggregate.max_seeds`, the seeds it lacks (and
base every seed a row gets: differences are paired by seed), writes them to params.yaml's `extra_seeds` and runs
`dvc repro`. The table it leaves is the design's one test. It extends once: retesting after every round and adding
seeds until a row is resolved (optional stopping) would make the verdicts wrong far more often than `alpha`.

    python -m aiayn.seeds --dry     # the plan, explained; writes nothing, runs nothing
    python -m aiayn.seeds           # the extension: params.yaml's extra_seeds, then dvc repro
"""

from __future__ import annotations

import argparse
import csv
import subprocess
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from aiayn.config.params import Params, add_extra_seeds
from aiayn.report.significance import EQUIVALENCE, SEEDS_UP_TO, power
from aiayn.report.table3 import BASE

TABLE = "results/table3.csv"
PARAMS = "params.yaml"
MAX_SEEDS = 10  # AggregateConfig.max_seeds' default, for a params file without an `aggregate` block
COLUMNS = (
    "row",
    "seeds_planned",
    "test",
    "expected_delta_bleu",
    "margin_bleu",
    "planning_sd",
    "family_level",
    "verdict",
)


@dataclass
class Plan:
    """The extension: the seeds each row gets (base included) and, for every row compared with base, why."""

    adds: dict[str, list[int]] = field(default_factory=dict)
    why: dict[str, str] = field(default_factory=dict)


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


def new_seeds(have: Sequence[int], count: int) -> list[int]:
    """The `count` smallest positive seeds not in `have`: every row picks the same next seeds, which base shares."""
    out: list[int] = []
    seed, taken = 1, set(have)
    while len(out) < count:
        if seed not in taken:
            out.append(seed)
        seed += 1
    return out


def plan_extension(planned: Mapping[str, int | None], seeds: Mapping[str, Sequence[int]], max_seeds: int) -> Plan:
    """The one extension: a row planned for more seeds than it has, and at most `max_seeds`, gets the seeds it
    lacks; base gets every seed a row gets. Decided by the plans alone (pilot spread, difference of interest)."""
    plan = Plan()
    for row, want in planned.items():
        have = list(seeds.get(row, ()))
        if want is None:
            plan.why[row] = f"not planned; stays at {len(have)}"
        elif want <= len(have):
            plan.why[row] = f"{want} planned, has {len(have)}: its verdict is final"
        elif want > max_seeds:
            plan.why[row] = f"{want} planned > aggregate.max_seeds {max_seeds}: stays at {len(have)}"
        else:
            plan.adds[row] = new_seeds(have, want - len(have))
            plan.why[row] = f"{want} planned, has {len(have)}"
    if plan.adds:
        base = list(seeds.get(BASE, []))
        wanted = sorted({s for add in plan.adds.values() for s in add} - set(base))
        if wanted:
            plan.adds = {BASE: wanted, **plan.adds}
    return plan


def describe(plan: Plan, table: Sequence[Mapping[str, str]], max_seeds: int) -> str:
    """The plan's basis (pooled SD, family level) and one line a row: its test, difference of interest, what the
    plan gives it and, for a row it cannot reach, the power it would have at max_seeds."""
    first = next(iter(table), {})
    sd, level = _number(first.get("planning_sd")), _number(first.get("family_level"))
    lines = [
        f"planned from the pilot: pooled SD of the paired differences {_shown(sd, '.3g')}; each row decided "
        f"by its family interval at level {_shown(level, '.4f')}; aggregate.max_seeds {max_seeds}"
    ]
    for line in table:
        row = line["row"]
        if row == BASE:
            continue
        effect, margin = _number(line["expected_delta_bleu"]), _number(line["margin_bleu"])
        kind = line["test"]
        aim = (
            f"show |Δ| < {_shown(margin, '.2f')}"
            if kind == EQUIVALENCE
            else f"resolve the sign of Δ {_shown(effect, '+.2f')}"
        )
        gets = f"+ seeds {' '.join(map(str, plan.adds[row]))}" if row in plan.adds else "no new seeds"
        why = plan.why.get(row, "")
        if not line["seeds_planned"]:
            if sd is None or effect is None or level is None:
                why = why.replace("not planned", "nothing to plan (no spread or no scale)")
            else:
                reach = power(kind, max_seeds, 0.0 if kind == EQUIVALENCE else effect, margin, sd, level)[0]
                why = why.replace(
                    "not planned", f"out of reach (> {SEEDS_UP_TO} seeds; power at {max_seeds}: {reach:.2f})"
                )
        lines.append(f"  {row}: {kind}, {aim}; {why}; {gets}")
    if BASE in plan.adds:
        lines.append(f"  base: + seeds {' '.join(map(str, plan.adds[BASE]))} (the rows above pair with it)")
    return "\n".join(lines)


def _number(text: str | None) -> float | None:
    return float(text) if text else None


def _shown(x: float | None, spec: str) -> str:
    return "—" if x is None else format(x, spec)


def max_seeds_of(params: Path) -> int:
    """params.yaml's aggregate.max_seeds (declared with the design), or the default."""
    value = (Params.read(params).data.get("aggregate") or {}).get("max_seeds")
    return MAX_SEEDS if value is None else int(value)


def run(params: Path, table: Path, dry: bool, repro: Sequence[str] = (sys.executable, "-m", "dvc", "repro")) -> Plan:
    """Plan the extension from the pilot's table, print it, then (unless dry) write it and run `repro`."""
    made = Params.read(params).extra_seeds()
    if made:
        raise ValueError(
            f"{params}: extra_seeds is already {made}: the design's one extension was made, and the table's "
            "verdicts are its final test. More seeds now would test the same rows again (optional stopping: "
            "every further look raises the chance of a false verdict). For a new study, list its seeds in "
            "`seeds` and clear `extra_seeds`."
        )
    rows = read_table(table)
    max_seeds = max_seeds_of(params)
    plan = plan_extension(planned_seeds(rows), Params.read(params).seeds_per_row(), max_seeds)
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
    verdicts = {line["row"]: line["verdict"] for line in read_table(table)}
    print("final: " + ", ".join(f"{row} {verdicts.get(row, '?')}" for row in plan.adds if row != BASE), flush=True)
    return plan


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m aiayn.seeds", description=__doc__.splitlines()[0])
    parser.add_argument("--dry", action="store_true", help="print the plan; write and run nothing")
    parser.add_argument("--params", type=Path, default=Path(PARAMS), help=f"the DVC params file (default {PARAMS})")
    parser.add_argument("--table", type=Path, default=Path(TABLE), help=f"Table 3 as CSV (default {TABLE})")
    parser.add_argument("--until-resolved", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--max", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.until_resolved:
        parser.error(
            "--until-resolved is gone: adding seeds until a row is resolved is optional stopping, which "
            "makes false verdicts several times likelier than alpha. The design extends once, to the "
            "seeds the pilot plans: `python -m aiayn.seeds` (docs/verdicts.md)"
        )
    if args.max is not None:
        parser.error("--max is declared with the design, before the runs: set aggregate.max_seeds in params.yaml")
    try:
        run(args.params, args.table, args.dry)
    except (FileNotFoundError, ValueError, subprocess.CalledProcessError) as err:
        sys.exit(f"error: {err}")


if __name__ == "__main__":
    main()
