"""The design's one extension: the seeds each Table 3 row runs after the pilot, planned from the pilot alone.

Table 3 decides in two stages (docs/verdicts.md). Every row first runs params.yaml's `seeds`: the pilot. The pilot's
table plans each row's seeds (its `seeds_planned`: the most any of its claims, dev BLEU and dev PPL, needs; handed
over typed in results/plan.json, aiayn.verdicts.decide.PlanRecord) from the median of the rows' spreads and each
claim's difference of interest, never from the row's own observed difference. It extends only the study its design
record (results/design.json) describes. This command gives every row whose plan asks for more seeds than it has, and
at most `design.max_seeds`, the seeds it lacks (and base every seed a row gets: differences are paired by seed),
writes them to params.yaml's `extra_seeds` and runs `dvc repro`. The table it leaves is the design's one test. It
extends once: retesting after every round and adding seeds until a row is resolved (optional stopping) would make
the verdicts wrong far more often than `alpha`.

    aiayn-extend --dry     # the plan, explained; writes nothing, runs nothing
    aiayn-extend           # the extension: params.yaml's extra_seeds, then dvc repro
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

from aiayn.config.params import Params, add_extra_seeds
from aiayn.run import folders
from aiayn.verdicts import record
from aiayn.verdicts.decide import BASE, ClaimPlan, Plan, PlanRecord, plan_extension
from aiayn.verdicts.significance import EQUIVALENCE, SEEDS_UP_TO, power

PLAN = f"results/{folders.PLAN}"
PARAMS = "params.yaml"
RECORD = "results/design.json"
CLAIM_NAMES = {"bleu": "BLEU", "ppl": "PPL"}


def read_plan(path: Path) -> PlanRecord:
    """The pilot's plan as the aggregate stage wrote it (results/plan.json); a missing one says how to make it."""
    if not Path(path).is_file():
        raise FileNotFoundError(f"{path} not found: run `dvc repro` first, which writes Table 3 and its plan")
    return PlanRecord.from_json(json.loads(Path(path).read_text(encoding="utf-8")), str(path))


def planned_seeds(plan: PlanRecord) -> dict[str, int | None]:
    """Each row's planned seeds (None: out of reach or nothing to plan), base left out."""
    return {row: entry.seeds_planned for row, entry in plan.rows.items()}


def describe(plan: Plan, record_: PlanRecord, max_seeds: int) -> str:
    """The plan's basis (the planning spreads, family level) and one line a row: each claim's test, difference of
    interest and plan, what the plan gives the row and, for a claim out of reach, its power at max_seeds."""
    level = record_.family_level
    spread = dict.fromkeys(CLAIM_NAMES)
    for entry in record_.rows.values():
        for name, claim in entry.claims.items():
            spread[name] = spread[name] if spread[name] is not None else claim.planning_sd
    spreads = ", ".join(f"{CLAIM_NAMES[name]} {_shown(sd, '.3g')}" for name, sd in spread.items())
    lines = [
        f"planned from the pilot: the rows' spread of paired differences (BLEU; log PPL) {spreads}; every claim "
        f"decided by its family interval at level {_shown(level, '.4f')}; design.max_seeds {max_seeds}"
    ]
    for row, entry in record_.rows.items():
        aims = [_aim(CLAIM_NAMES[name], claim, level, max_seeds) for name, claim in entry.claims.items() if claim.test]
        gets = f"+ seeds {' '.join(map(str, plan.adds[row]))}" if row in plan.adds else "no new seeds"
        why = plan.why.get(row, "").replace("not planned", "no claim within reach")
        lines.append(f"  {row}: {'; '.join(aims)}; {why}; {gets}")
    if BASE in plan.adds:
        lines.append(f"  base: + seeds {' '.join(map(str, plan.adds[BASE]))} (the rows above pair with it)")
    return "\n".join(lines)


def _aim(name: str, claim: ClaimPlan, level: float | None, max_seeds: int) -> str:
    """One claim of a row in the plan: what it shows and the seeds it needs (or its power at max_seeds)."""
    kind, effect, margin, sd = claim.test, claim.expected, claim.margin, claim.planning_sd
    aim = (
        f"show |Δ| < {_shown(margin, '.3g')}"
        if kind == EQUIVALENCE
        else f"resolve the sign of Δ {_shown(effect, '+.3g')}"
    )
    if claim.seeds_planned is not None:
        return f"{name} {kind}, {aim}: {claim.seeds_planned} seeds"
    if kind is None or sd is None or effect is None or level is None or margin is None:
        return f"{name} {kind}, {aim}: nothing to plan (no spread or no scale)"
    reach = power(kind, max_seeds, 0.0 if kind == EQUIVALENCE else effect, margin, sd, level)[0]
    return f"{name} {kind}, {aim}: out of reach (> {SEEDS_UP_TO} seeds; power at {max_seeds}: {reach:.2f})"


def _shown(x: float | None, spec: str) -> str:
    return "—" if x is None else format(x, spec)


def run(
    params: Path,
    plan_path: Path,
    dry: bool,
    repro: Sequence[str] = (sys.executable, "-m", "dvc", "repro"),
    record_path: Path = Path(RECORD),
) -> Plan:
    """Plan the extension from the pilot's plan (results/plan.json), print it, then (unless dry) write it and run
    `repro`. Refused when the study was extended already, or when params.yaml no longer says what its design record
    froze."""
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
    pilot = read_plan(plan_path)
    max_seeds = design.max_seeds
    plan = plan_extension(planned_seeds(pilot), declared.seeds_per_row(), max_seeds)
    print(describe(plan, pilot, max_seeds), flush=True)
    if not plan.adds:
        print("nothing to run: no row's plan asks for more seeds within design.max_seeds; every verdict is final")
        return plan
    if dry:
        print(f"dry run: {params} unchanged, `dvc repro` not run")
        return plan
    extra = add_extra_seeds(params, plan.adds)
    print(f"{params}: extra_seeds = {extra}; running dvc repro", flush=True)
    subprocess.run(list(repro), check=True)
    final = read_plan(plan_path).rows

    def verdict(row: str, name: str) -> str:
        claim = final[row].claims.get(name) if row in final else None
        return (claim.verdict if claim is not None else None) or "?"

    print(
        "final: "
        + ", ".join(
            f"{row} BLEU {verdict(row, 'bleu')}, PPL {verdict(row, 'ppl')}" for row in plan.adds if row != BASE
        ),
        flush=True,
    )
    return plan


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="aiayn-extend", description=__doc__.splitlines()[0])
    parser.add_argument("--dry", action="store_true", help="print the plan; write and run nothing")
    parser.add_argument("--params", type=Path, default=Path(PARAMS), help=f"the DVC params file (default {PARAMS})")
    parser.add_argument("--plan", type=Path, default=Path(PLAN), help=f"the pilot's plan (default {PLAN})")
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
            "seeds the pilot plans: `aiayn-extend` (docs/verdicts.md)"
        )
    if args.max is not None:
        parser.error("--max is declared with the design, before the runs: set design.max_seeds in params.yaml")
    try:
        run(args.params, args.plan, args.dry, record_path=args.record)
    except (FileNotFoundError, ValueError, subprocess.CalledProcessError) as err:
        sys.exit(f"error: {err}")


if __name__ == "__main__":
    main()
