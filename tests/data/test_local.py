"""Local parallel folders: Multi30k from ../shared (held-out test carved off train), and tiny folders built here."""

from __future__ import annotations

import json

import pytest

from aiayn.data.clean import CleanOptions, CorpusError
from aiayn.data.sources.local import prepare_local

SPLITS = [f"{split}.{side}" for split in ("train", "valid", "test") for side in ("src", "tgt")]


def _lines(path):
    return path.read_text(encoding="utf-8").split("\n")[:-1]


def test_multi30k_with_a_carved_test_split(shared_dir, tmp_path):
    folder = shared_dir / "data" / "multi30k"
    stats = prepare_local(folder, tmp_path / "a", "en", "de", "train", "val", None, CleanOptions(), holdout_size=1000)
    out = tmp_path / "a"
    assert sorted(p.name for p in out.iterdir()) == sorted(SPLITS + ["stats.json"])
    assert json.loads((out / "stats.json").read_text()) == stats
    assert stats["valid"]["kept"] == len(_lines(out / "valid.src")) == 1014  # every validation line kept
    test_src, train_src = _lines(out / "test.src"), _lines(out / "train.src")
    assert len(test_src) == len(_lines(out / "test.tgt")) == 1000 == len(set(test_src))
    assert not set(test_src) & set(train_src)  # disjoint: no test source sentence is trained on
    train = stats["train"]
    assert train["read"] + train["removed_for_test"] == 29000
    assert (
        train["kept"] + sum(train["dropped"].values())
        == train["read"]
        == len(train_src) + sum(train["dropped"].values())
    )
    again = prepare_local(
        folder, tmp_path / "b", "en", "de", "train", "val", None, CleanOptions(), max_train_pairs=500, holdout_size=1000
    )
    assert _lines(tmp_path / "b" / "test.src") == test_src  # deterministic, and independent of the cap
    assert again["train"]["kept"] == len(_lines(tmp_path / "b" / "train.src")) == 500


def _folder(tmp_path, files: dict[str, str]):
    folder = tmp_path / "corpus"
    folder.mkdir()
    for name, text in files.items():
        (folder / name).write_text(text, encoding="utf-8")
    return folder


def test_explicit_test_prefix_and_sgm_files(tmp_path):
    sgm = '<doc docid="d1">\n<seg id="1">A &amp; B</seg>\n<seg id="2">C</seg>\n</doc>\n'
    folder = _folder(
        tmp_path,
        {
            "train.en": "a b\n\nc d e\n",
            "train.fr": "x y\nz\nw\n",
            "dev.en": "hello\n",
            "dev.fr": "bonjour\n",
            "test.en.sgm": sgm,
            "test.fr.sgm": sgm.replace("A &amp; B", "A et B"),
        },
    )
    stats = prepare_local(folder, tmp_path / "out", "en", "fr", "train", "dev", "test", CleanOptions())
    out = tmp_path / "out"
    assert _lines(out / "train.src") == ["a b", "c d e"] and stats["train"]["dropped"]["empty"] == 1
    # SGM text as written, entities kept, as sacreBLEU reads it (docs/departures.md#sgm-entities).
    assert _lines(out / "test.src") == ["A &amp; B", "C"] and _lines(out / "test.tgt") == ["A et B", "C"]
    assert stats["test_set"] == "test (test.en.sgm)" and stats["train"]["removed_for_test"] == 0


def test_missing_files_and_mismatched_lengths_are_named(tmp_path):
    folder = _folder(tmp_path, {"train.en": "a\nb\n", "train.de": "x\n", "valid.en": "v\n", "valid.de": "w\n"})
    with pytest.raises(FileNotFoundError, match=r"'test' file for language 'en' .*tried test.en, test.en.sgm"):
        prepare_local(folder, tmp_path / "o", "en", "de", test_prefix="test")
    with pytest.raises(CorpusError, match=r"train.de has 1 lines but .*train.en has 2"):
        prepare_local(folder, tmp_path / "o", "en", "de", holdout_size=1)
    with pytest.raises(FileNotFoundError, match="data.path"):
        prepare_local(tmp_path / "nowhere", tmp_path / "o", "en", "de")
