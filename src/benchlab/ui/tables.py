"""The report's tables as the dashboard shows them: those ``benchlab report`` kept while they are
current, else computed by the report's own functions; and the one loader of what they compute
with.

What a page shows of a benchmark's statistics is a :class:`~benchlab.names.report_tables.ReportNumbers`
(:mod:`benchlab.names.report_tables`), taken from ``report-tables.json`` while its key is the
folder's key now (:func:`current_key`), from the first-tables worker on the same terms
(:mod:`benchlab.ui.first_tables`), or computed here (:func:`computed_numbers`). This module
imports nothing heavy itself, so that the worker, which runs it in a process of its own, starts
computing at once.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import TYPE_CHECKING

from benchlab.ledger import Store
from benchlab.names import report_tables
from benchlab.names.report_tables import NumbersKey, ReportNumbers
from benchlab.names.results_files import report_tables_file
from benchlab.results import tables_key

if TYPE_CHECKING:
    from benchlab.ui.first_tables import FirstTables


#: What the curves compute with: the statistics' curve alignment and the report's palette.
CURVES_MODULES = ("benchlab.stats.curves", "benchlab.report.style")
#: What the report's tables compute with too (pandas, scipy, the report, the statistics), in the
#: order the warm-up imports them: the curves' first.
ANALYSIS_MODULES = (*CURVES_MODULES, "pandas", "benchlab.collect.samples", "benchlab.evalrules",
                    "benchlab.history.merge", "benchlab.report.writer", "benchlab.report.markdown",
                    "benchlab.report.numbers", "benchlab.report.questions", "benchlab.stats.results_analysis")

_loading = threading.Lock()
_loaded: set[str] = set()


def load_modules(names: tuple[str, ...]) -> None:
    """Import ``names``, one module at a time and one thread at a time.

    The dashboard serves each request on a thread of its own while its warm-up thread loads the
    statistics, and two threads must not be inside these imports at once: where a package's
    modules import each other in a cycle (third-party ones do), two threads entering it from two
    of them each wait on the other's module lock, and CPython hands one of them a
    half-initialised module (``ImportError: ... partially initialized module``; a curves request
    met it through ``benchlab.stats`` when that package's ``__init__`` still imported all its
    modules). A module at a time, so that a page waits for one module of the warm-up's at most;
    every view that computes imports through here first, and the views' other imports are this
    module's own, made when the dashboard starts. A test checks that computing afterwards
    imports nothing more of note.
    """
    import importlib

    for name in names:
        if name in _loaded:
            continue
        with _loading:
            if name not in _loaded:
                importlib.import_module(name)
                _loaded.add(name)


def load_analysis() -> None:
    """Import what the report's tables and the curves compute with (:data:`ANALYSIS_MODULES`):
    about a second of CPU, paid once (:func:`load_modules`)."""
    load_modules(ANALYSIS_MODULES)


def current_key(folder: Path) -> NumbersKey:
    """The key of ``folder``'s tables as the folder is now, with the dashboard's options (the
    report's defaults): the ledger's content digest (about 0.1 s at 10,000 runs) and the record
    files' signature."""
    with Store.open(folder, read_only=True) as store:
        digest = store.content_digest()
    return tables_key(folder, digest)


def kept_numbers(folder: Path, key: NumbersKey | None = None) -> ReportNumbers | None:
    """The report's tables as ``benchlab report`` wrote them into ``folder`` (``report-tables.json``),
    when they were computed from the folder as it is now (``key``: :func:`current_key`, taken
    here when not given); else None. Reads the ledger's content digest and one small file: no
    statistics are loaded."""
    path = report_tables_file(folder)
    if not path.is_file():  # never reported: no digest to take
        return None
    return report_tables.read(path, key if key is not None else current_key(folder))


def _computed(folder: Path, *, keyed: bool) -> tuple[ReportNumbers, NumbersKey | None] | None:
    load_analysis()
    from benchlab.report import analyze, gather
    from benchlab.report.numbers import report_numbers as render
    from benchlab.report.questions import question_analysis, render_section
    from benchlab.results import read

    # The page shows no search section and no figure, and keeps nothing under the ledger's digest.
    table = read(folder, searches=False, curves=False, keyed=keyed)
    # The key before the records are read (tables_key looks at them now), as the report takes it.
    key = tables_key(folder, table.ledger_digest) if table.ledger_digest is not None else None
    data = gather(table)
    if data.finals.empty and not data.failed_runs:
        return None
    data = analyze(data)
    found = question_analysis(folder, data.info, data.run_ids)
    return render(data, render_section(found) if found is not None else ""), key


def computed_numbers(folder: Path) -> ReportNumbers | None:
    """The report's tables of ``folder`` computed now by the report's functions; None before any
    run completed or failed.

    ``results.read`` reads the results table and the ledger's seeds and failures, and
    ``report.gather`` takes it; ``report.analyze`` has ``stats`` compute the one analysis the
    report renders, with its defaults (2,000 bootstrap resamples, seed 0, failed seeds excluded),
    and :func:`benchlab.report.numbers.report_numbers` renders it as the report does.
    """
    computed = _computed(folder, keyed=False)
    return computed[0] if computed is not None else None


def keyed_numbers(folder: Path) -> tuple[ReportNumbers, NumbersKey] | None:
    """:func:`computed_numbers` with the key of what they were computed from (the ledger's content
    digest taken before the read: a run landing meanwhile moves the folder past it)."""
    computed = _computed(folder, keyed=True)
    if computed is None or computed[1] is None:
        return None
    return computed[0], computed[1]


def report_numbers(folder: Path, first: FirstTables | None = None) -> ReportNumbers | None:
    """The results tables, comparisons and leaderboard of ``benchlab report`` for ``folder`` as it
    is now: those the report kept, while they are current (:func:`kept_numbers`), else those the
    dashboard's first worker computed (``first``: :mod:`benchlab.ui.first_tables`) while they are
    current, else computed again (:func:`computed_numbers`)."""
    if first is None and not report_tables_file(folder).is_file():
        return computed_numbers(folder)
    key = current_key(folder)
    kept = kept_numbers(folder, key)
    if kept is None and first is not None:
        kept = first.take(folder, key)
    return kept if kept is not None else computed_numbers(folder)
