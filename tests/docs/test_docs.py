"""The README is a front door: short, and every link in it and in docs/ leads somewhere (a file, and a heading of it
when the link names one, as GitHub makes anchors)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")


def anchors(markdown: str) -> set[str]:
    """GitHub's anchors of a document's headings: lower case, punctuation but hyphens and underscores dropped,
    spaces as hyphens (code fences skipped)."""
    out, fenced = set(), False
    for line in markdown.splitlines():
        if line.startswith("```"):
            fenced = not fenced
        elif not fenced and line.startswith("#"):
            title = line.lstrip("#").strip().lower()
            out.add(re.sub(r"[^\w\- ]", "", title).replace(" ", "-"))
    return out


def broken_links(doc: Path, root: Path) -> list[str]:
    problems = []
    for target in LINK.findall(doc.read_text(encoding="utf-8")):
        if re.match(r"[a-z]+://", target) or target.startswith("mailto:"):
            continue
        path, _, anchor = target.partition("#")
        file = (doc.parent / path).resolve() if path else doc
        if not file.exists() or (root not in file.parents and file != root):
            problems.append(f"{doc.relative_to(root)}: {target} (no such file)")
        elif anchor and file.suffix == ".md" and anchor not in anchors(file.read_text(encoding="utf-8")):
            problems.append(f"{doc.relative_to(root)}: {target} (no such heading in {file.name})")
    return problems


def test_the_readme_is_short(repo_root: Path) -> None:
    assert len((repo_root / "README.md").read_text(encoding="utf-8").splitlines()) <= 200


@pytest.mark.parametrize("name", ["README.md", *sorted(p.name for p in Path(__file__).parents[2].glob("docs/*.md"))])
def test_every_link_resolves(repo_root: Path, name: str) -> None:
    doc = repo_root / name if name == "README.md" else repo_root / "docs" / name
    assert broken_links(doc, repo_root) == []


def test_a_broken_link_is_found(tmp_path: Path) -> None:
    (tmp_path / "a.md").write_text("# Top\n\n[ok](#top) [file](b.md) [gone](c.md) [heading](b.md#nowhere)\n")
    (tmp_path / "b.md").write_text("# B\n")
    assert broken_links(tmp_path / "a.md", tmp_path) == [
        "a.md: c.md (no such file)",
        "a.md: b.md#nowhere (no such heading in b.md)",
    ]
