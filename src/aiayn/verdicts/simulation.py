"""Table 3's whole two-stage design simulated with the project's own functions: the pilot's table (decide), the one
extension it plans (aiayn.verdicts.decide.plan_extension) and the final table, many times over planted differences. What
the tables promise (all verdicts together wrong with probability at most alpha) is checked here, by
tests/verdicts/test_decide.py, and docs/verdicts.md's tables come from it:

    aiayn-simulate [--studies 2000] [--pilot 4]   # every scenario, the default design (python -m: same)

Ends with RESULT lines: the worst family-wise false-verdict rate over the scenarios against its bound (target: at
most the bound, alpha 0.05 plus the simulation's own error), that ratio last.

A study draws every row's runs for seeds 1..max_seeds at once (the seeds a design does not run are never read), so
two designs run on the same simulated data. Runs share their seed's effect across rows (training from one seed),
and every row's differences are paired with the same base runs: base's own noise is in every row's differences.
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace

import numpy as np
from scipy import stats

from aiayn.paper import paper_base_bleu, paper_base_ppl, paper_table3
from aiayn.verdicts.decide import BASE, MEASURES, decide, paper_margins, plan_extension
from aiayn.verdicts.significance import UNRESOLVED, Design, Verdict

PAPER = paper_table3()
ROWS = tuple(name for name in PAPER if name != BASE)  # the paper's 19 rows compared with base
PAPER_DELTA = {
    "bleu": {row: round(PAPER[row]["bleu_dev"] - PAPER[BASE]["bleu_dev"], 4) for row in ROWS},
    "ppl": {row: round(math.log(PAPER[row]["ppl_dev"] / PAPER[BASE]["ppl_dev"]), 6) for row in ROWS},
}
# The spread of paired differences in a typical row, at the paper's scale (the designs declare scale 1): BLEU 0.35
# (0.7 of the margin 0.5), log PPL 0.014 (0.7 of the margin log 1.02).
SPREAD = {"bleu": 0.35, "ppl": 0.014}
BASE_SHARE = 0.5  # base's own noise, as a share of a typical row's paired SD: every row's differences carry it
SEED_SD = {"bleu": 2.0, "ppl": 0.05}  # each seed's effect on every row alike (cancels in the differences)


@dataclass(frozen=True)
class Scenario:
    """What a study plants: each row's true differences (paper units) and its spread, a multiple of SPREAD: fixed
    per row (`wide`, others 1) or drawn per study and row from a log-normal with SD `log_sd` of log sigma."""

    name: str
    truth: Mapping[str, Mapping[str, float]] = field(default_factory=dict)  # column -> row -> true difference
    wide: Mapping[str, float] = field(default_factory=dict)
    log_sd: float = 0.0

    def spreads(self, rng: np.random.Generator) -> dict[str, float]:
        if self.log_sd:
            return {row: float(np.exp(rng.normal(0.0, self.log_sd))) for row in ROWS}
        return {row: self.wide.get(row, 1.0) for row in ROWS}


def on_the_margin(design: Design) -> dict[str, dict[str, float]]:
    """Every row's true difference exactly on the margin (+-, alternating): where every claim of "no difference
    within the margin" is false."""
    margins = paper_margins(design)
    return {c: {row: margins[c] * (1 if i % 2 else -1) for i, row in enumerate(ROWS)} for c in MEASURES}


def scenarios(design: Design) -> list[Scenario]:
    """The settings the promise is checked in: rows alike; three rows at 4x the others' spread; one at
    8x; log-normal spreads (SD of log sigma 0.3 and 0.6); every difference on the margin. No true difference
    elsewhere, the hardest case for claims of a sign."""
    return [
        Scenario("rows alike"),
        Scenario("D1, big, C3 at 4x", wide={"D1": 4.0, "big": 4.0, "C3": 4.0}),
        Scenario("D1 at 8x", wide={"D1": 8.0}),
        Scenario("log-normal spreads, SD of log sigma 0.3", log_sd=0.3),
        Scenario("log-normal spreads, SD of log sigma 0.6", log_sd=0.6),
        Scenario("every difference on the margin", truth=on_the_margin(design)),
    ]


def draw(rng: np.random.Generator, scenario: Scenario, max_seeds: int) -> dict[str, dict[str, dict[int, float]]]:
    """One study's runs: values[column][row][seed] for seeds 1..max_seeds, dev BLEU and dev log PPL."""
    spreads = scenario.spreads(rng)
    level = {"bleu": paper_base_bleu(), "ppl": math.log(paper_base_ppl())}
    values: dict[str, dict[str, dict[int, float]]] = {}
    for column in MEASURES:
        sd, seeds = SPREAD[column], np.arange(1, max_seeds + 1)
        shared = level[column] + rng.normal(0.0, SEED_SD[column], max_seeds)
        base = shared + rng.normal(0.0, BASE_SHARE * sd, max_seeds)
        values[column] = {BASE: dict(zip(seeds.tolist(), base.tolist()))}
        for row in ROWS:
            # The row's own noise, so that its paired differences spread with spreads[row] x sd (at least a tenth).
            own = sd * math.sqrt(max(spreads[row] ** 2 - BASE_SHARE**2, 0.01))
            runs = shared + scenario.truth.get(column, {}).get(row, 0.0) + rng.normal(0.0, own, max_seeds)
            values[column][row] = dict(zip(seeds.tolist(), runs.tolist()))
    return values


def run_design(
    values: Mapping[str, Mapping[str, Mapping[int, float]]], design: Design
) -> tuple[dict[str, dict], dict[str, dict]]:
    """The pilot's table (design.pilot_seeds for every row), the extension it plans, and the final table (the
    pilot's again when nothing was extended)."""
    pilot_seeds = list(design.pilot_seeds or ())
    seeds = {row: list(pilot_seeds) for row in (BASE, *ROWS)}

    def table(extended: bool) -> dict[str, dict]:
        chosen = {c: {row: {s: values[c][row][s] for s in seeds[row]} for row in seeds} for c in values}
        return decide(chosen, PAPER_DELTA, {}, replace(design, extended=extended))

    pilot = table(False)
    plan = plan_extension({row: pilot[row]["seeds_planned"] for row in ROWS}, seeds, design.max_seeds)
    for row, add in plan.adds.items():
        seeds[row] = seeds[row] + add
    return pilot, table(True) if plan.adds else pilot


def claims(design: Design) -> list[tuple[str, str]]:
    """Every (row, column) claim a design makes."""
    return [(row, c) for c in design.columns for row in ROWS]


def verdict_of(table: Mapping[str, Mapping], row: str, column: str) -> Verdict:
    key = MEASURES[column].key
    r = table[row]
    return Verdict(r[key("verdict")], r[key("claim_low")], r[key("claim_high")])


def false_claims(table: Mapping[str, Mapping], truth: Mapping[str, Mapping[str, float]], design: Design) -> set:
    """The claims whose verdict says what is not true of the planted differences."""
    return {
        (row, c) for row, c in claims(design) if not verdict_of(table, row, c).holds(truth.get(c, {}).get(row, 0.0))
    }


@dataclass
class Tally:
    """What many studies of one design gave: tables with any false verdict, and per claim how often it was false
    and how often decided (anything but unresolved) at the pilot and in the final table."""

    design: Design
    studies: int = 0
    any_false: int = 0
    extended: int = 0
    false: dict = field(default_factory=dict)
    decided_pilot: dict = field(default_factory=dict)
    decided_final: dict = field(default_factory=dict)

    def add(self, pilot: Mapping, final: Mapping, truth: Mapping[str, Mapping[str, float]]) -> None:
        self.studies += 1
        wrong = false_claims(final, truth, self.design)
        self.any_false += bool(wrong)
        self.extended += final is not pilot
        for claim in claims(self.design):
            self.false[claim] = self.false.get(claim, 0) + (claim in wrong)
            for seen, table in ((self.decided_pilot, pilot), (self.decided_final, final)):
                seen[claim] = seen.get(claim, 0) + (verdict_of(table, *claim).name != UNRESOLVED)

    @property
    def family_rate(self) -> float:
        return self.any_false / max(self.studies, 1)

    def rate(self, counts: Mapping, claim: tuple[str, str]) -> float:
        return counts.get(claim, 0) / max(self.studies, 1)


def simulate(scenario: Scenario, designs: Sequence[Design], studies: int, seed: int = 0) -> list[Tally]:
    """`studies` simulated studies of `scenario`, every design on the same drawn runs."""
    rng = np.random.default_rng(seed)
    tallies = [Tally(d) for d in designs]
    max_seeds = max(d.max_seeds for d in designs)
    for _ in range(studies):
        values = draw(rng, scenario, max_seeds)
        for tally in tallies:
            tally.add(*run_design(values, tally.design), scenario.truth)
    return tallies


def bound(alpha: float, studies: int) -> float:
    """A rate `alpha` plus three simulation standard errors over `studies` studies: what a correct procedure's
    simulated rate stays under."""
    return alpha + 3 * math.sqrt(alpha * (1 - alpha) / studies)


def above_share(count: int, studies: int, share: float, claims: int, level: float = 0.01) -> bool:
    """Whether `count` false verdicts of one claim in `studies` studies are detectably more than its `share`: the
    exact binomial tail below `level` over the `claims` claims checked (Bonferroni). A bound of the share plus
    three standard errors on each of 38 claims is crossed by chance in about one study set of six when every claim
    sits exactly at its share, as a difference claim with no true difference does."""
    return bool(stats.binom.sf(count - 1, studies, share) < level / claims)


# The default design (both columns, the median spread, 4 pilot seeds), at the paper's setting's scales.
NOW = Design(pilot_seeds=(1, 2, 3, 4), bleu_scale=1.0, ppl_scale=1.0)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="aiayn-simulate", description=__doc__.splitlines()[0])
    parser.add_argument("--studies", type=int, default=2000, help="simulated studies a scenario (default 2000)")
    parser.add_argument("--pilot", type=int, default=len(NOW.pilot_seeds or ()), help="the design's pilot seeds")
    args = parser.parse_args(argv)
    now = replace(NOW, pilot_seeds=tuple(range(1, args.pilot + 1)))
    worst_rate = 0.0
    for scenario in [*scenarios(now), Scenario("the paper's differences", truth=PAPER_DELTA)]:
        (tally,) = simulate(scenario, [now], args.studies)
        worst_rate = max(worst_rate, tally.family_rate)
        print(f"\n## {scenario.name} ({args.studies} studies)\n")
        print(
            f"family-wise false-verdict rate {tally.family_rate:.4f} ({tally.extended} extended); "
            f"bound {bound(0.05, args.studies):.4f}"
        )
        worst = max(claims(now), key=lambda c: tally.rate(tally.false, c))
        print(
            f"worst claim: {worst} {tally.rate(tally.false, worst):.4f} (its share "
            f"{0.05 / len(claims(now)):.4f}, bound {bound(0.05 / len(claims(now)), args.studies):.4f})"
        )
        print("\n| row | BLEU decided, pilot / final | PPL decided, pilot / final |")
        print("|---|---:|---:|")
        for row in ROWS:
            cells = [
                f"{tally.rate(tally.decided_pilot, (row, c)):.2f} / {tally.rate(tally.decided_final, (row, c)):.2f}"
                for c in ("bleu", "ppl")
            ]
            print(f"| {row} | " + " | ".join(cells) + " |")
    print(f"RESULT design_family_rate_worst {worst_rate:.4f}")
    print(f"RESULT design_family_rate_bound {bound(0.05, args.studies):.4f}")
    print(f"RESULT design_family_rate_worst_over_bound {worst_rate / bound(0.05, args.studies):.3f}")


if __name__ == "__main__":
    main()
