"""No field of a spec, a run, a log or a results file becomes markup in BENCHMARK_REPORT.md,
BENCHMARKS.md or report.html: hostile values in every such field, the page opened in headless
Chromium (Playwright driving Debian's chromium), no script runs and every table keeps its columns."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml
from markdown_it import MarkdownIt

from benchlab_testing import run_cli

# Each payload, if it became markup, pushes its name onto window.__pwned (or opens a dialog).
IMG = "<img src=x onerror=\"window.__pwned.push('{0}')\">"
SCRIPT_TAG = "<script>window.__pwned.push('{0}')</script>"

SPEC = {
    "name": "hostile",
    "description": f"Our suite. {SCRIPT_TAG.format('description')} {IMG.format('description-img')}",
    "tasks": [{"name": "t1"}],
    "configs": [{"name": "base", "description": IMG.format("config-description")},
                {"name": "cand", "grid": {"tag": ["a|b", "x<u>y"]}}],
    "seeds": 2,
    "command": "python run.py tag={tag} config={config}",
    "variables": {"tag": "plain"},
    "metrics": {"primary": "score", "secondary": [IMG.format("metric"), "a|b"]},
    "baseline": "base",
}

RUN = '''
import json, os, sys
args = dict(a.split("=", 1) for a in sys.argv[1:])
seed = int(os.environ["BENCHLAB_SEED"])
if args["config"].endswith("b]") and seed == 1:
    # An evaluation printing model output: a line of three backticks closes a naive fence.
    print("model said:")
    print("```")
    print({!r})
    print("```" + "`" * 3)
    print({!r})
    sys.exit("ValueError: " + {!r})
json.dump({{"score": 0.5 + seed / 10 + len(args["tag"]) / 100, {!r}: 1.0 + seed, "a|b": 2.0 + seed}},
          open(os.path.join(os.environ["BENCHLAB_RUN_DIR"], "metrics.json"), "w"))
'''.format(IMG.format("tail"), SCRIPT_TAG.format("tail-script"), IMG.format("error"), IMG.format("metric"))

# The elements the report's own template writes as HTML; no other may appear.
OWN_HTML = {"<details><summary>", "</summary>", "</details>", "<br>"}


@pytest.fixture(scope="module")
def report(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("hostile")
    (root / "run.py").write_text(RUN)
    (root / "bench.yaml").write_text(yaml.safe_dump(SPEC, sort_keys=False))
    done = run_cli("run", "bench.yaml", "--no-report", cwd=root)
    assert done.returncode == 1, done.stdout + done.stderr  # one run fails on purpose
    folder = root / "results" / "hostile"
    run_cli("report", str(folder), "--no-plots", cwd=root, check=True)
    return folder


def _html_pieces(text: str) -> list[str]:
    """The raw HTML a CommonMark reader (GitHub's too) would pass on from ``text``."""
    md = MarkdownIt("commonmark", {"html": True}).enable("table")
    out = []
    for token in md.parse(text):
        if token.type == "html_block":
            out.append(token.content.strip())
        for child in token.children or []:
            if child.type == "html_inline":
                out.append(child.content.strip())
    return out


def _tables(text: str) -> list[list[int]]:
    """The number of cells of each row of each Markdown table in ``text``."""
    md = MarkdownIt("commonmark").enable("table")
    tables: list[list[int]] = []
    cells = 0
    for token in md.parse(text):
        if token.type == "table_open":
            tables.append([])
        elif token.type == "tr_open":
            cells = 0
        elif token.type in ("th_open", "td_open"):
            cells += 1
        elif token.type == "tr_close":
            tables[-1].append(cells)
    return tables


def test_markdown_files_carry_no_markup_of_their_fields_and_tables_keep_their_columns(report):
    for name in ("BENCHMARK_REPORT.md", "BENCHMARKS.md"):
        text = (report / name).read_text()
        assert "onerror" in text or name == "BENCHMARKS.md"  # the values are shown, as text
        pieces = [p for p in _html_pieces(text) if p not in OWN_HTML and not p.startswith("<details><summary>")]
        assert pieces == [], (name, pieces)
        tables = _tables(text)
        assert tables and all(len(set(rows)) == 1 for rows in tables), (name, tables)
    board = (report / "BENCHMARKS.md").read_text()
    assert "cand[tag=a\\|b]" in board and "cand[tag=x&lt;u>y]" in board


@pytest.mark.slow
def test_hostile_report_runs_no_script_in_chromium_and_its_tables_keep_their_columns(report, tmp_path):
    sync_api = pytest.importorskip("playwright.sync_api")
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        pytest.skip("chromium is not installed (apt-get install chromium)")
    page_file = report / "report.html"
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium, args=["--no-sandbox"])
        try:
            page = browser.new_page()
            dialogs: list[str] = []
            page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
            page.add_init_script("window.__pwned = [];")
            page.goto(page_file.as_uri(), wait_until="load")
            page.wait_for_function("document.readyState === 'complete'")
            pwned = page.evaluate("window.__pwned")
            scripts = page.evaluate("document.querySelectorAll('script').length")
            handlers = page.evaluate("""Array.prototype.slice.call(document.querySelectorAll('*'))
                .filter(e => Array.prototype.some.call(e.attributes, a => a.name.startsWith('on'))).length""")
            shape = page.evaluate("""Array.prototype.slice.call(document.querySelectorAll('table')).map(t =>
                Array.prototype.slice.call(t.rows).map(r => r.cells.length))""")
            body = page.evaluate("document.body.textContent")
        finally:
            browser.close()
    assert pwned == [] and dialogs == [] and scripts == 0 and handlers == 0
    assert shape and all(len(set(rows)) == 1 for rows in shape), shape
    # The hostile values are on the page as text: the log tail whole, past its backtick lines.
    assert "onerror=\"window.__pwned.push('tail')\"" in body
    assert "window.__pwned.push('tail-script')" in body
    assert "cand[tag=a|b]" in body and "cand[tag=x<u>y]" in body
