"""Paired bootstrap (sacreBLEU) of a system against base on the same sentences."""
from __future__ import annotations

import pytest

from aiayn.io import read_lines
from aiayn.report.significance import Bootstrap, paired_bootstrap_p, paired_bootstrap_ps, seed_paired_bootstrap



@pytest.fixture
def refs(reference_lines):
    return reference_lines(60)


def test_identical_systems_are_not_significant(refs, degrade):
    hyps = degrade(refs, 3)
    assert paired_bootstrap_p(hyps, list(hyps), refs, n_samples=200) == 1.0


def test_different_output_with_the_same_zero_bleu_is_not_significant(refs):
    """sacreBLEU alone would say p = 1/(n+1) here: no resample is strictly worse than a difference of 0."""
    base = ["xq " * 3] * len(refs)
    other = ["zv " * 4] * len(refs)
    assert paired_bootstrap_p(base, other, refs, n_samples=100) == 1.0


def test_nearly_identical_systems_are_not_significant(refs, degrade):
    base = degrade(refs, 3)
    near = list(base)
    near[0] = refs[0]  # one sentence of sixty repaired
    assert paired_bootstrap_p(base, near, refs, n_samples=300) > 0.05


def test_clearly_different_systems_are_significant(refs, degrade):
    p = paired_bootstrap_p(degrade(refs, 2), refs, refs, n_samples=300)
    assert p < 0.01


def test_seeded_and_reproducible(refs, degrade):
    base, sys = degrade(refs, 3), degrade(refs, 4)
    assert paired_bootstrap_p(base, sys, refs, 200) == paired_bootstrap_p(base, sys, refs, 200)


def test_unequal_lengths_are_refused(refs, degrade):
    with pytest.raises(ValueError, match="equal lengths"):
        paired_bootstrap_p(refs[:3], refs[:2], refs[:3])


def test_many_systems_in_one_test_match_one_at_a_time(refs, degrade):
    base = degrade(refs, 3)
    systems = {"same": list(base), "worse": degrade(refs, 2), "better": refs}
    together = paired_bootstrap_ps(base, systems, refs, n_samples=200)
    assert together == {name: paired_bootstrap_p(base, hyps, refs, 200) for name, hyps in systems.items()}
    assert together["same"] == 1.0 and together["better"] < 0.01


def test_seed_concatenation_pairs_equal_seeds_and_checks_files(tmp_path, refs, degrade):
    ref = tmp_path / "valid.tgt"
    ref.write_text("\n".join(refs) + "\n")
    files = {}
    for name, hyps in (("base", degrade(refs, 2)), ("row", refs), ("short", refs[:-1])):
        files[name] = tmp_path / f"{name}.txt"
        files[name].write_text("\n".join(hyps) + "\n")
    base = {1: files["base"], 2: files["base"], 3: files["base"]}
    out = seed_paired_bootstrap(base, {"two_seeds": {2: files["row"], 3: files["row"]}, "other_seed": {4: files["row"]},
                                       "bad": {1: files["short"]}}, ref, n_samples=200)
    assert out["two_seeds"].n_seeds == 2 and out["two_seeds"].p_value < 0.01
    assert out["other_seed"] == Bootstrap(None, 0)
    assert out["bad"].p_value is None and "short.txt: 59 lines" in out["bad"].note
    bad_base = seed_paired_bootstrap({**base, 1: files["short"]}, {"row": {1: files["row"], 2: files["row"]}}, ref,
                                     n_samples=200)
    assert bad_base["row"].n_seeds == 1 and "without base seed1" in bad_base["row"].note


def test_read_lines_splits_on_newline_only(tmp_path):
    path = tmp_path / "h.txt"
    path.write_text("a\u2028b\nc\n", encoding="utf-8")
    assert read_lines(path) == ["a\u2028b", "c"]
