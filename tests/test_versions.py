"""The installed packages satisfy pyproject.toml's floors and bounds, and the features each floor exists for are
there (a floor that no longer matches what the code uses fails here, not in a user's run)."""

from __future__ import annotations

import importlib.metadata
from pathlib import Path

import pytest
import tomllib
from packaging.requirements import Requirement

REPO = Path(__file__).resolve().parents[1]


def requirements() -> dict[str, Requirement]:
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    return {(r := Requirement(spec)).name: r for spec in project["dependencies"]}


def feature_torch() -> bool:
    import torch

    return hasattr(torch.nn.utils, "get_total_norm")


def feature_lightning() -> bool:
    import inspect

    import lightning as L
    from lightning.pytorch.callbacks import Checkpoint  # noqa: F401
    from lightning.pytorch.strategies import Strategy
    from lightning.pytorch.utilities.types import OptimizerLRScheduler  # noqa: F401

    return "weights_only" in inspect.signature(L.Trainer.save_checkpoint).parameters and hasattr(
        Strategy, "remove_checkpoint"
    )


def feature_wandb() -> bool:
    import inspect

    import wandb

    return "finish_previous" in inspect.getsource(wandb.sdk.wandb_setup) + inspect.getsource(wandb.sdk.wandb_init)


def feature_sacrebleu() -> bool:
    from sacrebleu.metrics import BLEU

    return hasattr(BLEU, "_extract_corpus_statistics") and hasattr(BLEU, "_compute_score_from_stats")


def feature_protobuf() -> bool:
    from sentencepiece import sentencepiece_model_pb2

    return hasattr(sentencepiece_model_pb2, "ModelProto")


def feature_hydra() -> bool:
    import inspect

    from hydra import initialize_config_dir
    from hydra.core.hydra_config import HydraConfig

    return "version_base" in inspect.signature(initialize_config_dir).parameters and callable(HydraConfig.initialized)


FEATURES = {
    "torch": feature_torch,
    "lightning": feature_lightning,
    "wandb": feature_wandb,
    "sacrebleu": feature_sacrebleu,
    "protobuf": feature_protobuf,
    "sentencepiece": feature_protobuf,
    "hydra-core": feature_hydra,
}


@pytest.mark.parametrize("name", sorted(requirements()))
def test_installed_version_satisfies_pyproject(name: str) -> None:
    requirement = requirements()[name]
    installed = importlib.metadata.version(name).split("+")[0]  # 2.13.0+cpu
    assert requirement.specifier.contains(installed, prereleases=True), (name, installed, str(requirement))


@pytest.mark.parametrize("name", sorted(FEATURES))
def test_what_each_floor_is_for_is_installed(name: str) -> None:
    assert name in requirements(), f"{name} has a feature check but no requirement"
    assert FEATURES[name](), f"{name} {importlib.metadata.version(name)}: the feature its floor is for is missing"
