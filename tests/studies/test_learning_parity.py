"""studies/learning_parity.py's arithmetic and report, on runs made up with a known answer (its training is measured
by running the bench, not here): the per-token comparison, the choice of the fair reference, the RESULT lines."""

from __future__ import annotations

import importlib.util
import math

import pytest

from aiayn.run.checkout import REPO


@pytest.fixture(scope="module")
def parity():
    spec = importlib.util.spec_from_file_location("learning_parity", REPO / "studies" / "learning_parity.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_ppl_at_tokens_is_exact_on_a_power_law_and_at_the_curve_points(parity):
    curve = [[k, 1000.0 * k, 5000.0 * k**-0.8] for k in (300, 450, 600)]  # PPL = c * tokens^-0.8
    assert parity.ppl_at_tokens(curve, 450_000) == pytest.approx(5000.0 * 450**-0.8)
    assert parity.ppl_at_tokens(curve, 520_000) == pytest.approx(5000.0 * 520**-0.8)
    assert parity.ppl_at_tokens(curve, 600_000) == pytest.approx(5000.0 * 600**-0.8)


def run(per_step: float, final_ppl: float, seed: int) -> dict:
    """A run whose dev PPL falls as tokens^-1 (so the PPL after T tokens is known exactly) and ends at final_ppl."""
    tokens = [per_step * k for k in (300, 450, 600)]
    jitter = 1 + 0.002 * (seed - 3)
    curve = [[k, t, final_ppl * jitter * tokens[-1] / t] for k, t in zip((300, 450, 600), tokens, strict=True)]
    return dict(
        steps=600,
        tgt_tokens_per_step=per_step,
        tgt_tokens_per_s=2000.0,
        train_s=1.0,
        curve=curve,
        dev_ppl=curve[-1][2],
        dev_bleu=20.0 + 0.1 * seed,
        test_bleu=20.0,
        dev_len_ratio=1.0,
    )


def test_a_gap_that_is_only_fewer_tokens_per_update_vanishes_per_token(parity, capsys):
    """The pipeline sees 5% fewer real target tokens an update and learns exactly as fast per token: per update it
    is 5% worse (outside the 3% margin), per token level; the fair reference is the best one with the paper's
    dropout, never nn.Transformer's own."""
    seeds = range(1, 6)
    results = {
        parity.ALIASES["pipeline"]: {s: run(1900.0, 20.0 * 2000 / 1900, s) for s in seeds},  # the shipped default
        "reference-source": {s: run(2000.0, 20.0, s) for s in seeds},
        "reference-fairseq": {s: run(1800.0, 25.0, s) for s in seeds},
        "reference": {s: run(2000.0, 15.0, s) for s in seeds},  # better, but not the paper's dropout
    }
    assert parity.fair_references(results) == ["reference-source", "reference-fairseq"]
    parity.summarise(results, "best")
    out = capsys.readouterr().out
    lines = dict(line.split()[1:] for line in out.splitlines() if line.startswith("RESULT"))
    assert "against reference-source" in out
    assert float(lines["parity_ppl_ratio"]) == pytest.approx(2000 / 1900, abs=0.002)
    assert float(lines["parity_ppl_ratio_upper"]) > 1.03 and lines["parity_within_margin"] == "0"
    assert math.isclose(float(lines["parity_ppl_ratio_per_token_upper"]), 1.0, abs_tol=0.01)
    assert out.splitlines()[-1].startswith("RESULT parity_bleu_ratio")


def test_the_pipeline_alias_is_the_shipped_defaults_order_and_budget(parity):
    from aiayn.config.schema import TrainConfig

    train = TrainConfig()
    shipped = parity.ALIASES["pipeline"]
    assert shipped in parity.PIPELINE_SYSTEMS
    assert f"train.batch_order={train.batch_order}" in parity.PIPELINE_SYSTEMS[shipped]
    assert f"train.batch_budget={train.batch_budget}" in parity.PIPELINE_SYSTEMS[shipped]
    for system in ("pipeline-longer", "pipeline-source"):  # each system names both, whatever the default
        assert any(o.startswith("train.batch_budget=") for o in parity.PIPELINE_SYSTEMS[system])
