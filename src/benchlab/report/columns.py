"""The columns of a config's numbers, declared once.

Every table that shows one row per config of a task (BENCHMARK_REPORT.md's results tables, the
dashboard's, ``benchlab analyze``'s "Per task and config") renders the columns of
:data:`COLUMNS` over a :class:`~benchlab.stats.analysis.SummaryRow`, the row
:mod:`benchlab.stats` computed: a column here is a header and the text of its cell, never a
number of its own. A new column is one entry here over a field of the summary row (see
"Adding a statistic" in ``docs/architecture.md``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from benchlab.report.tables import fmt, fmt_at, mean_pm, places
from benchlab.stats.analysis import SummaryRow


@dataclass(frozen=True)
class Column:
    """A column of a config's numbers: its name, its header (``{metric}`` is the metric's name,
    empty where the table names it elsewhere), the text of its cell for a summary row, how a
    Markdown table aligns it, and whether it holds numbers."""

    name: str
    header: str
    cell: Callable[[SummaryRow], str]
    align: str = "---:"
    numeric: bool = True
    #: Shown only where the metric was analysed in full (its rows carry intervals).
    needs_interval: bool = False

    def title(self, metric: str = "") -> str:
        """The header, with the metric's name where it has a place for it."""
        return self.header.format(metric=metric).strip()


def precision(row: SummaryRow) -> int | None:
    """The decimal places a row's numbers are shown to: what the half-width of its interval
    supports (:func:`benchlab.report.tables.places`), else its std's, else its evaluation's
    standard error's (one seed)."""
    if row.n == 1 and row.stderr is not None:
        return places(row.stderr.se)
    half = _half(row)
    return places(half) if half else places(row.std if row.n > 1 else None)


def _half(row: SummaryRow) -> float | None:
    lo, hi = row.ci_low, row.ci_high
    return (hi - lo) / 2 if lo is not None and hi is not None else None


def seeds_cell(row: SummaryRow) -> str:
    """``completed/planned`` and what was lost (``3/4 (1 failed)``); n where nothing was counted."""
    seeds = row.seeds
    if seeds is None or not seeds.counted:
        return str(row.n)
    notes = []
    if seeds.failed_seeds:
        notes.append(f"{len(seeds.failed_seeds)} failed")
    if seeds.missing_seeds:
        notes.append(f"{len(seeds.missing_seeds)} missing")
    text = f"{seeds.completed}/{seeds.planned}"
    return text + (f" ({', '.join(notes)})" if notes else "")


def mean_std_cell(row: SummaryRow) -> str:
    """``mean ± std`` to the precision the interval supports; a one-seed result with its
    evaluation's standard error as ``mean ± se (s.e.)``; ``no completed seed`` where none did."""
    if row.n == 0:
        return "no completed seed"
    if row.n == 1 and row.stderr is not None:
        at = precision(row)
        return f"{fmt_at(row.mean, at)} ± {fmt_at(row.stderr.se, at)} (s.e.)"
    return mean_pm(row.mean, row.std if row.n > 1 else None, _half(row))


def ci_cell(row: SummaryRow) -> str:
    """The 95% CI ``[low, high]`` (cut at the metric's range), the evaluation's own interval of a
    one-seed result, or why there is none."""
    if row.n == 1 and row.stderr is not None:
        at = precision(row)
        return f"[{fmt_at(row.stderr.low, at)}, {fmt_at(row.stderr.high, at)}] ({row.stderr.label})"
    if row.ci_low is None or row.ci_high is None:
        return "— (one seed)" if row.n == 1 else "—"
    at = precision(row)
    return f"[{fmt_at(row.ci_low, at)}, {fmt_at(row.ci_high, at)}]"


def _at_precision(value: float | None, row: SummaryRow) -> str:
    if row.n == 0:
        return "—"
    at = precision(row)
    return fmt_at(value, at) if at is not None else fmt(value)


#: The columns of a config's numbers, in the order every table shows them.
COLUMNS: tuple[Column, ...] = (
    Column("seeds", "seeds", seeds_cell, numeric=False),
    Column("mean_std", "{metric} mean ± std", mean_std_cell, align="---"),
    Column("ci", "95% CI", ci_cell, align="---", needs_interval=True),
    Column("min", "min", lambda r: _at_precision(r.min, r)),
    Column("max", "max", lambda r: _at_precision(r.max, r)),
    # An IQR column (``Column("iqr", "IQR", lambda r: _at_precision(r.iqr, r))``) reaches every
    # table with this one line and no other change (the tests read cells by their headers); it is
    # not shown, so that the tables stay as narrow as they were.
)


def shown(has_interval: bool) -> tuple[Column, ...]:
    """The columns a table shows: those needing an interval only where there is one."""
    return tuple(c for c in COLUMNS if has_interval or not c.needs_interval)


def secondary_cell(row: SummaryRow | None) -> str:
    """A secondary metric's cell beside the primary's columns: ``mean ± std``, or ``—``."""
    return "—" if row is None else mean_pm(row.mean, row.std)


__all__ = ["COLUMNS", "Column", "ci_cell", "mean_std_cell", "precision", "secondary_cell", "seeds_cell", "shown"]
