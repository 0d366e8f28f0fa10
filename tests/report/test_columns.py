"""A config's columns are declared once (report/columns.py), over the summary row stats computes,
and every table of a config's numbers shows them: BENCHMARK_REPORT.md's results tables, the
dashboard's, and `benchlab analyze`'s "Per task and config"."""

from __future__ import annotations

from pathlib import Path

import pytest
from report_world import build_store_world

from benchlab.report import write_report
from benchlab.report.columns import COLUMNS
from benchlab.ui.tables import report_numbers
from benchlab_testing import run_cli

VALUES = {("walk", "a"): [0.1, 0.2, 0.4, 0.35, 0.3], ("walk", "b"): [0.3, 0.5, 0.6, 0.55, 0.45]}


def _cells(line: str) -> list[str]:
    return [c.strip() for c in line.strip().removeprefix("|").removesuffix("|").split(" | ")]


def test_every_declared_column_is_in_the_report_the_dashboard_and_analyze(tmp_path: Path):
    folder = build_store_world(tmp_path / "res", VALUES)
    write_report(folder, tmp_path / "rep", plots=False, html=False)
    lines = (tmp_path / "rep" / "BENCHMARK_REPORT.md").read_text().splitlines()
    header = next(line for line in lines if line.startswith("| rank | config |"))
    assert _cells(header)[2:2 + len(COLUMNS)] == [c.title("score") for c in COLUMNS]
    # The dashboard shows the same columns, and the same text in each cell as the report.
    numbers = report_numbers(folder)
    assert numbers is not None
    (table,) = numbers.task_tables
    assert [c.name for c in table.columns] == [c.name for c in COLUMNS]
    for row in table.rows:
        shown = next(_cells(line) for line in lines if line.startswith(f"| {row.rank}") and f"| {row.config}" in line)
        assert shown[2:2 + len(COLUMNS)] == list(row.cells)
    # `benchlab analyze` of the published table prints every column's header.
    res = run_cli("analyze", str(tmp_path / "rep" / "results.csv"), "--reps", "200", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    for column in COLUMNS:
        assert column.title() in res.stdout


def test_the_iqr_of_a_summary_row_is_numpys_interquartile_range_of_the_seeds(tmp_path: Path):
    import numpy as np

    from benchlab.report import analyze, gather
    from benchlab.results import read

    folder = build_store_world(tmp_path / "res", VALUES)
    analysis = analyze(gather(read(folder)), reps=200).analysis
    assert analysis is not None
    for (task, config), values in VALUES.items():
        row = analysis.row(task, config)
        assert row is not None
        q75, q25 = np.percentile(values, [75, 25])
        assert row.iqr == pytest.approx(q75 - q25, abs=1e-15)
    # By hand for "a": sorted 0.1, 0.2, 0.3, 0.35, 0.4; q₀.₂₅ = 0.2 and q₀.₇₅ = 0.35 (positions 1 and 3).
    assert analysis.row("walk", "a").iqr == pytest.approx(0.15)  # type: ignore[union-attr]
