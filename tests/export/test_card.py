"""The model card says how the exported beam search scores against the run's (decode.length_norm)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from aiayn.export import card
from aiayn.export.card import model_card
from aiayn.model.config import ModelConfig


@pytest.mark.parametrize("target", ["hf", "ct2"])
def test_the_card_says_whether_the_length_normalisation_matches(target: str) -> None:
    def card(norm: str) -> str:
        decode = {"beam_size": 5, "length_penalty": 1.0, "length_norm": norm}
        return model_card(ModelConfig(), target=target, probe_gap=1e-6, decode=decode)

    paper, power = card("gnmt"), card("power")
    assert "GNMT" in paper and "as this run does" not in paper
    assert "as this run does (decode.length_norm=power)" in power and "GNMT" not in power.split("## Use")[0]
    assert ("beam 5 and alpha 1.0" if target == "hf" else "beam 5, alpha 1.0") in power


def test_the_card_flags_an_evaluation_decoded_otherwise() -> None:
    """eval.json decoded with overrides (beam 5, power) while the run's config (the generation defaults) says
    beam 4, GNMT: the card says so; when they agree it says nothing."""
    decode = {"beam_size": 4, "length_penalty": 0.6, "length_norm": "gnmt"}
    evaluation = {"strategy": "beam", "beam_size": 5, "length_penalty": 0.6, "length_norm": "power", "test": {}}
    card = model_card(ModelConfig(), target="hf", probe_gap=1e-6, decode=decode, evaluation=evaluation)
    assert "decoded with other settings than the run's (beam 5 against 4, length norm power against gnmt)" in card
    same = model_card(ModelConfig(), target="hf", probe_gap=1e-6, decode=decode, evaluation={**evaluation, **decode})
    assert "other settings than the run's" not in same


def test_the_departures_the_card_cites_are_the_documents_sections():
    doc = Path(__file__).resolve().parents[2] / "docs" / "departures.md"
    assert tuple(re.findall(r"^### (\S+)", doc.read_text(encoding="utf-8"), flags=re.MULTILINE)) == card.DEPARTURES
