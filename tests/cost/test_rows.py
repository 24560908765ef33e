"""`aiayn-rows`: every row listed, parameter differences from base as in the paper's Table 3."""

from __future__ import annotations

import json

import pytest

from aiayn.cost.rows import count_parameters, describe_rows, main, row_names
from aiayn.model.config import ModelConfig

# Rows whose width changes the shared embedding, so their difference from base depends on the vocabulary.
WIDTH_ROWS = {"C4", "C5", "big"}


@pytest.fixture(scope="module")
def paper_rows() -> dict[str, dict]:
    return {r["row"]: r for r in describe_rows("paper", 37000)}


def test_every_row_file_is_listed_base_first() -> None:
    names = row_names()
    assert names[0] == "base" and {"A1", "B2", "C7", "D4", "E", "big"} <= set(names)


def test_differences_from_base_match_the_paper_within_1m(paper_rows) -> None:
    for name, r in paper_rows.items():
        if r["paper_delta_params_m"] is None or name in WIDTH_ROWS - {"C4"}:
            continue
        assert abs(r["delta_params_m"] - r["paper_delta_params_m"]) <= 1.0, (name, r)


def test_the_papers_wide_rows_imply_different_vocabularies() -> None:
    """C5 (+103M) and big (+148M) cannot both hold for one vocabulary: documents why we do not match both."""

    def delta(model: dict, vocab: int) -> float:
        base = dict(n_layers=6, d_model=512, d_ff=2048, n_heads=8, d_k=64, d_v=64)
        changed, unchanged = ModelConfig(**{**base, **model}), ModelConfig(**base)
        return (count_parameters(changed, vocab) - count_parameters(unchanged, vocab)) / 1e6

    c5, big = dict(d_model=1024, d_k=128, d_v=128), dict(d_model=1024, d_ff=4096, n_heads=16)
    # Both differences are linear in the vocabulary (the shared embedding grows by V * 512): solve for V.
    slope = delta(c5, 2) - delta(c5, 1)
    assert slope == pytest.approx(delta(big, 2) - delta(big, 1))
    vocab_for = {name: 1 + (target - delta(m, 1)) / slope for name, m, target in (("C5", c5, 103), ("big", big, 148))}
    tolerance = 1.0 / slope  # 1M of parameters, in vocabulary entries
    assert vocab_for["C5"] - vocab_for["big"] > 2 * tolerance, vocab_for


def test_json_format_has_the_documented_keys(capsys) -> None:
    assert main(["--scale", "tiny", "--vocab", "2000", "--format", "json"]) == 0
    records = json.loads(capsys.readouterr().out)
    assert {"row", "params_m", "paper_params_m"} <= set(records[0])
    assert [r["row"] for r in records] == row_names()


def test_example_ablations_are_listed_with_their_changes_and_parameter_counts(paper_rows) -> None:
    examples = {name: r for name, r in paper_rows.items() if name.startswith("X_")}
    assert set(examples) >= {"X_preln", "X_untied", "X_gelu", "X_rotary", "X_warmup8k", "X_attdrop"}
    assert examples["X_preln"]["changes"] == {"model.norm_position": "pre"}
    assert examples["X_preln"]["delta_params_m"] == round(4 * 512 / 1e6, 2)  # the two final LayerNorms
    assert examples["X_untied"]["delta_params_m"] == round(2 * 37000 * 512 / 1e6, 2)  # two more V x D matrices
    assert examples["X_gelu"]["delta_params_m"] == 0 and examples["X_gelu"]["activation"] == "gelu"
    assert examples["X_warmup8k"]["warmup_steps"] == 8000 and examples["X_warmup8k"]["changes"] == {
        "train.warmup_steps": 8000
    }
    assert all(r["paper_params_m"] is None and r["tables"] == ["table3"] for r in examples.values())
    assert list(paper_rows)[-len(examples) :] == sorted(examples)  # user rows after the paper's
