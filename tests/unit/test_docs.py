"""The user docs as a reader follows them: every relative link in README.md and docs/ leads to a
file that exists and, with an anchor, to a heading of that file (GitHub's slugs); and
docs/nightly.md stays a reference of at most 250 lines (the evidence lives under docs/dev/)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)\)")
FENCE = re.compile(r"^(```|~~~).*?^\1", re.M | re.S)


def slug(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, inline code marks and punctuation dropped
    (hyphens and underscores kept), spaces to hyphens."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def anchors(doc: Path) -> set[str]:
    seen: dict[str, int] = {}
    out = set()
    for line in FENCE.sub("", doc.read_text()).splitlines():
        if m := re.match(r"#{1,6}\s+(.*)", line):
            s = slug(m.group(1))
            n = seen.get(s, 0)
            seen[s] = n + 1
            out.add(s if n == 0 else f"{s}-{n}")
    out |= set(re.findall(r'<a (?:name|id)="([^"]+)"', doc.read_text()))
    return out


def broken(doc: Path, root: Path = ROOT) -> list[str]:
    """The relative links of ``doc`` that lead nowhere (code blocks aside), named from
    ``root``."""
    bad = []
    for target in LINK.findall(FENCE.sub("", doc.read_text())):
        if re.match(r"[a-z][a-z0-9+.-]*:", target):  # https:, mailto:
            continue
        path, _, anchor = target.partition("#")
        dest = (doc.parent / path).resolve() if path else doc
        if not dest.exists():
            bad.append(f"{doc.relative_to(root)}: {target}: no such file")
        elif anchor and dest.suffix == ".md" and anchor not in anchors(dest):
            bad.append(f"{doc.relative_to(root)}: {target}: no such heading")
    return bad


RAW = ROOT / "docs" / "dev" / "validate-h200"
"""Reports as rocmbuild wrote them on a GPU host, kept as evidence: their links point into the
run directory they came from."""


def test_every_relative_link_in_the_docs_leads_somewhere() -> None:
    docs = [ROOT / "README.md", *sorted(d for d in (ROOT / "docs").rglob("*.md")
                                       if not d.is_relative_to(RAW))]
    assert [b for d in docs for b in broken(d)] == []


def test_the_link_check_sees_a_missing_file_and_a_missing_heading(tmp_path: Path) -> None:
    (tmp_path / "b.md").write_text("# The `b` page: one\n\n## Two, again\n")
    a = tmp_path / "a.md"
    a.write_text("[ok](b.md#the-b-page-one) [ok](b.md#two-again) [gone](c.md) "
                 "[nohead](b.md#three) [web](https://example.org/x#y)\n"
                 "```\n[in code](nowhere.md)\n```\n")
    assert broken(a, tmp_path) == ["a.md: c.md: no such file",
                                   "a.md: b.md#three: no such heading"]


def test_the_nightly_reference_stays_short() -> None:
    assert len((ROOT / "docs" / "nightly.md").read_text().splitlines()) <= 250
