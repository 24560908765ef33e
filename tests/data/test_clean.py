"""Cleaning: normalisation, counted drops by reason, train-only filters, and errors that name file and line."""

from __future__ import annotations

import json

import pytest

from aiayn.data.clean import (
    CleanOptions,
    CorpusError,
    clean_parallel,
    drop_reason,
    iter_parallel,
    normalize_text,
    write_json,
)


def test_normalize_text_nfc_controls_and_whitespace():
    decomposed = "Cafe\u0301\u00a0 au\tlait\u200b \x07fini\ufeff  "
    assert normalize_text(decomposed, "NFC") == "Café au lait fini"
    assert normalize_text(decomposed, None) == "Cafe\u0301 au lait fini"


@pytest.mark.parametrize(
    "src,tgt,reason",
    [
        ("", "x", "empty"),
        ("a b", "   ", "empty"),
        ("a", "a b", "too_short"),
        (" ".join("w" * 5), "a b c d e", "too_long"),
        ("a", "a b c d", "ratio"),
        ("a b", "a b c", None),
    ],
)
def test_drop_reason(src, tgt, reason):
    options = CleanOptions(min_len=1, max_len=4, max_ratio=3.0)
    if reason == "too_short":
        options = CleanOptions(min_len=2, max_len=4, max_ratio=3.0)
    assert drop_reason(src, tgt, options) == reason


def test_options_are_validated_naming_the_key():
    with pytest.raises(ValueError, match="data.clean.normalize"):
        CleanOptions(normalize="NFX")
    with pytest.raises(ValueError, match="data.clean.max_ratio"):
        CleanOptions(max_ratio=0.5)


PAIRS = [
    ("Hello  world", "Hallo Welt"),
    ("", "leer"),
    ("one", "eins zwei drei vier fünf"),
    ("a b c", "a b c"),
    ("x " * 10, "y " * 10),
    ("fine", "gut"),
]


def test_train_counts_every_drop_by_reason(tmp_path):
    options = CleanOptions(min_len=1, max_len=8, max_ratio=3.0)
    stats = clean_parallel(iter(PAIRS), tmp_path / "t.src", tmp_path / "t.tgt", options, train=True)
    assert stats == {
        "read": 6,
        "kept": 3,
        "dropped": {"empty": 1, "too_short": 0, "too_long": 1, "ratio": 1},
        "changed": {"control_chars": 0, "format_chars": 0, "bom": 0, "unicode_form": 0},
        "stopped_at_max_pairs": False,
    }
    assert (tmp_path / "t.src").read_text(encoding="utf-8") == "Hello world\na b c\nfine\n"
    assert (tmp_path / "t.tgt").read_text(encoding="utf-8") == "Hallo Welt\na b c\ngut\n"


def test_max_pairs_keeps_the_first_n_after_cleaning(tmp_path):
    options = CleanOptions(min_len=1, max_len=8, max_ratio=3.0)
    stats = clean_parallel(iter(PAIRS), tmp_path / "t.src", tmp_path / "t.tgt", options, train=True, max_pairs=2)
    assert stats["kept"] == 2 and stats["stopped_at_max_pairs"] is True
    assert (tmp_path / "t.src").read_text(encoding="utf-8").splitlines() == ["Hello world", "a b c"]


def test_eval_splits_keep_every_line_and_leave_references_alone(tmp_path):
    pairs = PAIRS + [("Cafe\u0301  ok", "Cafe\u0301  \u00a0ref")]
    stats = clean_parallel(iter(pairs), tmp_path / "v.src", tmp_path / "v.tgt", CleanOptions(), train=False)
    assert stats["read"] == stats["kept"] == 7 and sum(stats["dropped"].values()) == 0
    assert stats["empty_kept"] == 1
    src = (tmp_path / "v.src").read_text(encoding="utf-8").split("\n")
    tgt = (tmp_path / "v.tgt").read_text(encoding="utf-8").split("\n")
    assert len(src) == len(tgt) == 8 and src[1] == ""
    assert src[6] == "Café ok"  # the model's input is normalised like training text
    assert tgt[6] == "Cafe\u0301 ref"  # the reference: whitespace only, as sacreBLEU reads it


def test_mismatched_line_counts_name_both_files(tmp_path):
    (tmp_path / "a.en").write_text("1\n2\n3\n", encoding="utf-8")
    (tmp_path / "a.de").write_text("1\n2\n", encoding="utf-8")
    with pytest.raises(CorpusError, match=r"a.de has 2 lines but .*a.en has 3"):
        list(iter_parallel(tmp_path / "a.en", tmp_path / "a.de"))
    with pytest.raises(CorpusError):
        clean_parallel(
            iter_parallel(tmp_path / "a.en", tmp_path / "a.de"),
            tmp_path / "o.src",
            tmp_path / "o.tgt",
            CleanOptions(),
            train=True,
        )
    assert not (tmp_path / "o.src").exists() and not list(tmp_path.glob(".o.*"))  # no partial output left


def test_invalid_utf8_names_file_and_line(tmp_path):
    (tmp_path / "b.en").write_bytes(b"ok\nstill ok\nbad \xff byte\n")
    (tmp_path / "b.de").write_text("1\n2\n3\n", encoding="utf-8")
    with pytest.raises(CorpusError, match=r"b.en:3: not valid UTF-8"):
        list(iter_parallel(tmp_path / "b.en", tmp_path / "b.de"))


def test_lines_split_on_newline_only(tmp_path):
    (tmp_path / "c.en").write_bytes("\ufeffa\u2028b\r\nc\rd\n".encode("utf-8"))
    (tmp_path / "c.de").write_text("x\ny\n", encoding="utf-8")
    assert list(iter_parallel(tmp_path / "c.en", tmp_path / "c.de")) == [("a\u2028b", "x"), ("c\rd", "y")]


def test_write_json_is_atomic_and_readable(tmp_path):
    write_json(tmp_path / "stats.json", {"a": 1})
    assert json.loads((tmp_path / "stats.json").read_text()) == {"a": 1}
    assert [p.name for p in tmp_path.iterdir()] == ["stats.json"]


def test_removed_characters_are_counted_by_reason_not_silently_dropped(tmp_path):
    """A NUL byte, a zero-width space, a BOM, a decomposed accent: each line changed is counted by why."""
    pairs = [("a\x00b c", "x y"), ("\ufeffHello", "Hallo\u200b Welt"), ("Cafe\u0301", "Kaffee"), ("plain", "klar")]
    stats = clean_parallel(pairs, tmp_path / "t.src", tmp_path / "t.tgt", CleanOptions(), train=True)
    assert stats["changed"] == {"control_chars": 1, "format_chars": 1, "bom": 1, "unicode_form": 1}
    assert (tmp_path / "t.src").read_text().splitlines() == ["ab c", "Hello", "Café", "plain"]
    assert stats["kept"] == 4 and sum(stats["dropped"].values()) == 0
    counts = dict.fromkeys(stats["changed"], 0)
    assert normalize_text("\x00\x00a\ufeff", "NFC", counts) == "a" and counts["control_chars"] == 1  # per line
