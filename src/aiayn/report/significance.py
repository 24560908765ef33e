"""Paired bootstrap resampling (Koehn 2004) of corpus BLEU against the base row, via sacreBLEU's PairedTest."""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from sacrebleu.metrics import BLEU
from sacrebleu.significance import PairedTest

from aiayn.io import read_lines


def paired_bootstrap_ps(
    base_hyps: Sequence[str], systems: Mapping[str, Sequence[str]], refs: Sequence[str], n_samples: int = 1000
) -> dict[str, float]:
    """p-value per system that it differs from base in sacreBLEU on these sentences (sacreBLEU's paired bootstrap).

    One PairedTest for all systems, so the base's statistics are extracted once. Resampling is seeded by
    sacreBLEU (SACREBLEU_SEED, default 12345) and every system sees the same resamples: reproducible.
    """
    for name, hyps in systems.items():
        if not len(base_hyps) == len(hyps) == len(refs):
            raise ValueError(f"paired bootstrap needs equal lengths: base {len(base_hyps)}, {name} {len(hyps)}, "
                             f"refs {len(refs)}")
    if not refs:
        raise ValueError("paired bootstrap needs at least one sentence")
    # sacreBLEU counts resampled differences strictly greater than the observed one, which gives the minimum
    # p = 1/(n+1) when a system scores exactly what base scores (identical output, or both BLEU 0 on different
    # output); no difference at all is p = 1 exactly.
    p_values = {name: 1.0 for name, hyps in systems.items() if list(hyps) == list(base_hyps)}
    tested = [(name, list(hyps)) for name, hyps in systems.items() if name not in p_values]
    if tested:
        test = PairedTest([("base", list(base_hyps)), *tested], {"BLEU": BLEU(references=[list(refs)])},
                          references=None, test_type="bs", n_samples=n_samples)
        _, scores = test()
        base_score = scores["BLEU"][0].score
        p_values.update({name: 1.0 if r.score == base_score else float(r.p_value)
                         for (name, _), r in zip(tested, scores["BLEU"][1:])})
    return {name: p_values[name] for name in systems}


def paired_bootstrap_p(
    base_hyps: Sequence[str], sys_hyps: Sequence[str], refs: Sequence[str], n_samples: int = 1000
) -> float:
    """paired_bootstrap_ps for a single system."""
    return paired_bootstrap_ps(base_hyps, {"system": sys_hyps}, refs, n_samples)["system"]


@dataclass(frozen=True)
class Bootstrap:
    """A row's bootstrap p against base over `n_seeds` paired seeds; p None with a `note` saying why."""

    p_value: float | None
    n_seeds: int
    note: str = ""


def _checked_lines(path: Path, n_refs: int, ref_file: Path) -> list[str]:
    hyps = read_lines(path)
    if len(hyps) != n_refs:
        raise ValueError(f"{path}: {len(hyps)} lines but the references {ref_file} have {n_refs}")
    return hyps


def seed_paired_bootstrap(
    base_files: Mapping[int, Path], sys_files: Mapping[str, Mapping[int, Path]], ref_file: Path,
    n_samples: int = 1000,
) -> dict[str, Bootstrap]:
    """Paired bootstrap per system over the seed-concatenated corpora: base seed s is paired with row seed s.

    Each common seed contributes one copy of the reference set, so one test covers every seed. A hypothesis
    file of the wrong length leaves out that seed (base) or that system, with a note, never the whole table.
    """
    refs = read_lines(ref_file)
    base, notes = {}, {name: "" for name in sys_files}
    for seed, path in base_files.items():
        try:
            base[seed] = _checked_lines(path, len(refs), ref_file)
        except ValueError as err:
            notes = {name: f"bootstrap without base seed{seed}: {err}" for name in sys_files}
    groups: dict[tuple[int, ...], dict[str, list[str]]] = {}
    for name, files in sys_files.items():
        seeds = tuple(sorted(set(base) & set(files)))
        try:
            groups.setdefault(seeds, {})[name] = [h for s in seeds for h in _checked_lines(files[s], len(refs),
                                                                                            ref_file)]
        except ValueError as err:
            notes[name] = f"bootstrap skipped: {err}"
    results = {name: Bootstrap(None, 0, note) for name, note in notes.items()}
    for seeds, systems in groups.items():
        if seeds and systems:
            base_all = [h for s in seeds for h in base[s]]
            for name, p in paired_bootstrap_ps(base_all, systems, refs * len(seeds), n_samples).items():
                results[name] = Bootstrap(p, len(seeds), notes[name])
    return results
