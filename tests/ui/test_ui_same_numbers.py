"""The benchmark page shows the numbers of BENCHMARK_REPORT.md and BENCHMARKS.md, for the
quick-start benchmark: the same results table, the same statistics, printed the same way."""

from __future__ import annotations

import html
import json
import re
import sqlite3
from html.parser import HTMLParser
from pathlib import Path

import numpy as np
import pytest
from scipy import stats
from ui_testkit import get, ui_server

pytestmark = pytest.mark.slow



class Tables(HTMLParser):
    """The rows of every table of a page, as the text of their cells, by the table's data-task."""

    def __init__(self) -> None:
        super().__init__()
        self.tables: list[tuple[str | None, list[list[str]]]] = []
        self._cell: list[str] | None = None
        self._row: list[str] | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "table":
            self.tables.append((dict(attrs).get("data-task"), []))
        elif tag == "tr":
            self._row = []
        elif tag in ("td", "th") and self._row is not None:
            self._cell = []
        elif tag == "br" and self._cell is not None:
            self._cell.append("<br>")

    def handle_endtag(self, tag: str) -> None:
        if tag in ("td", "th") and self._cell is not None and self._row is not None:
            self._row.append("".join(self._cell).strip())
            self._cell = None
        elif tag == "tr" and self._row is not None:
            self.tables[-1][1].append(self._row)
            self._row = None

    def handle_data(self, data: str) -> None:
        if self._cell is not None:
            self._cell.append(data)


def _markdown_rows(lines: list[str]) -> list[list[str]]:
    return [[html.unescape(c.strip()) for c in ln.strip()[1:-1].split(" | ")] for ln in lines
            if ln.startswith("| ") and not set(ln) <= set("|-: ")]


def _report_task_rows(report: str) -> dict[str, list[list[str]]]:
    out: dict[str, list[list[str]]] = {}
    for block in re.split(r"\n### ", report.split("\n## Results", 1)[1].split("\n## ", 1)[0])[1:]:
        task = block.split(" ", 1)[0].strip()
        out[task] = _markdown_rows(block.splitlines())[1:]  # the header left out
    return out


@pytest.fixture(scope="module")
def quickstart(shared_quickstart: Path) -> Path:
    # The session's quick start (tests/conftest.py): 3 seeds, 3 epochs. The page and the report are
    # compared cell by cell whatever the count, and 3 seeds give every statistic a column shows.
    return shared_quickstart


@pytest.fixture(scope="module")
def page_tables(quickstart: Path) -> list[tuple[str | None, list[list[str]]]]:
    with ui_server(quickstart.parent) as (port, _):
        status, _, page = get(port, "/b/quickstart")
        assert status == 200 and b'data-src="/b/quickstart/numbers"' in page
        # What the page's script puts in it.
        status, _, body = get(port, "/b/quickstart/numbers")
    assert status == 200
    parser = Tables()
    parser.feed(body.decode())
    return parser.tables


def test_the_results_tables_are_the_reports(quickstart: Path, page_tables):
    report = _report_task_rows((quickstart / "BENCHMARK_REPORT.md").read_text())
    shown = {task: rows[1:] for task, rows in page_tables if task}
    assert set(shown) == {"digits", "wine", "breast_cancer"} == set(report)
    for task, rows in report.items():
        assert shown[task] == rows, task


def test_the_comparisons_and_the_leaderboard_are_the_reports(quickstart: Path, page_tables):
    text = (quickstart / "BENCHMARK_REPORT.md").read_text()
    comparisons = _markdown_rows(text.split("| task | candidate | verdict |", 1)[1].split("\n\n", 1)[0].splitlines())
    page_comparisons = next(rows for _, rows in page_tables if rows and rows[0][:3] == ["task", "candidate", "verdict"])
    assert len(comparisons) == 6
    assert page_comparisons[1:] == comparisons
    board = _markdown_rows((quickstart / "BENCHMARKS.md").read_text().splitlines())
    page_board = next(rows for _, rows in page_tables if rows and rows[0][:2] == ["task", "target"])
    # BENCHMARKS.md links each score to a run folder; the page prints the score alone.
    linked = [[re.fullmatch(r"\[([^\]]+)\]\(runs/[0-9a-f]+/\)( .*)?", c) for c in row[2:5]] for row in board[1:]]
    assert all(all(linked_row) for linked_row in linked)
    unlinked = [row[:2] + [m[1] + (m[2] or "") for m in ms] + row[5:] for row, ms in  # type: ignore[index]
                zip(board[1:], linked, strict=True)]
    assert page_board == board[:1] + unlinked
    assert all(row[-1].split()[1] in ("✅", "⚠️", "❌") for row in page_board[1:])


def test_the_page_mean_std_and_ci_match_scipy_on_the_runs_own_metrics(quickstart: Path, page_tables):
    con = sqlite3.connect(f"file:{quickstart / 'benchlab.db'}?mode=ro", uri=True)
    try:
        ids = [r for (r,) in con.execute("SELECT run_id FROM runs WHERE task = 'digits' AND config = 'mlp'")]
    finally:
        con.close()
    values = np.array([json.loads((quickstart / "runs" / rid / "metrics.json").read_text())["accuracy"]
                       for rid in ids])
    assert values.shape == (3,)
    row = next(r for task, rows in page_tables if task == "digits" for r in rows if r[1].startswith("mlp"))
    mean, std = (float(x) for x in row[3].split(" ± "))
    low, high = (float(x) for x in row[4].strip("[]").split(", "))
    decimals = len(row[3].split(" ± ")[0].split(".")[1])
    tol = 0.51 * 10.0 ** -decimals
    lo, hi = stats.t.interval(0.95, df=2, loc=values.mean(), scale=stats.sem(values))
    assert abs(mean - values.mean()) <= tol and abs(std - values.std(ddof=1)) <= tol
    assert abs(low - lo) <= tol and abs(high - hi) <= tol
