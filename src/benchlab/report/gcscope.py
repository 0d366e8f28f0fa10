"""Fewer garbage collections while a report is made (:func:`collections_deferred`).

A report of 10,000 runs allocates some ten containers per run, and imports pandas, scipy and
matplotlib; with Python's default thresholds the collector ran ~500 times in the report's process
and ~150 times in each figure worker, and each full collection walked every object of the
interpreter again: about a second of the report's CPU time on ``bench/report.py``'s folder
(docs/performance.md#report).
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from contextlib import contextmanager

#: The youngest generation's threshold inside :func:`collections_deferred` (Python's default: 700).
YOUNG_THRESHOLD = 50_000

# The open collections_deferred() blocks, in any thread, and what the collector was before the
# first of them: the last one to end puts it back.
_lock = threading.Lock()
_open = 0
_before: tuple[tuple[int, int, int], bool] = ((700, 10, 10), False)  # (threshold, whether we froze)


@contextmanager
def collections_deferred() -> Iterator[None]:
    """Collect garbage less often inside the block; as before once no such block is open.

    Everything alive on entry (the imported modules, the caller's objects) is frozen
    (:func:`gc.freeze`) until the last open block ends, so that a full collection meanwhile walks
    only what was made since; a process forked inside (the figure workers) inherits the freeze,
    so its collections do not walk, and copy, the pages it shares with this one either. The
    youngest generation is collected every :data:`YOUNG_THRESHOLD` allocations. Nothing that
    would be collected is kept: garbage cycles made inside are collected at the next collection,
    those among the frozen objects once the blocks end. Blocks may nest and overlap across
    threads: the collector is put back as it was when the last of them ends.

    The caller's own choices stand: a process that froze objects itself (a server before forking
    its workers) keeps its freeze, and nothing is frozen or unfrozen here; with the collector
    disabled, or its threshold at 0 (collections only when asked), the threshold is left as is.
    """
    global _open, _before
    with _lock:
        if _open == 0:
            threshold = gc.get_threshold()
            _before = (threshold, gc.isenabled() and gc.get_freeze_count() == 0)
            if threshold[0] and gc.isenabled():
                gc.set_threshold(max(threshold[0], YOUNG_THRESHOLD), *threshold[1:])
        if _before[1]:
            gc.freeze()  # a block opened inside another freezes what was made since
        _open += 1
    try:
        yield
    finally:
        with _lock:
            _open -= 1
            if _open == 0:
                threshold, froze = _before
                gc.set_threshold(*threshold)
                if froze:
                    gc.unfreeze()
