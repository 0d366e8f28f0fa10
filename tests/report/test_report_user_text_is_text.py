"""Text that comes from a spec, a run or a log is shown as text wherever a report writes it: in a
table cell it keeps the row's columns, in a sentence or a description it opens no code span,
emphasis, link, image, entity, heading, list or HTML tag, and a reader shows it as it was.

The property is checked on the three writers every field goes through (``tables.cell``, ``prose``,
``block``) with hypothesis over strings built of Markdown's marks, then end to end: a sweep whose
every user-text field is hostile, its BENCHMARKS.md, BENCHMARK_REPORT.md and report.html read back."""

from __future__ import annotations

import html
import re
import textwrap
from html.parser import HTMLParser
from pathlib import Path

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st
from markdown_it import MarkdownIt

from benchlab.report.tables import block, cell, prose
from benchlab_testing import run_cli

HOSTILE = ["a|b", "x\ny", "`tick`", "``", "<script>alert(1)</script>", "[l](javascript:alert(1))",
           "![i](x.png)", "&lt;b&gt;", "&#60;", "*em*", "**st**", "_u_", "~~s~~", "# h", "- li", "1. n",
           "> q", "\\|", "[r]: http://x", "<http://x>", "    code", "---", "a\\", "=="]

MARKS = st.text(alphabet=st.sampled_from(list("|`*_~[]()!<>&#;:-=+\\/ \nabc1.")), max_size=24)
VALUES = st.one_of(MARKS, st.sampled_from(HOSTILE), st.lists(st.sampled_from(HOSTILE), max_size=4).map("".join))

MD = MarkdownIt("commonmark", {"html": True}).enable("table")
PLAIN = {"text", "softbreak"}


def _inline_tokens(text: str) -> list:
    out = []
    for token in MD.parse(text):
        out += token.children or []
    return out


def _shown(tokens: list) -> str:
    return "".join(" " if t.type == "softbreak" else t.content for t in tokens)


@settings(max_examples=400, deadline=None)
@given(VALUES, VALUES)
def test_a_cell_keeps_its_row_and_shows_the_value_as_text(left: str, right: str) -> None:
    row = f"| {cell(left)} | {cell(right)} |"
    tokens = MD.parse(f"| a | b |\n|---|---|\n{row}\n")
    cells = [t for t in tokens if t.type == "inline"][2:]
    assert len(cells) == 2, row
    for value, found in zip((left, right), cells, strict=True):
        kinds = {c.type for c in found.children or []}
        assert kinds <= PLAIN, (value, row, kinds)
        assert _shown(found.children or []) == " ".join(value.split()), (value, row)


@settings(max_examples=400, deadline=None)
@given(VALUES.filter(lambda v: v.strip()))  # a name or a note has some text
def test_a_value_in_a_sentence_is_text(value: str) -> None:
    line = f"The config **{prose(value)}** is best."
    tokens = _inline_tokens(line)
    inner = [t for t in tokens if t.type not in ("strong_open", "strong_close")]
    assert [t.type for t in tokens].count("strong_open") == 1, (value, line)
    assert {t.type for t in inner} <= PLAIN, (value, line)
    assert _shown(inner) == f"The config {' '.join(value.split())} is best.", (value, line)


@settings(max_examples=400, deadline=None)
@given(st.lists(VALUES, min_size=1, max_size=4).map("\n".join))
def test_a_description_is_paragraphs_of_text(value: str) -> None:
    tokens = MD.parse(block(value))
    assert {t.type for t in tokens} <= {"paragraph_open", "paragraph_close", "inline"}, value
    inner = _inline_tokens(block(value))
    assert {t.type for t in inner} <= PLAIN, (value, block(value))
    shown = " ".join(" ".join(_shown(t.children or []) for t in tokens if t.type == "inline").split())
    assert shown == " ".join(value.split()), (value, block(value))


# ------------------------------------------------------------------------------------- end to end
BAD = "a|b`c`*d*&lt;e&gt;<script>f</script>[g](javascript:h)"

SPEC = {
    "name": "hostile",
    "description": "Intro line.\n# not a heading\n| not | a table |\n|---|---|\n[x](javascript:alert(1)) &#60;i&#62;",
    "tasks": [{"name": "t1", "params": {"level": BAD}}],
    "configs": [{"name": "base", "description": "desc " + BAD + "\n- not a list"},
                # Every seed of a grid config fails: its comparison carries a note naming it.
                {"name": "cand", "grid": {"tag": ["a|b", "`x`", "*y*", "&lt;z&gt;", "<b>w"]}}],
    "seeds": 2,
    "settings": ["level", "note"],
    "variables": {"note": BAD, "tag": "plain"},
    "command": "python run.py tag={tag} config={config}",
    "metrics": {"primary": "score", "secondary": ["a|b", "`m`", "[l](javascript:x)", "&lt;m&gt;"]},
    "baseline": "base",
}

RUN = textwrap.dedent('''
    import json, os, sys
    args = dict(a.split("=", 1) for a in sys.argv[1:])
    seed = int(os.environ["BENCHLAB_SEED"])
    if args["config"].startswith("cand[tag=a|b"):
        print("``` | <script>x</script> [l](javascript:y)")
        sys.exit("ValueError: " + {bad!r})
    values = {{"score": 0.5 + seed / 10 + len(args["tag"]) / 100}}
    values.update({{m: 1.0 + seed for m in ("a|b", "`m`", "[l](javascript:x)", "&lt;m&gt;")}})
    json.dump(values, open(os.path.join(os.environ["BENCHLAB_RUN_DIR"], "metrics.json"), "w"))
''').format(bad=BAD)

OWN_HTML = {"<details><summary>", "</summary>", "</details>", "<br>"}


@pytest.fixture(scope="module")
def report(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("hostile-text")
    (root / "run.py").write_text(RUN)
    (root / "bench.yaml").write_text(yaml.safe_dump(SPEC, sort_keys=False))
    done = run_cli("run", "bench.yaml", "--no-report", cwd=root)
    assert done.returncode == 1, done.stdout + done.stderr  # a grid config fails on purpose
    folder = root / "results" / "hostile"
    run_cli("report", str(folder), "--no-plots", cwd=root, check=True)
    return folder


def _tables(text: str) -> list[list[int]]:
    tables: list[list[int]] = []
    cells = 0
    for token in MD.parse(text):
        if token.type == "table_open":
            tables.append([])
        elif token.type == "tr_open":
            cells = 0
        elif token.type in ("th_open", "td_open"):
            cells += 1
        elif token.type == "tr_close":
            tables[-1].append(cells)
    return tables


def _row_cells(line: str) -> int:
    """The cells of a Markdown table row as a reader splits it: at every '|' not escaped."""
    return len(re.findall(r"(?<!\\)(?:\\\\)*\|", line)) - 1


def _rendered(tokens: list) -> list[str]:
    """Each inline run of the document as a reader shows it, markup dropped (a code span, emphasis or
    link shows its text without the marks that made it)."""
    out = []
    for token in tokens:
        if token.type == "inline":
            out.append(" ".join("".join(c.content if c.type in ("text", "code_inline", "html_inline")
                                        else " " if c.type == "softbreak" else "" for c in token.children or [])
                                .split()))
    return out


def test_hostile_fields_keep_every_table_and_make_no_markup_in_the_markdown(report: Path) -> None:
    for name in ("BENCHMARK_REPORT.md", "BENCHMARKS.md"):
        text = (report / name).read_text()
        lines = text.splitlines()
        # Every row of every table has the cells of its header, as written (a reader drops extra ones).
        for i, line in enumerate(lines):
            if line.startswith("|") and i + 1 < len(lines) and re.fullmatch(r"\|(\s*:?-+:?\s*\|)+", lines[i + 1]):
                width = _row_cells(line)
                for row in lines[i + 2:]:
                    if not row.startswith("|"):
                        break
                    assert _row_cells(row) == width, (name, row)
        tokens = MD.parse(text)
        kinds = {c.type for t in tokens for c in t.children or []}
        raw = {c.content.strip() for t in tokens for c in t.children or [] if c.type == "html_inline"}
        raw |= {t.content.strip() for t in tokens if t.type == "html_block"}
        assert {r for r in raw if r not in OWN_HTML and not r.startswith("<details><summary>")} == set(), name
        assert "em_open" not in kinds and "strong_open" in kinds or name == "BENCHMARKS.md"
        # Links are the report's own: to run folders and figures, never a value's.
        hrefs = [str(c.attrGet("href")) for t in tokens for c in t.children or [] if c.type == "link_open"]
        assert all(h.startswith("runs/") for h in hrefs), (name, hrefs)
        shown = "\n".join(_rendered(tokens))
        if name == "BENCHMARKS.md":
            # The Settings line shows the task's param and the spec's variable as written.
            assert f"level {BAD}, note {BAD}" in shown
        else:
            # The description is paragraphs of text: no heading, table or list of its own.
            assert not any(t.type in ("heading_open", "table_open", "bullet_list_open") and "not a" in
                           tokens[i + 1].content for i, t in enumerate(tokens)), name
            assert "# not a heading | not | a table |" in shown and "[x](javascript:alert(1)) &#60;i&#62;" in shown
            assert "desc " + BAD + " - not a list" in shown
            for metric in ("`m`", "[l](javascript:x)", "&lt;m&gt;"):
                assert metric in shown, metric
    report_text = (report / "BENCHMARK_REPORT.md").read_text()
    # The failed grid config's note is whole in its comparison row's verdict cell.
    row = next(line for line in report_text.splitlines() if line.startswith("| t1 | cand[tag=a\\|b]"))
    verdict = re.split(r"(?<!\\)\|", row)[3]
    assert "2 of 2 seeds failed (0, 1), excluded" in verdict, row


class _Elements(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict[str, str | None]]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))


def test_hostile_fields_make_no_markup_in_the_html(report: Path) -> None:
    page = (report / "report.html").read_text()
    parser = _Elements()
    parser.feed(page)
    tags = {t for t, _ in parser.tags}
    assert "script" not in tags and "b" not in tags and "i" not in tags
    assert not any(k.startswith("on") for _, attrs in parser.tags for k in attrs)
    hrefs = [attrs.get("href") or "" for t, attrs in parser.tags if t == "a"]
    assert all(h.startswith("runs/") for h in hrefs), hrefs
    assert "javascript:" not in " ".join(hrefs)
    # The values are on the page as text, entities as written.
    body = html.unescape(re.sub(r"<[^>]+>", "", page))
    assert "&lt;e&gt;" in body and "<script>f</script>" in body and "[g](javascript:h)" in body
