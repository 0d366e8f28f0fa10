"""The search report: ``SEARCH_REPORT.md`` and its plots, from a study's summary (written by
:mod:`benchlab.report.search`, which also renders the study's section of ``report.html``).

Written into ``<study folder>/report/`` (or a folder given): the best params and value with the
trial's runs, the trials table, the optimisation history, the params' importances, a slice plot
(the value against each param), the pruned trials' curves and what pruning saved. Figures are
drawn like the benchmark report's (matplotlib, Agg, the same colours).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from benchlab.report.search import draw_search_plots, search_markdown
from benchlab.search.summary import summarize_study

REPORT_NAME = "SEARCH_REPORT.md"


@dataclass
class SearchReportFiles:
    """What ``write_search_report`` wrote."""

    folder: Path
    markdown: Path
    plots: list[Path] = field(default_factory=list)


def write_search_report(study_folder: Path | str, out: Path | str | None = None) -> SearchReportFiles:
    """Write ``SEARCH_REPORT.md`` and its plots for the study in ``study_folder``."""
    summary = summarize_study(study_folder)
    folder = Path(out) if out is not None else Path(study_folder) / "report"
    plots_dir = folder / "plots"
    plots_dir.mkdir(parents=True, exist_ok=True)
    plots = draw_search_plots(summary, plots_dir)
    text = search_markdown(summary, [p.relative_to(folder) for p in plots])
    md = folder / REPORT_NAME
    tmp = md.with_suffix(".md.tmp")
    tmp.write_text(text, encoding="utf-8")
    tmp.replace(md)
    return SearchReportFiles(folder, md, plots)
