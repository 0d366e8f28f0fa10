"""Reports: BENCHMARK_REPORT.md, BENCHMARKS.md, results.csv, plots/ and report.html.

:mod:`~benchlab.report.writer` assembles them (``write_report``, ``gather``, ``analyze``):
:mod:`benchlab.stats` computes every number once and each writer renders it
(:mod:`~benchlab.report.markdown`, :mod:`~benchlab.report.leaderboard`,
:mod:`~benchlab.report.plots`, :mod:`~benchlab.report.html`, ...). What each file holds is
described in ``docs/reports.md``.
"""

from typing import TYPE_CHECKING

from benchlab.names.exports import export_lazily

if TYPE_CHECKING:
    from benchlab.report.leaderboard import status
    from benchlab.report.writer import DEFAULT_REPS, ReportData, ReportFiles, analyze, gather, leaderboard, write_report

#: Where each public name lives: the package imports none of its modules until a name is asked
#: for (:func:`benchlab.names.exports.export_lazily` says why), so that the dashboard's threads
#: can import the report's palette and its tables' modules at once.
_WHERE = {
    "DEFAULT_REPS": "benchlab.report.writer",
    "ReportData": "benchlab.report.writer",
    "ReportFiles": "benchlab.report.writer",
    "analyze": "benchlab.report.writer",
    "gather": "benchlab.report.writer",
    "leaderboard": "benchlab.report.writer",
    "write_report": "benchlab.report.writer",
    "status": "benchlab.report.leaderboard",
}
export_lazily(__name__, _WHERE)

__all__ = ["DEFAULT_REPS", "ReportData", "ReportFiles", "analyze", "gather", "leaderboard", "status",
           "write_report"]
