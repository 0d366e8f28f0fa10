"""What a notebook shows for :func:`benchlab.run`'s and :func:`benchlab.compare`'s results.

Rendered by the report's own writers (the Summary and Results sections of BENCHMARK_REPORT.md,
its comparison table, its question-level section) and the report page's Markdown-to-HTML step
with its sanitizer, so a notebook shows the numbers and words the report shows, and no text from
a spec or a run becomes markup.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

from benchlab.names.benchmark_info import BenchmarkInfo
from benchlab.names.results_files import REPORT_FILE

if TYPE_CHECKING:
    from benchlab.report.comparison import Comparison

_SECTIONS = ("## Summary", "## Results")


def _to_html(markdown_text: str) -> str:
    from benchlab.report.html import _markdown_to_html

    return _markdown_to_html(markdown_text)


def _sections(text: str, wanted: tuple[str, ...]) -> str:
    """The ``## `` sections of a Markdown report whose headings are in ``wanted``, in order."""
    kept: list[str] = []
    keep = False
    for line in text.splitlines():
        if line.startswith("## "):
            keep = line.strip() in wanted
        if keep:
            kept.append(line)
    return "\n".join(kept)


def results_html(folder: Path) -> str:
    """The Summary and Results sections of the folder's report: the one ``benchlab run`` wrote, or
    one written now (without plots) into a scratch folder when there is none."""
    written = folder / REPORT_FILE
    if written.is_file():
        text = written.read_text(encoding="utf-8")
    else:
        from benchlab.report import write_report

        with tempfile.TemporaryDirectory() as scratch:
            text = write_report(folder, scratch, plots=False, html=False).markdown.read_text(encoding="utf-8")
    return _to_html(_sections(text, _SECTIONS))


def comparison_markdown(comparison: Comparison) -> str:
    """The comparison as the report writes it: its comparison table over seeds, or its
    question-level section."""
    if comparison.questions is not None:
        from benchlab.report.questions import render_section

        return render_section(comparison.questions)
    from benchlab.report.markdown import comparison_rows
    from benchlab.report.tables import cell

    analysis = comparison.seeds
    assert analysis is not None
    rows = list(analysis.comparisons)
    if not rows:
        lines = ["No comparison could be made."]
    else:
        metric = rows[0].metric
        tasks = list(dict.fromkeys(r.task for r in rows))
        # The report's table writer reads the benchmark's goal, primary metric and task order.
        info = BenchmarkInfo(name="", primary=metric, goal={metric: comparison.goal}, baseline=rows[0].baseline,
                             configs=[], tasks=tasks)
        method = analysis.methods.diff_ci if analysis.methods is not None else "bootstrap"
        lines = [f"{cell(rows[0].candidate)} against the baseline **{cell(rows[0].baseline)}** on {cell(metric)}: "
                 f"mean diff is candidate − baseline ({'higher' if comparison.goal == 'max' else 'lower'} is an "
                 f"improvement) with its 95% CI ({method}).", "",
                 *comparison_rows(info, comparison.goal, rows)]
    if analysis.warnings:
        lines += ["", "Warnings from the analysis:", "", *(f"- {cell(w)}" for w in analysis.warnings)]
    return "\n".join(lines)


def comparison_html(comparison: Comparison) -> str:
    """:func:`comparison_markdown` as sanitized HTML."""
    return _to_html(comparison_markdown(comparison))
