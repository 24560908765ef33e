"""WMT's "fake SGML" test-set files (newstest20xx-*.sgm): one `<seg id=..>` per line inside `<doc docid=..>`.

Entity policy: a segment's text is taken as written, entities included (`&amp;` stays `&amp;`), whitespace runs
collapsed: exactly what sacreBLEU's reader (FakeSGMLDataset) gives, so our references are the ones every
`sacrebleu -t wmt14/full` score uses, and the source side is read by the same rule. WMT's test sets have used no
entities since 2009, so on them the policy changes nothing. Departure: see docs/departures.md#sgm-entities
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

_DOC = re.compile(r"<doc\b[^>]*?\bdocid\s*=\s*\"([^\"]*)\"", re.IGNORECASE)
_SEG = re.compile(r"<seg\b[^>]*?\bid\s*=\s*\"?([^\">\s]+)\"?[^>]*>(.*?)</seg>", re.IGNORECASE)
# Only the XML entities and numeric references, with their semicolon: html.unescape would also turn
# semicolon-less words like "&para" or "&copy" inside running text into symbols.
_ENTITY = re.compile(r"&(amp|lt|gt|quot|apos|#[0-9]+|#[xX][0-9a-fA-F]+);")
_NAMED = {"amp": "&", "lt": "<", "gt": ">", "quot": '"', "apos": "'"}
_SPACE = re.compile(r"\s+")


class SgmError(ValueError):
    """A malformed SGM file, or a source and reference that do not align."""


@dataclass(frozen=True)
class Segment:
    """One `<seg>`: its document, its id within that document, and its unescaped text."""

    doc_id: str
    seg_id: str
    text: str


def unescape(text: str) -> str:
    """Replace &amp; &lt; &gt; &quot; &apos; and numeric character references by their characters."""

    def replace(match: re.Match) -> str:
        name = match.group(1)
        if name.startswith("#"):
            return chr(int(name[2:], 16) if name[1] in "xX" else int(name[1:]))
        return _NAMED[name]

    return _ENTITY.sub(replace, text)


def read_sgm(path: Path) -> list[Segment]:
    """All segments in file order, text as written (entities kept) and whitespace-collapsed, as sacreBLEU reads
    them; `unescape` is there for a caller that wants the characters."""
    path = Path(path)
    segments: list[Segment] = []
    doc_id = ""
    seen: set[tuple[str, str]] = set()
    with open(path, "rb") as f:
        for lineno, raw in enumerate(f, 1):
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise SgmError(f"{path}:{lineno}: not valid UTF-8 ({exc.reason} at byte {exc.start})") from exc
            if doc := _DOC.search(line):
                doc_id = doc.group(1)
            if "<seg" not in line.lower():
                continue
            seg = _SEG.search(line)
            if seg is None:
                raise SgmError(f"{path}:{lineno}: <seg> without id or closing </seg> on the same line")
            key = (doc_id, seg.group(1))
            if key in seen:
                raise SgmError(f"{path}:{lineno}: duplicate segment id {seg.group(1)!r} in document {doc_id!r}")
            seen.add(key)
            text = _SPACE.sub(" ", seg.group(2)).strip()
            segments.append(Segment(doc_id, seg.group(1), text))
    if not segments:
        raise SgmError(f"{path}: no <seg> elements found")
    return segments


def read_sgm_pair(src_path: Path, ref_path: Path) -> tuple[list[str], list[str]]:
    """Source and reference texts of a test set, refusing files whose documents/segment ids do not align."""
    src, ref = read_sgm(src_path), read_sgm(ref_path)
    if len(src) != len(ref):
        raise SgmError(f"segment counts differ: {src_path} has {len(src)}, {ref_path} has {len(ref)}")
    for i, (s, r) in enumerate(zip(src, ref), 1):
        if (s.doc_id, s.seg_id) != (r.doc_id, r.seg_id):
            raise SgmError(
                f"segment {i} does not align: {src_path} has doc {s.doc_id!r} seg {s.seg_id!r}, "
                f"{ref_path} has doc {r.doc_id!r} seg {r.seg_id!r}"
            )
    return [s.text for s in src], [r.text for r in ref]
