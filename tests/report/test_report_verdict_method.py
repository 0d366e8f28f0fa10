"""The report, BENCHMARKS.md, the dashboard's numbers, ``compare --json`` and ``analyze --json`` give one and
the same verdict and name the method that decided it (benchlab.stats.verdict)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from report_world import build_store_world

from benchlab.report import write_report
from benchlab_testing import run_cli

# Six seeds, the candidate 0.1 better on every one (paired t: p ~ 1e-7): significant by the t-test.
BASE = [0.50, 0.52, 0.51, 0.53, 0.49, 0.50]
VALUES = {("t1", "a"): BASE, ("t1", "b"): [v + 0.1 + d for v, d in zip(BASE, [0, 0.01, -0.01, 0.005, 0, -0.005],
                                                                       strict=True)]}


def _verdict_row(markdown: str) -> list[str]:
    part = markdown.split("## Statistical comparisons", 1)[1]
    rows = [[c.strip() for c in ln.strip("|").split("|")] for ln in part.splitlines()
            if ln.startswith("| t1 ")]
    return rows[0]


@pytest.mark.parametrize("assume, verdict, method, significant", [
    (None, "— undetermined", "—", None),
    ("normal", "✓ significantly better", "paired t, normal distribution assumed", True),
])
def test_every_surface_shows_the_same_verdict_and_names_its_method(tmp_path: Path, assume, verdict, method,
                                                                    significant):
    folder = build_store_world(tmp_path / "res", VALUES, baseline="a", assume=assume)
    files = write_report(folder, tmp_path / "rep", plots=False)
    text = files.markdown.read_text()
    row = _verdict_row(text)
    assert row[2] == verdict and row[-1] == method
    if assume is None:
        assert "no verdict (significance is null): the paired t test gives p =" in text
        assert "assume: normal" in text
    compared = json.loads(run_cli("compare", str(folder), "--candidate", "b", "--json", check=True).stdout)
    (cmp,) = compared["comparisons"]
    assert cmp["significant"] is significant
    assert cmp["decided_by"] == (None if method == "—" else method)
    shown = run_cli("compare", str(folder), "--candidate", "b", check=True).stdout
    assert "verdicts decided by: " + (method if significant else "none") in " ".join(shown.split())

    from benchlab.ui.tables import report_numbers

    page = report_numbers(folder)
    assert page is not None
    header, *rows = page.comparisons
    cells = dict(zip(header, rows[0], strict=True))
    assert verdict in cells["verdict"] and cells["decided by"] == method
