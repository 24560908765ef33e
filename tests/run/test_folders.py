"""aiayn.run.folders: one place decides which run a folder holds. Folder names from the variant (a checkpoint cadence
only where the row averages), the code a training run executes found from its imports (comments and docstrings
aside), the encoded data's digest, the wandb id; and a file name changed there moves every writer and reader."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from aiayn.run import folders
from aiayn.run.folders import RunSpec
from aiayn.train.fingerprint import TRAIN_ENTRY, code_digest, imported_modules, wandb_id

SRC = Path(__file__).resolve().parents[2] / "src"


def test_folders_name_the_variant_alone():
    """A folder's name follows from the row and the variant, with no second file read: a checkpoint cadence names
    every row's train folder, the decode settings and row.average_last only the eval folder."""
    variant = {"train.lr_factor": 2.0, "train.snapshot_every_steps": 3, "decode.beam_size": 8}
    base = RunSpec.for_row("base", 1, variant)
    c1 = RunSpec.for_row("C1", 1, {"train.lr_factor": 2.0, "decode.beam_size": 8})
    assert base.run_dir == Path("runs/base/lr_factor=2,snapshot_every_steps=3/seed1")
    assert base.eval_dir == Path("runs/base/lr_factor=2,snapshot_every_steps=3,beam_size=8/seed1")  # evals: runs
    assert c1.run_dir == Path("runs/C1/lr_factor=2/seed1")
    assert RunSpec.for_row("C1", 2, {}, runs="r", evals="e").eval_dir == Path("e/C1/seed2")
    no_average = RunSpec.for_row("base", 1, {"row.average_last": 0})
    assert no_average.run_dir == Path("runs/base/seed1") and no_average.eval_dir == Path(
        "runs/base/average_last=0/seed1"
    )
    # A decoding sweep's folder: the eval folder without the swept keys, so another averaging sweeps apart.
    assert base.tuning_dir == Path("decode_tuning/base/lr_factor=2,snapshot_every_steps=3/seed1")
    avg10 = RunSpec.for_row(
        "base",
        1,
        {
            "row.average_last": 10,
            "row.dev_average_last": 3,
            "decode.beam_size": 5,
            "decode.length_penalty": 1.0,
            "decode.bootstrap": 100,
            "decode.max_len_b": 9,
        },
    )
    assert avg10.tuning_dir == Path("decode_tuning/base/average_last=10,max_len_b=9/seed1")
    assert base.name("train") == "base-lr_factor=2,snapshot_every_steps=3-s1" and c1.name("eval") == (
        "C1-lr_factor=2,beam_size=8-s1"
    )
    assert (
        base.shown(base.eval_dir / folders.EVAL) == "runs/base/lr_factor=2,snapshot_every_steps=3,beam_size=8/"
        "seed1/eval.json"
    )


def test_the_training_code_is_what_the_train_stage_imports():
    """The modules the old hand-kept list missed (the encoded-data reader and the tokenizer) are found, and so is a
    module imported inside a function (the chunked loss); those that change no number are left out."""
    modules = imported_modules(TRAIN_ENTRY)
    assert {
        "aiayn.data.binary",
        "aiayn.data.tokenizer",
        "aiayn.data.datamodule",
        "aiayn.model.transformer",
        "aiayn.train.module",
        "aiayn.train.label_smoothing",
        "aiayn.train.chunked_loss",
    } <= set(modules)
    assert not {
        "aiayn.run.tracking",
        "aiayn.progress",
        "aiayn.train.mfu",
        "aiayn.config.schema",
        "aiayn.run.folders",
    } & set(modules)


@pytest.fixture
def package(tmp_path: Path) -> Path:
    """A copy of the aiayn sources to edit."""
    shutil.copytree(SRC / "aiayn", tmp_path / "aiayn", ignore=shutil.ignore_patterns("__pycache__"))
    return tmp_path


def edit(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert old in text
    path.write_text(text.replace(old, new, 1))


def test_the_code_digest_follows_what_code_does_not_how_it_is_written(package: Path):
    before = code_digest(TRAIN_ENTRY, package)
    assert before == code_digest(TRAIN_ENTRY, SRC)
    binary = package / "aiayn" / "data" / "binary.py"
    edit(binary, '"""Encoded splits on disk', '"""Encoded splits, on disk')  # a docstring
    edit(binary, "def _offsets(", "# a comment\n\n\ndef _offsets(")  # a comment and blank lines
    edit(package / "aiayn" / "run/tracking.py", "log = logging", "LOGGED = 1\nlog = logging")  # changes no number
    assert code_digest(TRAIN_ENTRY, package) == before
    edit(binary, "out = np.zeros_like(lens)", "out = np.zeros_like(lens)\n    out = out + 0")
    assert code_digest(TRAIN_ENTRY, package) != before


def test_the_encoded_data_has_a_digest_of_its_own(tmp_path: Path):
    from aiayn.data.binary import encode_split, split_sha256
    from aiayn.data.tokenizer import train_tokenizer

    lines = [f"the {w} sat on a mat number {i}" for i, w in enumerate(["cat", "dog", "bird", "fish"] * 30)]
    for side in ("src", "tgt"):
        (tmp_path / f"train.{side}").write_text("\n".join(lines) + "\n")
    model = train_tokenizer([tmp_path / "train.src", tmp_path / "train.tgt"], tmp_path / "spm", vocab_size=60)
    from aiayn.data.tokenizer import Tokenizer

    header = encode_split(
        Tokenizer(model), tmp_path / "train.src", tmp_path / "train.tgt", tmp_path / "train", tokenizer_path=model
    )
    assert split_sha256(tmp_path / "train") == header["sha256"]
    stored = json.loads((tmp_path / "train.json").read_text())
    del stored["sha256"]  # a header from before the digest: hashed when read, to the same value
    (tmp_path / "train.json").write_text(json.dumps(stored))
    assert split_sha256(tmp_path / "train") == header["sha256"]
    data = bytearray((tmp_path / "train.src.bin").read_bytes())
    data[0] ^= 1  # one token changed
    (tmp_path / "train.src.bin").write_bytes(bytes(data))
    assert split_sha256(tmp_path / "train") != header["sha256"]


def test_the_wandb_id_is_the_fingerprints():
    ident = {"row": "base", "seed": 1, "model": {"d_model": 64}}
    assert wandb_id(ident) == wandb_id(dict(reversed(list(ident.items())))) and len(wandb_id(ident)) == 24
    assert wandb_id({**ident, "seed": 2}) != wandb_id(ident)


def test_folders_are_read_back_by_runspec(tmp_path: Path):
    """What a reader asks of the evals/ tree: each row's evaluated variants and seeds, the row's own first; a
    folder that is not a seed's, or a seed not yet evaluated, is not a run."""
    for variant, seed in (({}, 2), ({}, 10), ({"train.lr_factor": 2.0}, 1), ({"decode.beam_size": 8}, 3)):
        folder = RunSpec.for_row("base", seed, variant, runs=tmp_path).eval_dir
        folder.mkdir(parents=True)
        (folder / folders.EVAL).write_text("{}")
    (tmp_path / "base" / "seed4").mkdir()  # trained, not evaluated
    (tmp_path / "base" / "notes").mkdir()
    (tmp_path / "base" / "notes" / folders.EVAL).write_text("{}")
    found = folders.evaluated(tmp_path, "base")
    assert list(found) == ["", "beam_size=8/", "lr_factor=2/"]
    assert found[""] == {2: tmp_path / "base" / "seed2" / folders.EVAL, 10: tmp_path / "base" / "seed10" / folders.EVAL}
    assert list(found["lr_factor=2/"]) == [1] and folders.evaluated(tmp_path, "A1") == {}
    assert folders.seed_of(tmp_path / "base" / "seed10") == 10 and folders.seed_of("notes") is None
    assert folders.seed_of("seed1x") is None
