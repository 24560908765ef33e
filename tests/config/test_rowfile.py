"""Rows are typed patches over model, train and decode: every schema field can be set by a row file, relative keys
scale, and a row file that asks for something that does not exist is refused naming the file and the key."""

from __future__ import annotations

import dataclasses
import os
import shutil
import subprocess
import sys
import typing
from pathlib import Path

import pytest

from aiayn.config.composition import CONF_DIR, compose
from aiayn.config.resolve import ConfigError, prepare
from aiayn.config.schema import ROW_GROUPS
from aiayn.marks import marked

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def conf(tmp_path_factory) -> Path:
    """A copy of the conf/ tree to add row files to (each test writes its own row X)."""
    return Path(shutil.copytree(CONF_DIR, tmp_path_factory.mktemp("conf") / "conf"))


@pytest.fixture(scope="module")
def empty_row(conf: Path) -> dict:
    """The resolved config of a row with an empty patch, and the tiny scale's own values."""
    write_row(conf, "X0", "")
    return dict(
        resolved=flat(prepare(compose(["scale=tiny", "row=X0"], config_dir=conf))),
        scale=compose(["scale=tiny"], config_dir=conf),
    )


def write_row(conf: Path, name: str, body: str) -> Path:
    path = conf / "row" / f"{name}.yaml"
    path.write_text(f"name: {name}\ndescription: test row\n{body}", encoding="utf-8")
    return path


def yaml_value(value) -> str:
    return (
        "null"
        if value is None
        else str(value).lower()
        if isinstance(value, bool)
        else repr(value)
        if isinstance(value, str)
        else str(value)
    )


def patch_value(group: str, key: str, scale_value, paper_value):
    """A value for `group.key` that differs from the scale's and can run, and the resolved value it must give.

    Derived from the field's type and marks alone, so that a new field of the schemas is covered without editing
    this test: relative sizes are halved in the paper's units, choices take another allowed value, numbers are
    halved (or set from zero), booleans flipped."""
    schema = ROW_GROUPS[group]
    kind = typing.get_type_hints(schema)[key]
    if key in marked(schema, "relative"):
        return paper_value // 2, max(1, round(scale_value / 2))
    if key in marked(schema, "choices"):
        other = next(c for c in marked(schema, "choices")[key] if c != scale_value)
        return other, other
    if kind is bool:
        return not scale_value, not scale_value
    if scale_value is None or kind in (int, typing.Optional[int]):  # noqa: UP045 (the schema's own annotation)
        value = 3 if scale_value in (None, 0, 1) else scale_value // 2
        return value, value
    if kind is float:
        value = 0.1 if scale_value == 0 else scale_value / 2
        return value, value
    raise AssertionError(f"{group}.{key}: no generated value for type {kind}; extend patch_value")


FIELDS = [(group, f.name) for group, schema in ROW_GROUPS.items() for f in dataclasses.fields(schema)]
COUPLED = {
    ("train", "batch_tokens"): {("train", "max_tokens")},  # a micro-batch never exceeds its update
    ("train", "ckpt_every_minutes"): {("train", "ckpt_every_steps")},  # one cadence (the patch turns steps off)
}
# What a patch of a key needs beside it to run (TrainConfig's checks of values together)
RUNS_WITH = {
    ("train", "ckpt_every_minutes"): "  ckpt_every_steps: 0\n",
    ("train", "keep_last"): "dev_average_last: 3\n",  # the tiny scale's dev evaluation averages 5 otherwise
}


def flat(cfg) -> dict[tuple[str, str], object]:
    return {(group, k): v for group in ROW_GROUPS for k, v in dataclasses.asdict(getattr(cfg, group)).items()}


@pytest.mark.parametrize("group, key", FIELDS, ids=[f"{g}.{k}" for g, k in FIELDS])
def test_every_schema_field_set_by_a_row_file_changes_the_resolved_config(conf, empty_row, group, key):
    """And only that key: a row whose patch is one key resolves like an empty row but for that key."""
    before = empty_row["resolved"]
    paper = next(f.default for f in dataclasses.fields(ROW_GROUPS[group]) if f.name == key)
    value, expected = patch_value(group, key, empty_row["scale"][group][key], paper)
    write_row(conf, "X", f"{group}:\n  {key}: {yaml_value(value)}\n{RUNS_WITH.get((group, key), '')}")
    after = flat(prepare(compose(["scale=tiny", "row=X"], config_dir=conf)))
    assert after[group, key] == expected != before[group, key], (group, key, value)
    changed = {k for k in after if after[k] != before[k]}
    assert changed - COUPLED.get((group, key), set()) == {(group, key)}


def test_relative_keys_are_in_the_papers_units_at_every_scale(conf):
    write_row(
        conf,
        "X",
        "model:\n  d_model: 256\n  d_k: 32\ntrain:\n  max_steps: 300000\n  warmup_steps: 8000\n"
        "  batch_tokens: 12500\n  label_smoothing: 0.0\n",
    )
    for scale in ("tiny", "paper"):
        base = prepare(compose([f"scale={scale}"], config_dir=conf))
        row = prepare(compose([f"scale={scale}", "row=X"], config_dir=conf))
        assert row.model.d_model == base.model.d_model // 2 and row.model.d_k == base.model.d_k // 2
        assert row.train.max_steps == 3 * base.train.max_steps and row.train.warmup_steps == 2 * base.train.warmup_steps
        assert row.train.batch_tokens == round(base.train.batch_tokens / 2)
        assert row.train.max_tokens <= row.train.batch_tokens  # the micro-batch follows a smaller update
        assert row.train.label_smoothing == 0.0  # absolute: the same at every scale


def test_row_metadata_defaults_for_a_users_row(conf):
    write_row(conf, "X", "model:\n  activation: gelu\n")
    row = prepare(compose(["row=X"], config_dir=conf)).row
    assert list(row.tables) == ["table3"] and row.paper.table3 is None and row.paper.table2 is None
    assert row.average_last == 0


@pytest.mark.parametrize(
    "body, message",
    [
        ("model:\n  dropuot: 0.0\n", r"X\.yaml: unknown key 'model\.dropuot' \(did you mean 'model\.dropout'\?\)"),
        ("d_model: 256\n", r"X\.yaml: unknown key 'd_model' \(did you mean 'model\.d_model'\?\)"),
        ("train_steps: 300000\n", r"X\.yaml: unknown key 'train_steps'"),
        ("decode:\n  beam: 8\n", r"X\.yaml: unknown key 'decode\.beam' \(did you mean 'decode\.beam_size'\?\)"),
        ("data:\n  vocab_size: 8000\n", r"X\.yaml: a row cannot change data\.vocab_size"),
        ("model:\n  d_model: wide\n", r"X\.yaml: model\.d_model: Value 'wide'"),
        ("train:\n  grad_clip: [1]\n", r"X\.yaml: train\.grad_clip"),
        (
            "model:\n  norm_position: middle\n",
            r"X\.yaml: model\.norm_position='middle' is not one of \('post', 'pre'\)",
        ),
        ("tables: [table4]\n", r"X\.yaml: tables='table4' is not one of \('table2', 'table3'\)"),
        ("name: Y\n", r"X\.yaml: name is 'Y'"),
    ],
)
def test_a_bad_row_file_is_refused_naming_the_file_and_the_key(conf, body, message):
    path = conf / "row" / "X.yaml"
    if body.startswith("name:"):
        path.write_text(body + "description: renamed\n", encoding="utf-8")
    else:
        write_row(conf, "X", body)
    with pytest.raises(ConfigError, match=message):
        compose(["row=X"], config_dir=conf)


def test_a_row_that_does_not_fit_the_scale_names_the_file_and_the_key(conf):
    write_row(conf, "X", "model:\n  d_k: 4\n")  # 1/16 of the paper's: half a dimension at tiny
    with pytest.raises(ConfigError, match=r"row 'X' does not fit scale 'tiny' \(conf/row/X\.yaml\): model\.d_k=4"):
        prepare(compose(["scale=tiny", "row=X"], config_dir=conf))
    prepare(compose(["scale=paper", "row=X"], config_dir=conf))  # fits where the base is large enough


def test_a_pipeline_stage_refuses_a_bad_row_file_before_anything_runs(conf, tmp_path):
    write_row(conf, "Xbad", "model:\n  norm_positon: pre\n")
    runs = tmp_path / "runs"
    proc = subprocess.run(
        [sys.executable, "pipeline/train.py", "row=Xbad", f"paths.runs={runs}"],
        cwd=REPO,
        env={**os.environ, "AIAYN_CONF": str(conf)},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode != 0
    assert "Xbad.yaml: unknown key 'model.norm_positon' (did you mean 'model.norm_position'?)" in proc.stderr
    assert not runs.exists()  # refused before anything was written


def test_every_shipped_row_file_passes_the_check():
    from aiayn.config.rowfile import read_row

    for path in sorted((CONF_DIR / "row").glob("*.yaml")):
        read_row(path)


def test_row_groups_of_the_cli_are_checked_in_a_sweep(conf):
    write_row(conf, "X", "model:\n  dropuot: 0.0\n")
    from aiayn.config.composition import check_row_overrides, rows_in_overrides

    assert rows_in_overrides(["row=A1,X", "seed=1", "+row.model.dropout=0.1"]) == ["A1", "X"]
    with pytest.raises(ConfigError, match="X.yaml"):
        check_row_overrides(["-m", "row=A1,X"], conf)
