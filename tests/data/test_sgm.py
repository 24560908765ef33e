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


def test_segments_keep_order_doc_ids_and_their_text_as_written(tmp_path):
    segs = read_sgm(_write(tmp_path, "a.sgm", SRC))
    assert [(s.doc_id, s.seg_id) for s in segs] == [("1012-bbc", "1"), ("1012-bbc", "2"), ("1013-xyz", "1")]
    assert segs[0].text == "Gutach: Noch mehr Sicherheit f&#252;r Fu&#xDF;g&#228;nger"  # entities kept
    assert segs[1].text == "&quot;AT&amp;T&quot; &lt;3 &apos;s &para and R&D"  # whitespace collapsed
    assert segs[2].text == "Zweites Dokument"


def _sacrebleu_text(path, tmp_path) -> list[str]:
    """The plain text sacreBLEU makes of an SGM file for its references (FakeSGMLDataset, the reader behind
    `sacrebleu -t wmt14/full`); a private method, called here only as the reference to agree with."""
    from sacrebleu.dataset.fake_sgml import FakeSGMLDataset

    out = tmp_path / f"{path.name}.txt"
    FakeSGMLDataset._convert_format(FakeSGMLDataset.__new__(FakeSGMLDataset), str(path), str(out))
    return out.read_text(encoding="utf-8").splitlines()


def test_our_reader_gives_exactly_sacrebleus_text_entities_included(tmp_path):
    """One entity policy for our references and sacreBLEU's: the same text, so our BLEU is the one
    `sacrebleu -t wmt14/full` users compute (docs/departures.md#sgm-entities)."""
    ref = _write(
        tmp_path,
        "ref.sgm",
        SRC + '<doc docid="d3">\n<seg id="1">Preis:  5 &euro;   &amp;amp; mehr</seg>\n'
        '<seg id="2">Tab\there &#x2014; und &lt;b&gt;</seg>\n</doc>\n',
    )
    ours = [s.text for s in read_sgm(ref)]
    assert ours == _sacrebleu_text(ref, tmp_path)
    assert "&amp;amp;" in ours[3] and "&#x2014;" in ours[4]


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
