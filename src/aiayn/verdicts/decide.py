"""Table 3's decision: every row's claims about its difference from base, one per column the paper reports (dev
BLEU and dev PPL), each decided by a family interval over all the claims of the table (docs/verdicts.md).

A claim's unit is the training run: per-seed differences from base, paired by seed, in BLEU or in log PPL (the log
of the row's PPL over base's: the difference of mean token losses). The family is every claim the table makes, so
with probability at least 1 - alpha all of them are true together (aiayn.verdicts.significance: the verdict rules,
the power and the plan).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from aiayn.paper import paper_base_bleu, paper_base_ppl
from aiayn.verdicts.significance import (
    EQUIVALENCE,
    OWN,
    Design,
    family_level,
    kind_of,
    planning_sd,
    seeds_needed,
    sign_flip_p,
    t_quantile,
    verdict,
)
from aiayn.verdicts.stats import mean_ci, paired_test

BASE = "base"


@dataclass(frozen=True)
class Measure:
    """One column the verdicts read, and the CSV keys of its claim. BLEU's keys are the table's first (verdict,
    test, claim_low ...); PPL's carry `_ppl`."""

    name: str  # "bleu" | "ppl"
    delta: str  # the paired difference's key stem: delta_bleu, delta_log_ppl
    suffix: str  # of the claim's keys: "" (BLEU), "_ppl"
    expected: str  # the difference of interest at this setting
    margin: str  # delta at this setting
    scale: str  # the paper's unit -> this setting's
    in_interval: str  # whether the family interval holds the paper's difference

    def key(self, stem: str) -> str:
        """A claim key: verdict -> verdict_ppl, claim_low -> claim_ppl_low, planning_sd -> planning_sd_ppl."""
        if not self.suffix:
            return stem
        head, _, tail = stem.partition("_")
        return f"{head}{self.suffix}_{tail}" if stem.startswith("claim_") else f"{stem}{self.suffix}"


BLEU = Measure("bleu", "delta_bleu", "", "expected_delta_bleu", "margin_bleu", "bleu_scale", "paper_delta_in_interval")
PPL = Measure(
    "ppl", "delta_log_ppl", "_ppl", "expected_delta_log_ppl", "margin_log_ppl", "ppl_scale", "paper_ppl_in_interval"
)
MEASURES = {m.name: m for m in (BLEU, PPL)}


def differences(measure: Measure, values: Mapping[int, float], base: Mapping[int, float]) -> dict[str, Any]:
    """A row's paired-difference columns of one measure over the seeds it shares with base: the mean, its 95%
    interval, the spread and number of pairs (what the verdict is decided on), the t-test's and the sign-flip p."""
    d = paired_test(values, base)
    return {
        measure.delta: d.mean_diff,
        f"{measure.delta}_ci95_low": d.low,
        f"{measure.delta}_ci95_high": d.high,
        f"{measure.delta}_sd": d.sd,
        f"{measure.delta}_n_pairs": d.n,
        f"{measure.delta}_p_seeds": d.p_value,
        f"{measure.delta}_p_sign_flip": sign_flip_p(d.diffs),
    }


def scales(design: Design, base_pilot: Mapping[str, float | None]) -> dict[str, float | None]:
    """Each column's factor from the paper's unit to this setting's: declared, 1 at the paper's setting, else our
    base's pilot mean over the paper's base (BLEU over 25.8; mean log PPL over log 4.92). None without a base."""
    paper = {"bleu": paper_base_bleu(), "ppl": math.log(paper_base_ppl())}
    declared = {"bleu": design.bleu_scale, "ppl": design.ppl_scale}
    out: dict[str, float | None] = {}
    for name in MEASURES:
        ours = base_pilot.get(name)
        if declared[name] is not None:
            out[name] = declared[name]
        elif design.paper_setting:
            out[name] = 1.0
        else:
            out[name] = None if ours is None or not ours > 0 else ours / paper[name]
    return out


def paper_margins(design: Design) -> dict[str, float]:
    """Each column's margin at the paper's setting: BLEU as declared; PPL as a log ratio, log(1 + margin_ppl)."""
    return {"bleu": design.margin_bleu, "ppl": math.log1p(design.margin_ppl)}


def decide(
    values: Mapping[str, Mapping[str, Mapping[int, float]]],
    paper: Mapping[str, Mapping[str, float | None]],
    interest: Mapping[str, float | None],
    design: Design = Design(),
) -> dict[str, dict[str, Any]]:
    """Table 3's whole decision. `values[column][row][seed]`: dev BLEU ("bleu") and dev log PPL ("ppl") of each
    run; `paper[column][row]`: the paper's difference from base (BLEU; log PPL ratio), None for a row the paper does
    not have; `interest[row]`: a user row's BLEU effect of interest (paper units). Every row gets its differences,
    and each row compared with base a family interval, a verdict and a plan per column of `design.columns`."""
    rows = list(values.get("bleu", {}) or values.get("ppl", {}))
    for column in values.values():
        rows += [row for row in column if row not in rows]
    out: dict[str, dict[str, Any]] = {row: {"row": row} for row in rows}
    for measure in MEASURES.values():  # every column's differences; claims only for design.columns
        column = values.get(measure.name, {})
        for row in rows:
            if row != BASE:
                out[row].update(differences(measure, column.get(row, {}), column.get(BASE, {})))
    base_pilot = {
        name: mean_ci(v for s, v in values.get(name, {}).get(BASE, {}).items() if _pilot(design, s)).mean
        for name in MEASURES
    }
    claims = [
        (MEASURES[name], row) for name in design.columns for row in rows if row != BASE and _pairs(out[row], name) >= 2
    ]
    level = family_level(design.alpha, len(claims))
    factor = scales(design, base_pilot)
    margins = paper_margins(design)
    for name in design.columns:
        measure = MEASURES[name]
        compared = [row for m, row in claims if m is measure]
        spread = planning_sd(
            [out[r][f"{measure.delta}_sd"] for r in compared],
            [_pairs(out[r], name) for r in compared],
            design.planning_pool,
        )
        scale = factor[name]
        margin = None if scale is None else margins[name] * scale
        for row in rows:
            out[row].update(
                {
                    "family_level": level if claims else None,
                    measure.scale: scale,
                    measure.margin: margin,
                    measure.key("planning_sd"): spread,
                }
            )
            if row != BASE:
                own_effect = (interest.get(row) or design.margin_bleu) if name == "bleu" else margins[name]
                out[row].update(
                    _claim(
                        measure,
                        out[row],
                        paper.get(name, {}).get(row),
                        own_effect,
                        scale,
                        margin,
                        spread,
                        level,
                        design,
                    )
                )
    for row in rows:
        if row != BASE:
            out[row].update(_row_plan(out[row], design))
    return out


def _pilot(design: Design, seed: int) -> bool:
    return design.pilot_seeds is None or seed in design.pilot_seeds


def _pairs(row: Mapping[str, Any], name: str) -> int:
    return int(row.get(f"{MEASURES[name].delta}_n_pairs") or 0)


def _claim(
    measure: Measure,
    row: Mapping[str, Any],
    paper_delta: float | None,
    own_effect: float,
    scale: float | None,
    margin: float | None,
    spread: float | None,
    level: float,
    design: Design,
) -> dict[str, Any]:
    """One claim of a row: its test (from the paper's difference and margin), family interval, verdict, the
    difference of interest at this setting (and whether the interval holds it) and the seeds its decision needs."""
    kind = kind_of(paper_delta, paper_margins(design)[measure.name])
    in_paper_units = own_effect if kind == OWN else paper_delta
    expected = None if scale is None or in_paper_units is None else in_paper_units * scale
    n, sd, mean = _pairs(row, measure.name), row.get(f"{measure.delta}_sd"), row.get(measure.delta)
    low = high = None
    if n >= 2 and sd:
        half = float(t_quantile(level, n)) * sd / math.sqrt(n)
        low, high = mean - half, mean + half
    decided = verdict(kind, low, high, expected, margin)
    # An equivalence claim plans for showing "no difference" when there is none; the others for their effect.
    planned = seeds_needed(kind, 0.0 if kind == EQUIVALENCE else expected, margin, spread, level, design.power)
    return {
        measure.key("test"): kind,
        f"{measure.delta}_family_low": low,
        f"{measure.delta}_family_high": high,
        measure.key("verdict"): decided.name,
        measure.key("claim_low"): decided.low,
        measure.key("claim_high"): decided.high,
        measure.expected: expected,
        f"seeds_planned_{measure.name}": planned,
        measure.in_interval: None
        if low is None or high is None or kind == OWN or expected is None
        else ("yes" if low <= expected <= high else "no"),
    }


def _row_plan(row: Mapping[str, Any], design: Design) -> dict[str, Any]:
    """The row's seeds: the most any of its claims needs within max_seeds (a claim out of reach does not drive the
    extension); when none is within reach, the fewest any needs (None: nothing to plan). Its verdicts are interim
    while the pilot's table plans it more seeds than it has, within max_seeds."""
    plans = [row.get(f"seeds_planned_{name}") for name in design.columns]
    known = [p for p in plans if p is not None]
    reachable = [p for p in known if p <= design.max_seeds]
    planned = max(reachable) if reachable else min(known, default=None)
    n = min((_pairs(row, name) for name in design.columns), default=0)
    interim = not design.extended and planned is not None and n < planned <= design.max_seeds
    return {"seeds_planned": planned, "verdict_final": not interim}


def claim_count(rows: list[Mapping[str, Any]], design: Design) -> int:
    """The family's size (Bonferroni's m): every claim over at least two pairs, BLEU and PPL alike."""
    return sum(r["row"] != BASE and _pairs(r, name) >= 2 for r in rows for name in design.columns)


@dataclass
class Plan:
    """The extension: the seeds each row gets (base included) and, for every row compared with base, why."""

    adds: dict[str, list[int]] = field(default_factory=dict)
    why: dict[str, str] = field(default_factory=dict)


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
            plan.why[row] = f"{want} planned > design.max_seeds {max_seeds}: stays at {len(have)}"
        else:
            plan.adds[row] = new_seeds(have, want - len(have))
            plan.why[row] = f"{want} planned, has {len(have)}"
    if plan.adds:
        base = list(seeds.get(BASE, []))
        wanted = sorted({s for add in plan.adds.values() for s in add} - set(base))
        if wanted:
            plan.adds = {BASE: wanted, **plan.adds}
    return plan


@dataclass(frozen=True)
class ClaimPlan:
    """One claim of a row as the pilot planned it: its test (difference, equivalence...), the difference of
    interest and margin at this setting, the spread it was planned from, the seeds it needs (None: out of reach or
    nothing to plan) and its verdict."""

    test: str | None
    expected: float | None
    margin: float | None
    planning_sd: float | None
    seeds_planned: int | None
    verdict: str | None


@dataclass(frozen=True)
class RowPlan:
    """A row's plan: the most seeds any of its claims needs within max_seeds (None: none planned), and each claim
    (keyed by measure: "bleu", "ppl")."""

    seeds_planned: int | None
    claims: dict[str, ClaimPlan]


@dataclass(frozen=True)
class PlanRecord:
    """What `decide` planned for every row but base, handed to the extension (aiayn-extend) as the
    aggregate stage wrote it (results/plan.json): typed, so that no reader spells the table's column names."""

    family_level: float | None
    rows: dict[str, RowPlan]

    @classmethod
    def of(cls, table: Sequence[Mapping[str, Any]]) -> PlanRecord:
        """The plan in Table 3's rows (each `decide`'s columns of one row, "row" its name)."""
        rows: dict[str, RowPlan] = {}
        level = None
        for line in table:
            row = line["row"]
            level = line.get("family_level", level)
            if row == BASE:
                continue
            claims = {
                m.name: ClaimPlan(
                    test=line.get(m.key("test")),
                    expected=line.get(m.expected),
                    margin=line.get(m.margin),
                    planning_sd=line.get(m.key("planning_sd")),
                    seeds_planned=line.get(f"seeds_planned_{m.name}"),
                    verdict=line.get(m.key("verdict")),
                )
                for m in MEASURES.values()
                if line.get(m.key("test")) is not None
            }
            rows[row] = RowPlan(seeds_planned=line.get("seeds_planned"), claims=claims)
        return cls(family_level=level, rows=rows)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: Mapping[str, Any], where: str = "plan.json") -> PlanRecord:
        """The record written by `to_json`; a file of another shape is refused naming it."""
        try:
            rows = {
                row: RowPlan(
                    seeds_planned=entry["seeds_planned"],
                    claims={name: ClaimPlan(**claim) for name, claim in entry["claims"].items()},
                )
                for row, entry in data["rows"].items()
            }
            return cls(family_level=data["family_level"], rows=rows)
        except (KeyError, TypeError, AttributeError) as err:
            raise ValueError(f"{where}: not a plan record ({err}); rerun `dvc repro` to rewrite it") from None
