"""The smoke-scale workspace the stage tests read (tests/integration/pipeline/smoke.py), built once per session."""

from __future__ import annotations

from pathlib import Path

import pytest
from tests.integration.pipeline.smoke import run_pipeline


@pytest.fixture(scope="session")
def workspace(tmp_path_factory) -> Path:
    """fetch -> bpe -> train (base, seeds 1 and 2) -> evaluate -> aggregate, attention_figures in a temporary
    folder. Tests may add runs and evaluations beside these (other rows, variants), never change them."""
    return run_pipeline(tmp_path_factory.mktemp("pipeline"))
