"""The model card says how the exported beam search scores against the run's (decode.length_norm)."""

from __future__ import annotations

import pytest

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
