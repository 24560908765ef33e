"""Joint sentencepiece tokenizer: fixed special ids, determinism, round trip, pickling, clear errors."""

from __future__ import annotations

import pickle

import pytest

from aiayn.data import synthetic
from aiayn.data.tokenizer import Tokenizer, file_sha256, train_tokenizer


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    root = tmp_path_factory.mktemp("corpus")
    synthetic.write_corpus(root, {"train": 1500, "valid": 50}, seed=0)
    return root


def _train(corpus, prefix, **kw):
    return train_tokenizer([corpus / "train.src", corpus / "train.tgt"], prefix, vocab_size=kw.pop("vocab", 600), **kw)


def test_special_ids_and_joint_vocab(corpus, tmp_path):
    tok = Tokenizer(_train(corpus, tmp_path / "spm"))
    assert (tok.pad_id, tok.unk_id, tok.bos_id, tok.eos_id) == (0, 1, 2, 3)
    assert [tok.piece(i) for i in range(4)] == ["<pad>", "<unk>", "<s>", "</s>"]
    assert tok.vocab_size == 600
    # Joint: characters only found on the German-like side (umlauts) and English-only letters are both covered.
    pieces = "".join(tok.piece(i) for i in range(tok.vocab_size))
    assert "ü" in pieces and "y" in pieces
    assert sorted((tmp_path).iterdir()) == [tmp_path / "spm.model", tmp_path / "spm.vocab"]  # no temp leftovers


def test_training_is_deterministic_and_seeded_sampling(corpus, tmp_path):
    a = file_sha256(_train(corpus, tmp_path / "a"))
    b = file_sha256(_train(corpus, tmp_path / "b"))
    assert a == b
    s1 = file_sha256(_train(corpus, tmp_path / "s1", sample_size=400, seed=1))
    s1_again = file_sha256(_train(corpus, tmp_path / "s1b", sample_size=400, seed=1))
    s2 = file_sha256(_train(corpus, tmp_path / "s2", sample_size=400, seed=2))
    assert s1 == s1_again and s1 != s2 and s1 != a


def test_round_trip_decode_strips_specials_and_pickles(corpus, tmp_path):
    tok = Tokenizer(_train(corpus, tmp_path / "spm"))
    lines = (corpus / "valid.tgt").read_text(encoding="utf-8").splitlines()[:20]
    ids = tok.encode(lines)
    assert all(tok.bos_id not in s and tok.eos_id not in s for s in ids)
    assert tok.decode(ids) == lines
    wrapped = [[tok.bos_id] + s + [tok.eos_id, 17, tok.pad_id] for s in ids]  # junk after EOS is ignored
    assert tok.decode(wrapped) == lines
    clone = pickle.loads(pickle.dumps(tok))
    assert clone.encode(lines) == ids and clone.sha256 == tok.sha256 == file_sha256(tmp_path / "spm.model")


def test_clear_errors(corpus, tmp_path):
    with pytest.raises(ValueError, match="vocab_size=90000 is too large"):
        _train(corpus, tmp_path / "big", vocab=90000)
    with pytest.raises(FileNotFoundError, match="missing.txt"):
        train_tokenizer([tmp_path / "missing.txt"], tmp_path / "x", vocab_size=100)
    with pytest.raises(FileNotFoundError, match="nope.model"):
        Tokenizer(tmp_path / "nope.model")
