"""Adaptive seeds, opt-in: more seeds only for the Table 3 rows that are unresolved but that enough seeds can resolve.

A round reads results/table3.csv, picks the rows whose verdict is `unresolved` and whose `seeds needed` is at most
--max, gives each (and base: differences are paired by seed) the seeds it lacks in params.yaml's `extra_seeds`,
then runs `dvc repro`, which trains and evaluates only the new seeds of those rows. --until-resolved repeats until
no row is left to pick; every pick adds at least one seed and no row goes past --max, so it ends.

    python -m aiayn.seeds --until-resolved --max 10
    python -m aiayn.seeds --dry          # what one round would add; writes nothing, runs nothing
"""
from __future__ import annotations

import argparse
import csv
import subprocess
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from aiayn.config.params import add_extra_seeds, seeds_per_row
from aiayn.report.table3 import BASE

TABLE = "results/table3.csv"
PARAMS = "params.yaml"


@dataclass
class Plan:
    """One round: the seeds each row gets (base included) and, per picked row, why."""

    adds: dict[str, list[int]] = field(default_factory=dict)
    why: dict[str, str] = field(default_factory=dict)


def read_table(path: Path) -> list[dict[str, str]]:
    """table3.csv's rows as strings; a missing table says how to make one."""
    if not Path(path).is_file():
        raise FileNotFoundError(f"{path} not found: run `dvc repro` first, which writes Table 3")
    with open(path, encoding="utf-8", newline="") as f:
        rows = list(csv.DictReader(f))
    missing = {"row", "verdict", "seeds_needed"} - set(rows[0] if rows else {})
    if rows and missing:
        raise ValueError(f"{path}: no column {sorted(missing)}; rerun `dvc repro` to rewrite Table 3")
    return rows


def new_seeds(have: Sequence[int], count: int) -> list[int]:
    """The `count` smallest positive seeds not in `have`: every row picks the same next seeds, which base shares."""
    out, seed, taken = [], 1, set(have)
    while len(out) < count:
        if seed not in taken:
            out.append(seed)
        seed += 1
    return out


def plan_round(table: Sequence[Mapping[str, str]], seeds: Mapping[str, Sequence[int]], max_seeds: int) -> Plan:
    """The rows to give more seeds: unresolved, below `max_seeds` seeds, and needing at most `max_seeds`. Each
    goes to the seeds it needs (at least one more, at most `max_seeds`); base gets every seed a picked row gets."""
    plan = Plan()
    for line in table:
        row, needed = line["row"], line["seeds_needed"]
        if row == BASE or row not in seeds or line["verdict"] != "unresolved" or not needed:
            continue
        have = list(seeds[row])
        if int(needed) > max_seeds or len(have) >= max_seeds:
            continue
        add = new_seeds(have, min(max_seeds, max(int(needed), len(have) + 1)) - len(have))
        plan.adds[row] = add
        plan.why[row] = f"unresolved, {needed} seeds needed, has {len(have)}"
    if plan.adds:
        base = list(seeds.get(BASE, []))
        wanted = sorted({s for add in plan.adds.values() for s in add} - set(base))
        if wanted:
            plan.adds = {BASE: wanted, **plan.adds}
    return plan


def describe(plan: Plan) -> str:
    """One line a row: the seeds it gets, and why."""
    return "\n".join(f"  {row}: + seeds {' '.join(map(str, add))} ({plan.why.get(row, 'the rows below pair with it')})"
                     for row, add in plan.adds.items())


def run(params: Path, table: Path, max_seeds: int, until_resolved: bool, dry: bool,
        repro: Sequence[str] = (sys.executable, "-m", "dvc", "repro")) -> list[Plan]:
    """Rounds of plan, params.yaml edit and `repro`, printing each; the plans carried out (a dry one included)."""
    done: list[Plan] = []
    while True:
        plan = plan_round(read_table(table), seeds_per_row(params), max_seeds)
        if not plan.adds:
            print(f"nothing to run: no unresolved row can be resolved with at most {max_seeds} seeds")
            return done
        print(f"round {len(done) + 1}:\n{describe(plan)}", flush=True)
        done.append(plan)
        if dry:
            print(f"dry run: {params} unchanged, `dvc repro` not run")
            return done
        extra = add_extra_seeds(params, plan.adds)
        print(f"{params}: extra_seeds = {extra}; running dvc repro", flush=True)
        subprocess.run(list(repro), check=True)
        verdicts = {line["row"]: line["verdict"] for line in read_table(table)}
        print("  now: " + ", ".join(f"{row} {verdicts.get(row, '?')}" for row in plan.why), flush=True)
        if not until_resolved:
            return done


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m aiayn.seeds", description=__doc__.splitlines()[0])
    parser.add_argument("--until-resolved", action="store_true", help="repeat rounds until no row can be picked")
    parser.add_argument("--max", type=int, default=10, dest="max_seeds", metavar="N",
                        help="at most N seeds a row (default 10)")
    parser.add_argument("--dry", action="store_true", help="print one round's plan; write and run nothing")
    parser.add_argument("--params", type=Path, default=Path(PARAMS), help=f"the DVC params file (default {PARAMS})")
    parser.add_argument("--table", type=Path, default=Path(TABLE), help=f"Table 3 as CSV (default {TABLE})")
    args = parser.parse_args(argv)
    if args.max_seeds < 2:
        parser.error("--max must be at least 2 (a paired t-test needs two seeds)")
    try:
        run(args.params, args.table, args.max_seeds, args.until_resolved, args.dry)
    except (FileNotFoundError, ValueError, subprocess.CalledProcessError) as err:
        sys.exit(f"error: {err}")


if __name__ == "__main__":
    main()
