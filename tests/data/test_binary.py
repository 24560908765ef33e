"""Encoded splits: round trip through the memory map, conventions, and clear errors on bad input."""

from __future__ import annotations

import json
import pickle

import numpy as np
import pytest

from aiayn.data import synthetic
from aiayn.data.binary import EncodedSplit, encode_split
from aiayn.data.tokenizer import Tokenizer, train_tokenizer


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    root = tmp_path_factory.mktemp("bin")
    synthetic.write_corpus(root, {"train": 800, "valid": 40}, seed=5)
    model = train_tokenizer([root / "train.src", root / "train.tgt"], root / "spm", vocab_size=500)
    return root, Tokenizer(model), model


def test_round_trip_and_conventions(setup, tmp_path):
    root, tok, model = setup
    header = encode_split(tok, root / "train.src", root / "train.tgt", tmp_path / "train", batch_lines=97)
    split = EncodedSplit(tmp_path / "train")
    src_lines = (root / "train.src").read_text(encoding="utf-8").splitlines()
    tgt_lines = (root / "train.tgt").read_text(encoding="utf-8").splitlines()
    assert len(split) == header["n"] == 800 and header["dtype"] == "uint16"
    assert header["src_tokens"] == int(split.src_lens.sum()) and header["tgt_tokens"] == int(split.tgt_lens.sum())
    for i in (0, 96, 97, 799):  # chunk boundaries included
        assert split.src(i)[-1] == tok.eos_id and tok.eos_id not in split.tgt(i)
        assert tok.bos_id not in split.src(i) and tok.bos_id not in split.tgt(i)
        assert tok.decode([split.src(i)]) == [src_lines[i]] and tok.decode([split.tgt(i)]) == [tgt_lines[i]]
        assert list(split.tgt(i)) == tok.encode([tgt_lines[i]])[0]
    split.check_tokenizer(model)
    clone = pickle.loads(pickle.dumps(split))
    assert np.array_equal(clone.tgt(5), split.tgt(5)) and len(pickle.dumps(split)) < 1000  # no data copied
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "train.idx.npy",
        "train.json",
        "train.src.bin",
        "train.tgt.bin",
    ]  # no temp files left


def test_large_vocab_uses_uint32(setup, tmp_path, monkeypatch):
    root, tok, _ = setup
    monkeypatch.setattr(Tokenizer, "vocab_size", property(lambda self: 70000))
    header = encode_split(tok, root / "valid.src", root / "valid.tgt", tmp_path / "valid")
    split = EncodedSplit(tmp_path / "valid")
    assert header["dtype"] == "uint32" and split.src(0).dtype == np.uint32


def test_mismatched_line_counts_name_both_files(setup, tmp_path):
    root, tok, _ = setup
    short = tmp_path / "short.tgt"
    short.write_text("".join((root / "train.tgt").read_text(encoding="utf-8").splitlines(True)[:700]), encoding="utf-8")
    with pytest.raises(ValueError, match=r"train.src has 800 lines, .*short.tgt has 700"):
        encode_split(tok, root / "train.src", short, tmp_path / "bad", batch_lines=300)
    assert list(tmp_path.iterdir()) == [short]  # nothing half-written


def test_wrong_tokenizer_and_truncated_file_are_detected(setup, tmp_path):
    root, tok, _ = setup
    encode_split(tok, root / "valid.src", root / "valid.tgt", tmp_path / "valid")
    other = train_tokenizer([root / "valid.src", root / "valid.tgt"], tmp_path / "other", vocab_size=200)
    with pytest.raises(ValueError, match="different tokenizer"):
        EncodedSplit(tmp_path / "valid").check_tokenizer(other)
    data = (tmp_path / "valid.tgt.bin").read_bytes()
    (tmp_path / "valid.tgt.bin").write_bytes(data[:-2])
    with pytest.raises(ValueError, match=r"valid\.tgt\.bin.*truncated"):
        EncodedSplit(tmp_path / "valid")
    header = json.loads((tmp_path / "valid.json").read_text())
    assert header["tokenizer_sha256"] == tok.sha256
    with pytest.raises(FileNotFoundError, match="absent.json"):
        EncodedSplit(tmp_path / "absent")
