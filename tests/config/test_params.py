"""params.yaml's lists as the stages read them: seeds for train/evaluate (seeds_from), rows and seeds for aggregate,
each row's extra seeds, and the edit `aiayn-extend` makes."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml

from aiayn.config.cli import expand_seeds_from
from aiayn.config.params import Params, add_extra_seeds
from aiayn.config.schema import ConfigError
from aiayn.stages.seeds import seeds

REPO = Path(__file__).resolve().parents[2]


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


@pytest.mark.parametrize(
    "text, message",
    [
        ("rows: [base]\n", "key 'seeds' must be a non-empty list"),
        ("seeds: []\n", "non-empty list"),
        ("seeds: 3\n", "seeds = 3: must be a list"),
        ("seeds: [1, two]\n", r"seeds\[1\]: Value 'two' of type 'str' could not be converted to Integer"),
        ("seeds: [1, true]\n", r"seeds\[1\]: Value 'True' of type 'bool'"),
        ("seed: [1]\n", r"unknown key 'seed' \(did you mean 'seeds'\?\)"),
        ("rows: [base]\nseeds: [1]\ntrain: [1]\n", r"train = \[1\]: must be a mapping of keys"),
        ("rows: [base]\nseeds: [1]\ntrain:\n  max_steps: many\n", r"train.max_steps: Value 'many' of type 'str'"),
        ("- 1\n", "a params file is a mapping of keys, got list"),
        ("seeds: [1\n", "not valid YAML"),
    ],
)
def test_a_bad_seed_list_names_the_file_and_the_item(tmp_path: Path, text: str, message: str) -> None:
    params = write(tmp_path, text)
    with pytest.raises(ValueError, match=message) as err:
        expand_seeds_from([f"seeds_from={params}"])
    assert str(params) in str(err.value)


def test_a_missing_params_file_is_named(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="nowhere.yaml"):
        expand_seeds_from([f"seeds_from={tmp_path}/nowhere.yaml"])


def test_the_shipped_params_file_runs_every_row_of_the_paper_with_four_seeds(repo_root: Path) -> None:
    """Every row file that reproduces one of the paper's rows (row.paper.table3); the example ablations (X_*) are
    shipped outside the default list."""
    import yaml

    rows = Params.read(repo_root / "params.yaml").rows()
    files = {p.stem: yaml.safe_load(p.read_text()) for p in (repo_root / "conf" / "row").glob("*.yaml")}
    papers = sorted(name for name, row in files.items() if (row.get("paper") or {}).get("table3"))
    assert sorted(rows) == papers and rows[0] == "base" and len(papers) == 20
    assert all(name.startswith("X_") for name in set(files) - set(papers))
    assert Params.read(repo_root / "params.yaml").seeds() == [1, 2, 3, 4]
    assert Params.read(repo_root / "params.yaml").extra_seeds() == {}


def test_seeds_from_with_one_row_adds_that_rows_extra_seeds(tmp_path: Path) -> None:
    params = write(tmp_path, "rows: [base, A1]\nseeds: [1, 2, 3]\nextra_seeds: {A1: [4, 5, 2], base: [4, 5]}\n")
    assert expand_seeds_from(["row=A1", f"seeds_from={params}"]) == ["--multirun", "row=A1", "seed=1,2,3,4,5"]
    assert expand_seeds_from(["row=C1", f"seeds_from={params}"])[-1] == "seed=1,2,3"  # no extra seeds
    assert expand_seeds_from([f"seeds_from={params}"])[-1] == "seed=1,2,3"  # no row: the common seeds
    assert Params.read(params).seeds_per_row() == {"base": [1, 2, 3, 4, 5], "A1": [1, 2, 3, 4, 5]}


@pytest.mark.parametrize(
    "text, message",
    [
        ("extra_seeds: [1]\n", r"extra_seeds = \[1\]: must be a mapping"),
        ("extra_seeds: {A1: 3}\n", "extra_seeds.A1: Value 3 .* incompatible with type hint 'typing.List"),
        ("extra_seeds: {A1: [4, x]}\n", r"extra_seeds.A1: Value 'x' .* incompatible with type hint 'int'"),
    ],
)
def test_bad_extra_seeds_name_the_file_and_the_row(tmp_path: Path, text: str, message: str) -> None:
    params = write(tmp_path, "rows: [A1]\nseeds: [1]\n" + text)
    with pytest.raises(ValueError, match=message):
        Params.read(params).seeds_per_row()


def test_seed_lists_one_file_a_row_that_seeds_from_reads(tmp_path: Path) -> None:
    params = write(tmp_path, "rows: [base, A1]\nseeds: [1, 2]\nextra_seeds: {A1: [3], gone: [9]}\n")
    assert seeds(params, tmp_path / "seeds") == {"base": [1, 2], "A1": [1, 2, 3]}
    assert sorted(p.name for p in (tmp_path / "seeds").iterdir()) == ["A1.yaml", "base.yaml"]
    assert expand_seeds_from(["row=A1", f"seeds_from={tmp_path}/seeds/A1.yaml"])[-1] == "seed=1,2,3"


def test_adding_extra_seeds_to_the_shipped_params_keeps_every_comment(repo_root: Path, tmp_path: Path) -> None:
    params = shutil.copy(repo_root / "params.yaml", tmp_path / "params.yaml")
    before = Path(params).read_text()
    assert add_extra_seeds(params, {"base": [5, 6], "A1": [5, 6]}) == {"base": [5, 6], "A1": [5, 6]}
    assert add_extra_seeds(params, {"A1": [6, 7], "base": [7]}) == {"base": [5, 6, 7], "A1": [5, 6, 7]}
    after = Path(params).read_text()
    kept = [line for line in before.splitlines() if not line.startswith("extra_seeds:")]
    added = [line for line in after.splitlines() if line.startswith(("extra_seeds:", "  base:", "  A1:"))]
    assert [line for line in after.splitlines() if line not in added] == kept  # every other line unchanged
    assert "extra_seeds:" in after and "# row -> seeds besides" in after
    assert "  base: [5, 6, 7]\n  A1: [5, 6, 7]\n" in after  # one line a row
    old, new = yaml.safe_load(before), yaml.safe_load(after)
    assert new == {**old, "extra_seeds": {"base": [5, 6, 7], "A1": [5, 6, 7]}}
    per_row = Params.read(params).seeds_per_row()
    assert per_row["A1"] == [1, 2, 3, 4, 5, 6, 7] and per_row["C1"] == [1, 2, 3, 4]
    assert not list(tmp_path.glob(".params.yaml.*"))  # the atomic write left no temporary file


def test_the_shipped_params_file_lists_every_overridable_key_of_the_schemas_as_null(repo_root: Path) -> None:
    """`dvc exp run -S train.lr_factor=2` needs the key in params.yaml (DVC refuses new keys without +): every
    field of the model, train and decode schemas is there, null (no override), and nothing else."""
    import dataclasses

    from aiayn.config.params import _hydra_value
    from aiayn.config.schema import DESIGN_KEYS, ROW_GROUPS, DesignConfig

    params = yaml.safe_load((repo_root / "params.yaml").read_text())
    for group, schema in ROW_GROUPS.items():
        assert list(params[group]) == [f.name for f in dataclasses.fields(schema)], group
        assert all(v is None for v in params[group].values())
    # Table 3's design is declared in the file, at the schema's defaults (so the stages run as without it).
    defaults = DesignConfig()
    assert list(params["design"]) == list(DESIGN_KEYS)
    assert params["design"] == {key: getattr(defaults, key) for key in DESIGN_KEYS}
    assert Params.read(repo_root / "params.yaml").overrides() == [
        f"design.{k}={_hydra_value(v)}" for k, v in params["design"].items() if v is not None
    ]
    assert "design.columns=['bleu','ppl']" in Params.read(repo_root / "params.yaml").overrides()


def test_the_override_blocks_are_generated_from_the_schema(repo_root: Path, tmp_path: Path) -> None:
    """`python -m aiayn.config.params --sync` writes the blocks from the schema: the shipped file is in sync, and a
    file with a key missing, a stale key and a set value gets the key back, loses the stale one, keeps the value."""
    from aiayn.config.params import sync_overrides

    shipped = tmp_path / "params.yaml"
    shutil.copy(repo_root / "params.yaml", shipped)
    assert sync_overrides(shipped) == [] and shipped.read_text() == (repo_root / "params.yaml").read_text()
    text = (
        shipped.read_text()
        .replace("  lr_factor: null\n", "")
        .replace("  compile: null\n", "  compile: true\n  gone: 3\n")
    )
    shipped.write_text(text)
    assert sync_overrides(shipped) == ["-train.gone", "+train.lr_factor"]
    expected = (repo_root / "params.yaml").read_text().replace("  compile: null\n", "  compile: true\n")
    assert shipped.read_text() == expected


def test_overrides_from_params_become_hydra_overrides_and_bad_keys_are_named(tmp_path: Path) -> None:
    from aiayn.config.cli import expand_overrides_from

    path = tmp_path / "params.yaml"
    path.write_text(
        "model:\n  norm_position: pre\n  dropout: null\ntrain:\n  lr_factor: 2\n  compile: true\ndecode: {}\n"
    )
    assert expand_overrides_from(["row=A1", f"overrides_from={path}", "train.lr_factor=3"]) == [
        "row=A1",
        "model.norm_position='pre'",
        "train.lr_factor=2.0",
        "train.compile=true",
        "train.lr_factor=3",
    ]
    path.write_text("train:\n  lr_factr: 2\n")
    with pytest.raises(
        ValueError, match=r"params\.yaml: unknown key 'train\.lr_factr' \(did you mean 'train\.lr_factor'"
    ):
        expand_overrides_from([f"overrides_from={path}"])


def test_a_refused_params_file_is_put_back_as_last_accepted(tmp_path: Path):
    """In a DVC project (a .dvc folder beside it), a params file a read refuses goes back to its last accepted bytes,
    comments included, and the refused file is kept beside it; outside one nothing is touched."""
    (tmp_path / ".dvc").mkdir()
    params = tmp_path / "params.yaml"
    accepted = (REPO / "params.yaml").read_text()
    params.write_text(accepted)
    Params.read(params)
    refused = accepted.replace("lr_factor: null", "lr_factor: null\n  lr_factr: 2", 1)
    params.write_text(refused)
    with pytest.raises(ConfigError, match=r"did you mean 'train.lr_factor'.*is back as it was accepted"):
        Params.read(params)
    assert params.read_text() == accepted and (tmp_path / "params.yaml.refused").read_text() == refused
    elsewhere = tmp_path / "plain"
    elsewhere.mkdir()
    (elsewhere / "params.yaml").write_text(refused)
    with pytest.raises(ConfigError, match="did you mean") as err:
        Params.read(elsewhere / "params.yaml")
    assert "is back" not in str(err.value) and (elsewhere / "params.yaml").read_text() == refused
