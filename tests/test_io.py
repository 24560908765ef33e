"""aiayn.io: reading sentence files line by line."""

from __future__ import annotations

from aiayn.io import read_lines


def test_read_lines_splits_on_newline_only(tmp_path):
    path = tmp_path / "h.txt"
    path.write_text("a\u2028b\nc\n", encoding="utf-8")
    assert read_lines(path) == ["a\u2028b", "c"]
