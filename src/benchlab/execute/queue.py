"""The sweep's queue policy, as pure code: the order runs launch in, the retry budget of each
run, and the expected time left (ETA). Nothing here reads the ledger or starts a process; the
sweep feeds it what the ledger and the backend say, and the status model shares its ETA.
"""

from __future__ import annotations

import dataclasses
import itertools
import time
from collections import deque
from collections.abc import Callable, Collection, Iterable, Iterator, Sized
from dataclasses import dataclass, field
from operator import attrgetter

from benchlab import triage
from benchlab.plan import Run

_RESOURCES = attrgetter("resources")


def estimate_eta(left: Iterable[tuple[str, str, float | None]], estimates: dict[tuple[str, str], float],
                 now: float, *, slots: int | None = None, fallback: float | None = None) -> float | None:
    """Seconds until the runs ``left`` are done: the one ETA rule of ``benchlab run``'s progress,
    ``benchlab status`` and the dashboard.

    ``left`` holds each run still to finish as ``(task, config, started)``: ``started`` is when
    its running attempt began (on the clock of ``now``), None while it waits. A run's expected
    duration is its (task, config)'s estimate, else ``fallback``, else the mean of all estimates;
    a running one has done part of it already (never more than all of it). The work left is
    spread over ``slots`` runs at once (None: as many as run now), never over more runs than are
    left. None when some run's duration cannot be guessed (no estimate at all); 0 when nothing
    is left."""
    if fallback is None and estimates:
        fallback = sum(estimates.values()) / len(estimates)
    work, running, n = 0.0, 0, 0
    for task, config, started in left:
        n += 1
        expected = estimates.get((task, config), fallback)
        if expected is None:
            return None
        if started is not None:
            running += 1
            work += max(0.0, expected - (now - started))
        else:
            work += expected
    if not n:
        return 0.0
    parallel = running if slots is None else slots
    return work / max(1, min(parallel, n))


def order_queue(todo: deque[Run], estimates: dict[tuple[str, str], float]) -> None:
    """Longest expected first (known from earlier attempts), unknown durations first, wider
    requests first among equals: the order of :func:`benchlab.execute.placement.longest_first`,
    with the key computed once per (task, config, GPUs), not per run (a stable sort keeps
    submission order in ties)."""
    if len(todo) < 2 or not estimates:  # no duration known: every key is the same
        return
    # A stable sort by key, as buckets: each run joins the bucket of its key, in queue order, and
    # the buckets follow each other in key order (a few keys, not 100,000 comparisons). Each
    # (task, config, GPUs) is looked up once per run, straight to its bucket's append.
    adders: dict[tuple[str, str, float], Callable[[Run], None]] = {}
    buckets: dict[tuple[int, float, float], list[Run]] = {}
    for r in todo:
        k = (r.task, r.config, r.resources.gpus)
        add = adders.get(k)
        if add is None:
            e = estimates.get((r.task, r.config))
            found = (0, 0.0, 0.0) if e is None else (1, -e, -r.resources.gpus)
            bucket = buckets.get(found)
            if bucket is None:
                bucket = buckets[found] = []
            add = adders[k] = bucket.append
        add(r)
    todo.clear()
    for found in sorted(buckets):
        todo.extend(buckets[found])


class _Replanner:
    """Re-orders the queue after new duration estimates, spacing the sorts so that they never
    take more than ``share`` of the sweep's time: every (task, config)'s first result brings
    one, and a sort of 100,000 queued runs costs tens of milliseconds."""

    def __init__(self, share: float = 0.05):
        self.share = share
        self.due = False
        self._next = 0.0

    def mark(self) -> None:
        self.due = True

    def maybe(self, todo: deque[Run], estimates: dict[tuple[str, str], float]) -> None:
        if not self.due or time.monotonic() < self._next:
            return
        t = time.perf_counter()
        order_queue(todo, estimates)
        cost = time.perf_counter() - t
        self.due = False
        self._next = time.monotonic() + cost / self.share


def _budget_left(run: Run, charged: dict[str, int]) -> Callable[[str], bool]:
    """Whether one more failure of a class, on top of those ``charged`` so far, leaves ``run`` a retry."""
    return lambda failure_class: charged.get(failure_class, 0) < run.retries_for(failure_class)


def for_retry(run: Run, failure_class: str) -> Run:
    """The run as its next attempt should be launched: an out-of-memory run that shared a device
    gets a whole one to itself (the other runs on its device may have been what filled it)."""
    if failure_class == triage.OOM and 0 < run.resources.gpus < 1:
        return dataclasses.replace(run, resources=run.resources.model_copy(update={"gpus": 1.0}))
    return run




class RunQueue:
    """The runs still to launch, in launch order.

    Longest expected first (:func:`order_queue`), re-ordered when a (task, config) gets its first
    duration; a retry goes to the front. ``estimates`` are the expected durations per
    (task, config), from earlier attempts and from this sweep's.
    """

    def __init__(self, runs: Iterable[Run], estimates: dict[tuple[str, str], float]):
        self.runs: deque[Run] = deque(runs)
        self.estimates = estimates
        self._replan = _Replanner()

    def __len__(self) -> int:
        return len(self.runs)

    def __iter__(self) -> Iterator[Run]:
        return iter(self.runs)

    def ahead(self, n: int) -> Iterator[Run]:
        """The next ``n`` runs to launch."""
        return itertools.islice(self.runs, n)

    def order(self) -> None:
        order_queue(self.runs, self.estimates)

    def maybe_reorder(self) -> None:
        """Re-order if new estimates came in, spaced out (see :class:`_Replanner`)."""
        self._replan.maybe(self.runs, self.estimates)

    def learn(self, run: Run, duration: float) -> None:
        """A completed attempt's duration; the first of its (task, config) re-plans the queue."""
        key = (run.task, run.config)
        if key not in self.estimates:
            self.estimates[key] = duration
            self._replan.mark()

    def take_first(self, fits: Callable[[Run], bool]) -> Run | None:
        """Remove and return the first run in queue order that ``fits`` now (None: none does).

        The others keep their order, so a long run that waits for a whole device stays ahead
        of shorter ones that pass it."""
        pick = next((i for i, r in enumerate(self.runs) if fits(r)), None)
        if pick is None:
            return None
        run = self.runs[pick]
        del self.runs[pick]
        return run

    def remove_ids(self, run_ids: set[str]) -> None:
        """Take these runs out of the queue (re-attached to, not launched)."""
        self.runs = deque(r for r in self.runs if r.run_id not in run_ids)

    def retry_first(self, run: Run) -> None:
        self.runs.appendleft(run)

    def clear(self) -> None:
        self.runs.clear()

    def remove_never_fitting(self, why_never: Callable[[Run], str | None],
                             among: Collection[Run] | None = None) -> list[tuple[Run, str]]:
        """Remove the runs that ``why_never`` gives a reason for; returns them with the reasons.

        ``among``, when given, holds every queued run (and maybe others): the runs to ask about,
        in an order cheaper to go through than the queue's (the plan's, at the start)."""
        # The answer rests on a run's resources, which the runs of a config share: asked once per
        # resources object, of one run that holds it (the runs keep the objects, and so their
        # ids, alive), not 100,000 times; the queue is gone through again only if a run must go.
        asked: Collection[Run] = self.runs if among is None else among
        holders = dict(zip(map(id, map(_RESOURCES, asked)), asked, strict=True))
        reasons = {key: reason for key, run in holders.items() if (reason := why_never(run)) is not None}
        if not reasons:
            return []
        removed: list[tuple[Run, str]] = []
        kept: deque[Run] = deque()
        for run in self.runs:
            reason = reasons.get(id(run.resources))
            if reason is None:
                kept.append(run)
            else:
                removed.append((run, reason))
        self.runs = kept
        return removed


@dataclass
class RetryBudget:
    """Failures charged to each run's retry budget so far, by failure class (run id -> class -> n),
    counted from the ledger over the run's whole life and on through this sweep."""

    charged: dict[str, dict[str, int]]

    def allows_another(self, run: Run) -> Callable[[str], bool]:
        """Whether one more failure of a class, on top of those charged so far, leaves ``run`` a retry."""
        return _budget_left(run, self.charged.get(run.run_id, {}))

    def charge(self, run: Run, failure_class: str) -> bool:
        """Charge one failure of ``failure_class`` to ``run``; whether it is retried."""
        counts = self.charged.setdefault(run.run_id, {})
        counts[failure_class] = counts.get(failure_class, 0) + 1
        return counts[failure_class] <= run.retries_for(failure_class)


@dataclass
class Eta:
    """The expected time left: every queued and running run's expected duration, spread over the
    slots. A run's expected duration is its (task, config)'s estimate, else the mean duration
    of this sweep's completed runs, else the mean of all estimates."""

    estimates: dict[tuple[str, str], float]
    jobs: int
    durations: list[float] = field(default_factory=list)
    value: float | None = None
    computed_at: float = float("-inf")  # monotonic
    every_s: float = 0.5

    def record(self, duration: float) -> None:
        """A completed run's duration."""
        self.durations.append(duration)

    def expected(self, run: Run) -> float | None:
        est = self.estimates.get((run.task, run.config))
        if est is not None:
            return est
        if self.durations:
            return sum(self.durations) / len(self.durations)
        return sum(self.estimates.values()) / len(self.estimates) if self.estimates else None

    def get(self, queue: Iterable[Run], inflight: Iterable[tuple[Run, float]],
            now: float | None = None) -> float | None:
        """Seconds left (None: some run's duration cannot be guessed yet). ``inflight``: each
        running run with its start on the monotonic clock; ``now`` on that clock [default: now]."""
        # O(queue) per call: recompute at most twice a second, and never for more than 2% of
        # the time (a 100,000-run queue takes tens of milliseconds).
        now_m = time.monotonic() if now is None else now
        queued = queue if isinstance(queue, Sized) else list(queue)
        if len(queued) and now_m - self.computed_at < self.every_s:
            return self.value
        t = time.perf_counter()
        fallback = sum(self.durations) / len(self.durations) if self.durations else None
        left = itertools.chain(((r.task, r.config, None) for r in queued),
                               ((r.task, r.config, started) for r, started in inflight))
        self.value = estimate_eta(left, self.estimates, now_m, slots=self.jobs, fallback=fallback)
        self.computed_at = now_m
        self.every_s = max(0.5, 50 * (time.perf_counter() - t))
        return self.value
