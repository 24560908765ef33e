"""WMT fake-SGML parsing: entities, document ids, segment order, alignment of source and reference."""
from __future__ import annotations

import pytest

from aiayn.data.sgm import SgmError, read_sgm, read_sgm_pair, unescape

SRC = """<srcset setid="newstest2014" srclang="any">
<doc sysid="ref" docid="1012-bbc" genre="news" origlang="en">
<p>
<seg id="1">Gutach: Noch mehr Sicherheit f&#252;r Fu&#xDF;g&#228;nger</seg>
<seg id="2">&quot;AT&amp;T&quot; &lt;3   &apos;s  &para and R&D</seg>
</p>
</doc>
<doc sysid="ref" docid="1013-xyz" genre="news" origlang="de">
<seg id="1">  Zweites   Dokument </seg>
</doc>
</srcset>
"""


def _write(tmp_path, name, text):
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def test_entities_and_numeric_references_are_unescaped():
    assert unescape("&amp;lt; &#65;&#x42;") == "&lt; AB"  # one level only: &amp;lt; is the text "&lt;"


def test_segments_keep_order_doc_ids_and_unescaped_text(tmp_path):
    segs = read_sgm(_write(tmp_path, "a.sgm", SRC))
    assert [(s.doc_id, s.seg_id) for s in segs] == [("1012-bbc", "1"), ("1012-bbc", "2"), ("1013-xyz", "1")]
    assert segs[0].text == "Gutach: Noch mehr Sicherheit für Fußgänger"
    # Whitespace collapsed like sacreBLEU; "&para" without ";" and a bare "&" are text, not entities.
    assert segs[1].text == "\"AT&T\" <3 's &para and R&D"
    assert segs[2].text == "Zweites Dokument"


def test_pair_alignment_is_checked(tmp_path):
    src = _write(tmp_path, "src.sgm", SRC)
    src_texts, ref_texts = read_sgm_pair(src, src)
    assert src_texts == ref_texts and len(src_texts) == 3
    shifted = _write(tmp_path, "ref.sgm", SRC.replace('<seg id="2">', '<seg id="3">'))
    with pytest.raises(SgmError, match="segment 2 does not align"):
        read_sgm_pair(src, shifted)
    shorter = _write(tmp_path, "short.sgm", SRC.replace('<seg id="1">  Zweites   Dokument </seg>\n', ""))
    with pytest.raises(SgmError, match="segment counts differ: .*has 3.*has 2"):
        read_sgm_pair(src, shorter)


def test_malformed_and_duplicate_segments_name_file_and_line(tmp_path):
    with pytest.raises(SgmError, match=r"bad.sgm:3: <seg> without"):
        read_sgm(_write(tmp_path, "bad.sgm", '<srcset>\n<doc docid="d">\n<seg id="1">open\n</doc>\n'))
    with pytest.raises(SgmError, match=r"dup.sgm:3: duplicate segment id '1'"):
        read_sgm(_write(tmp_path, "dup.sgm", '<doc docid="d">\n<seg id="1">a</seg>\n<seg id="1">b</seg>\n'))
    bad_utf8 = tmp_path / "latin1.sgm"
    bad_utf8.write_bytes(b'<doc docid="d">\n<seg id="1">caf\xe9</seg>\n')
    with pytest.raises(SgmError, match=r"latin1.sgm:2: not valid UTF-8"):
        read_sgm(bad_utf8)
