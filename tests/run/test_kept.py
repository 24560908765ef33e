"""aiayn.run.kept: finished seeds' evaluation folders copied into kept/, whole or not at all, and refused where they
would overwrite another; a kept seed's recipe compared with a config's."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
import yaml

from aiayn.config.composition import compose
from aiayn.config.resolve import prepare
from aiayn.run.kept import KeepError, differences, keep, kept_root, main


def evaluation(folder: Path, seed: int = 3, variant: dict | None = None, bleu: float = 40.1) -> Path:
    """An evaluate stage's folder as the stage writes it (the files the aggregate stage reads)."""
    folder.mkdir(parents=True)
    config = {
        "seed": seed,
        "row": {"name": "base"},
        "scale": {"name": "m30k_budget"},
        "data": {"name": "multi30k", "form": "lc.norm.tok"},
        "model": {"d_model": 128},
        "train": {"max_steps": 1600},
    }
    (folder / "config.yaml").write_text(yaml.safe_dump(config))
    (folder / "eval.json").write_text(json.dumps({"variant": variant or {}, "test": {"bleu": bleu}}))
    (folder / "train.json").write_text(json.dumps({"steps": 1600}))
    (folder / "curve.csv").write_text("step,val_loss\n50,7.6\n")
    (folder / "hyps.test.txt").write_text("ein hund .\n")
    return folder


def test_a_finished_seed_is_kept_as_its_evaluation_folder_under_scale_and_data(tmp_path: Path) -> None:
    source = evaluation(tmp_path / "evals" / "base" / "seed3")
    target = keep(source, tmp_path / "kept")
    assert target == tmp_path / "kept" / "m30k_budget" / "multi30k-lc.norm.tok" / "base" / "seed3"
    assert sorted(p.name for p in target.iterdir()) == sorted(p.name for p in source.iterdir())
    assert (target / "eval.json").read_bytes() == (source / "eval.json").read_bytes()
    assert keep(source, tmp_path / "kept") == target  # the same files again: nothing to do
    assert not [p for p in target.parent.iterdir() if p.name.startswith(".")]  # no temporary folder left


def test_a_variant_is_kept_in_its_own_folder(tmp_path: Path) -> None:
    source = evaluation(tmp_path / "evals" / "base" / "lr_factor=2" / "seed1", seed=1, variant={"train.lr_factor": 2})
    assert keep(source, tmp_path / "kept").relative_to(tmp_path / "kept").as_posix() == (
        "m30k_budget/multi30k-lc.norm.tok/base/lr_factor=2/seed1"
    )


def test_another_evaluation_of_a_kept_seed_is_refused_unless_replaced(tmp_path: Path) -> None:
    keep(evaluation(tmp_path / "a" / "seed3"), tmp_path / "kept")
    other = evaluation(tmp_path / "b" / "seed3", bleu=39.0)
    with pytest.raises(KeepError, match=r"holds another evaluation of base seed 3; --replace"):
        keep(other, tmp_path / "kept")
    target = keep(other, tmp_path / "kept", replace=True)
    assert json.loads((target / "eval.json").read_text())["test"]["bleu"] == 39.0


@pytest.mark.parametrize("missing", ["eval.json", "config.yaml", "train.json"])
def test_a_folder_that_is_not_a_finished_evaluation_is_refused_naming_what_it_lacks(tmp_path: Path, missing) -> None:
    source = evaluation(tmp_path / "evals" / "base" / "seed3")
    (source / missing).unlink()
    with pytest.raises(KeepError, match=rf"seed3: no {missing}; give an evaluate stage's folder"):
        keep(source, tmp_path / "kept")
    assert not (tmp_path / "kept").exists()


def test_a_folder_named_for_another_seed_is_refused(tmp_path: Path) -> None:
    source = evaluation(tmp_path / "evals" / "base" / "seed4", seed=3)
    with pytest.raises(KeepError, match="says seed 3"):
        keep(source, tmp_path / "kept")


def test_the_command_says_what_it_kept_and_one_line_when_it_cannot(tmp_path: Path, capsys) -> None:
    source = evaluation(tmp_path / "evals" / "base" / "seed3")
    assert main([str(source), "--kept", str(tmp_path / "kept")]) == 0
    assert "-> " in capsys.readouterr().out
    assert main([str(tmp_path / "nowhere"), "--kept", str(tmp_path / "kept")]) == 2
    assert capsys.readouterr().err.startswith("aiayn-keep: ")


def test_a_recipe_differs_in_what_changes_numbers_not_in_how_a_run_is_watched() -> None:
    cfg = prepare(compose(["scale=m30k_budget", "data=multi30k_tok"]))
    recorded = dataclasses.asdict(cfg)
    assert differences(recorded, cfg) == []
    watched = json.loads(json.dumps(recorded))
    watched["train"]["val_every_steps"] = 7  # observed: how the run is watched
    assert differences(watched, cfg) == []
    longer = json.loads(json.dumps(recorded))
    longer["train"]["max_steps"] = 2000
    assert differences(longer, cfg) == ["train.max_steps: kept 2000, here 1800"]
    older = json.loads(json.dumps(recorded))
    del older["train"]["lr_schedule"]  # a key its version did not have: the same where here is its default
    assert differences(older, cfg) == ["train.lr_schedule: kept None, here 'linear'"]
    paper = prepare(compose([]))  # the default schedule: a kept run from before the key differs in nothing
    before = dataclasses.asdict(paper)
    del before["train"]["lr_schedule"]
    assert differences(before, paper) == []


def test_the_kept_root_names_the_data_by_its_form() -> None:
    assert kept_root("kept", "tiny", {"name": "synthetic", "form": "raw"}) == Path("kept/tiny/synthetic")
    assert kept_root("kept", "m30k_budget", {"name": "multi30k", "form": "lc.norm.tok"}) == Path(
        "kept/m30k_budget/multi30k-lc.norm.tok"
    )
