"""params.yaml's lists as the stages read them: seeds for train/evaluate (seeds_from), rows and seeds for aggregate."""
from __future__ import annotations

from pathlib import Path

import pytest

from aiayn.config import read_params_list
from aiayn.config.cli import expand_seeds_from


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "params.yaml"
    path.write_text(text)
    return path


def test_seeds_from_becomes_a_multirun_over_the_files_seeds(tmp_path: Path) -> None:
    params = write(tmp_path, "seeds: [3, 1, 3, 2]\n")
    argv = ["hydra/launcher=parallel", "row=A1", f"seeds_from={params}"]
    assert expand_seeds_from(argv) == ["--multirun", "hydra/launcher=parallel", "row=A1", "seed=3,1,2"]
    assert expand_seeds_from(["-m", f"seeds_from={params}"]) == ["-m", "seed=3,1,2"]  # duplicates once, in order


def test_without_seeds_from_the_command_line_is_untouched() -> None:
    assert expand_seeds_from(["row=A1", "seed=2"]) == ["row=A1", "seed=2"]


def test_seed_and_seeds_from_together_are_refused(tmp_path: Path) -> None:
    params = write(tmp_path, "seeds: [1]\n")
    with pytest.raises(SystemExit, match="either seed"):
        expand_seeds_from(["seed=2", f"seeds_from={params}"])


@pytest.mark.parametrize("text, message", [
    ("rows: [base]\n", "key 'seeds' must be a non-empty list, got None"),
    ("seeds: []\n", "non-empty list"),
    ("seeds: 3\n", "non-empty list, got 3"),
    ("seeds: [1, two]\n", r"seeds\[1\] = 'two' is not a int"),
    ("seeds: [1, true]\n", r"seeds\[1\] = True is not a int"),
    ("seeds: [1\n", "not valid YAML"),
])
def test_a_bad_seed_list_names_the_file_and_the_item(tmp_path: Path, text: str, message: str) -> None:
    params = write(tmp_path, text)
    with pytest.raises(ValueError, match=message) as err:
        expand_seeds_from([f"seeds_from={params}"])
    assert str(params) in str(err.value)


def test_a_missing_params_file_is_named(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="nowhere.yaml"):
        expand_seeds_from([f"seeds_from={tmp_path}/nowhere.yaml"])


def test_the_shipped_params_file_runs_every_row_with_three_seeds(repo_root: Path) -> None:
    rows = read_params_list(repo_root / "params.yaml", "rows", str)
    shipped = sorted(p.stem for p in (repo_root / "conf" / "row").glob("*.yaml"))
    assert sorted(rows) == shipped and rows[0] == "base"
    assert read_params_list(repo_root / "params.yaml", "seeds", int) == [1, 2, 3]
