"""The report's tables as one record (:class:`benchlab.names.report_tables.ReportNumbers`): what the
dashboard shows of a benchmark's statistics, made from the report's analysis by the report's own
renderers, so that each cell is the text BENCHMARK_REPORT.md and BENCHMARKS.md print.

``benchlab report`` writes it into the results folder (``report-tables.json``) with the key of what
it was computed from; the dashboard reads it while that key holds, and otherwise has it made here
from the folder again.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from benchlab.names.report_tables import ReportNumbers, ShownColumn, ShownRow, ShownTable

if TYPE_CHECKING:
    from benchlab.report.markdown import ReportData


def markdown_rows(lines: list[str]) -> tuple[tuple[str, ...], ...]:
    """The cells of a Markdown table's lines (the separator line left out)."""
    rows = []
    for line in lines:
        line = line.strip()
        if not line.startswith("|"):
            continue
        if set(line) <= set("|-: "):
            continue
        rows.append(tuple(c.strip() for c in line.strip().removeprefix("|").removesuffix("|").split(" | ")))
    return tuple(rows)


def report_numbers(data: ReportData, questions: str = "") -> ReportNumbers:
    """The results tables, comparisons, leaderboard and warnings of ``data`` (analysed:
    :func:`benchlab.report.analyze`) and the report's question-level section ``questions`` (its
    Markdown, :func:`benchlab.report.questions.render_section`; empty without per-question
    records), as the report prints them; the leaderboard's scores without their links to run
    folders."""
    from benchlab.report import leaderboard
    from benchlab.report.markdown import comparison_rows, task_tables

    stats = data.analysis
    if stats is None:
        raise ValueError("report_numbers: analyse the data first (benchlab.report.analyze)")
    tables, secondary = task_tables(data)
    info = data.info
    compared = [r for r in stats.comparisons if r.metric == info.primary]
    comparisons = markdown_rows(comparison_rows(info, stats.goal, compared)) if compared else ()
    shown = tuple(
        ShownTable(t.name, t.target, tuple(ShownColumn(c.name, c.title(), c.numeric) for c in t.columns),
                   tuple(ShownRow(r.rank, r.tied, r.config, r.flag, tuple(r.cells), tuple(r.secondary))
                         for r in t.rows))
        for t in tables)
    return ReportNumbers(
        info.primary, stats.goal, info.baseline, shown, tuple(secondary), comparisons,
        markdown_rows(leaderboard(data).splitlines()), tuple(stats.warnings),
        markdown_rows(questions.splitlines()))


__all__ = ["markdown_rows", "report_numbers"]
