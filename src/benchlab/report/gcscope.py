"""Fewer garbage collections while a report is made (:func:`collections_deferred`).

A report of 10,000 runs allocates some ten containers per run and per curve point group, and
imports pandas, scipy and matplotlib; with Python's default thresholds the collector ran ~500
times in the report's process and ~150 times in each figure worker, and each full collection
walked every object of the interpreter again. Measured in ``bench/report.py``
(docs/performance.md), those collections were about a second of the report's CPU time.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager

#: The youngest generation's threshold inside :func:`collections_deferred` (Python's default: 700).
YOUNG_THRESHOLD = 50_000

# Whether each open collections_deferred() froze, outermost first: an inner one freezes only
# where the outermost did, and leaves the unfreezing to it.
_open: list[bool] = []


@contextmanager
def collections_deferred() -> Iterator[None]:
    """Collect garbage less often inside the block; as before after it.

    Everything alive on entry (the imported modules, the caller's objects) is frozen
    (:func:`gc.freeze`) until the outermost block ends, so that a full collection meanwhile walks
    only what was made since; a process forked inside (the figure workers) inherits the freeze,
    so its collections do not walk, and copy, the pages it shares with this one either. The
    youngest generation is collected every :data:`YOUNG_THRESHOLD` allocations. Nothing that
    would be collected is kept: garbage cycles made inside are collected at the next collection,
    those among the frozen objects once the block ends.

    The caller's own choices stand: a process that froze objects itself (a server before forking
    its workers) keeps its freeze, and nothing is frozen or unfrozen here; with the collector
    disabled, or its threshold at 0 (collections only when asked), the threshold is left as is.
    """
    threshold = gc.get_threshold()
    outer = _open[0] if _open else None
    freeze = gc.isenabled() and (outer if outer is not None else gc.get_freeze_count() == 0)
    if freeze:
        gc.freeze()
    if threshold[0]:
        gc.set_threshold(max(threshold[0], YOUNG_THRESHOLD), *threshold[1:])
    _open.append(freeze)
    try:
        yield
    finally:
        _open.pop()
        gc.set_threshold(*threshold)
        if freeze and outer is None:
            gc.unfreeze()
