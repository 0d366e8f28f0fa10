"""Every relative link and image in the README and the guides leads somewhere: the file exists and, where
the link names a section (``#...``), a heading of that file has that anchor, spelt as GitHub
spells heading anchors."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")), *sorted((ROOT / "examples").glob("*/README.md"))]

_FENCE = re.compile(r"^```.*?^```", re.S | re.M)
_CODE = re.compile(r"`[^`\n]*`")
_LINK = re.compile(r"!?\[[^\]\n]*\]\(([^)\s]+)\)")
_HEADING = re.compile(r"^#{1,6} +(.+?) *#*$", re.M)


def _anchor(heading: str) -> str:
    """GitHub's anchor for a heading: markup dropped, lower case, punctuation but ``-`` and ``_``
    dropped, each space a ``-``."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading).replace("`", "").replace("*", "")
    return re.sub(r"[^\w\- ]", "", text.strip().lower()).replace(" ", "-")


def anchors(text: str) -> set[str]:
    """The anchors of ``text``'s headings; a repeated one gets ``-1``, ``-2``... as on GitHub."""
    seen: dict[str, int] = {}
    found = set()
    for heading in _HEADING.findall(_FENCE.sub("", text)):
        anchor = _anchor(heading)
        count = seen.get(anchor, 0)
        seen[anchor] = count + 1
        found.add(anchor if count == 0 else f"{anchor}-{count}")
    return found


def broken_links(doc: Path) -> list[str]:
    """The relative links and images of ``doc`` (outside code) whose file or section is not there."""
    broken = []
    text = _CODE.sub("", _FENCE.sub("", doc.read_text()))
    for target in _LINK.findall(text):
        if re.match(r"[a-z][a-z0-9+.-]*:", target):
            continue  # an address, not a file of the project
        path, _, section = target.partition("#")
        where = (doc.parent / path) if path else doc
        if not where.exists():
            broken.append(f"{target}: no such file")
        elif section and where.suffix == ".md" and section not in anchors(where.read_text()):
            broken.append(f"{target}: no such section")
    return broken


def test_the_link_check_finds_a_missing_file_and_a_missing_section(tmp_path: Path):
    (tmp_path / "other.md").write_text("# Other\n\n## The `run` command: **all** of it\n\n## Repeat\n\n## Repeat\n")
    doc = tmp_path / "doc.md"
    doc.write_text("# Top\n\n[a](other.md) [b](other.md#the-run-command-all-of-it) [c](other.md#repeat-1)\n"
                   "[d](#top) [e](https://example.org/x#y) ![img](nowhere.png) `[f](inside-code.md)`\n"
                   "```\n[g](inside-a-fence.md)\n```\n"
                   "[h](missing.md) [i](other.md#nowhere) [j](#repeat)\n")
    assert broken_links(doc) == ["nowhere.png: no such file", "missing.md: no such file",
                                 "other.md#nowhere: no such section", "#repeat: no such section"]


def test_every_relative_link_in_the_docs_leads_to_a_file_and_section_that_exist():
    broken = {doc.relative_to(ROOT).as_posix(): found for doc in DOCS if (found := broken_links(doc))}
    assert broken == {}
