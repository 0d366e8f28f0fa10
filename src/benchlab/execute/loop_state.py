"""What the sweep's loop keeps while it runs: the attempts in flight, the counts its result
reports, and everything the loop's steps share (:class:`LoopState`)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from benchlab.execute.base import Backend, Outcome
from benchlab.execute.events import Progress
from benchlab.execute.launching import Launcher
from benchlab.execute.queue import Eta, RetryBudget, RunQueue
from benchlab.execute.record import Recorder
from benchlab.ledger import PlanRecorder, Store
from benchlab.plan import Run


def busy_share(intervals: dict[int, list[tuple[float, float]]], n_devices: int) -> float | None:
    """Busy device-seconds / available device-seconds.

    A device is busy while at least one run holds it (overlapping shares count once);
    available is ``n_devices`` x the span from the first GPU run's start to the last one's end.
    """
    spans = [iv for ivs in intervals.values() for iv in ivs]
    if not n_devices or not spans:
        return None
    first, last = min(a for a, _ in spans), max(b for _, b in spans)
    if last <= first:
        return None
    total = 0.0
    for ivs in intervals.values():
        end = float("-inf")
        for a, b in sorted(ivs):
            if a > end:
                total += b - a
                end = b
            elif b > end:
                total += b - end
                end = b
    return min(1.0, total / (n_devices * (last - first)))


@dataclass
class InFlight:
    """A launched attempt the sweep waits for."""

    run: Run
    number: int
    started: float  # monotonic clock at launch (for the ETA)
    gpus: list[int] | None = None  # the devices the backend placed it on at start


@dataclass
class Tally:
    """What the sweep's result reports, counted as the loop goes."""

    progress: Progress
    failed_runs: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    #: Device index -> (start, end) of each attempt that held it.
    busy: dict[int, list[tuple[float, float]]] = field(default_factory=dict)
    interrupted: int = 0

    def fail(self, run: Run) -> None:
        """A run failed for good (no retry left)."""
        self.progress.failed += 1
        self.failed_runs.append(run.name)

    def note_devices(self, outcome: Outcome, placed: list[int] | None) -> None:
        """The devices the attempt held (the outcome's word, else those ``placed`` at start) were busy."""
        for i in (outcome.gpus if outcome.gpus is not None else placed) or ():
            self.busy.setdefault(i, []).append((outcome.started, outcome.ended))


@dataclass
class LoopState:
    """Everything the loop's pieces share, for one sweep."""

    store: Store
    backend: Backend
    queue: RunQueue
    budget: RetryBudget
    plan: PlanRecorder  # records the plan in the ledger a step at a time, between launches
    eta: Eta
    tally: Tally
    recorder: Recorder  # what recording an ended attempt needs (metrics, shared provenance)
    launcher: Launcher  # starts an attempt: its ledger row, run directory, environment
    existing: set[str]  # runs with a directory at the start; the others' are written ahead of their launch
    lookahead: int
    inflight: dict[int, InFlight] = field(default_factory=dict)  # by attempt id
    lost: str | None = None  # what became of the ledger, once it is lost
    # Work for an ended run that nothing downstream waits for (its provenance.json), done once
    # the slot it freed has its next run: off the path from one run's end to the next one's start.
    after_launch: list[Callable[[], None]] = field(default_factory=list)
    pruned_at: float = 0.0  # when the feeder was last asked what to prune (monotonic)


class Later:
    """A value computed on a thread of its own; ``get()`` waits for it (or, if the thread
    failed, computes it again here so that the error surfaces in the caller)."""

    def __init__(self, make: Callable[[], Any]):
        self._make = make
        self._value: list[Any] = []
        self._thread = threading.Thread(target=self._work, daemon=True, name="benchlab-later")
        self._thread.start()

    def _work(self) -> None:
        try:
            self._value.append(self._make())
        except Exception:  # noqa: BLE001 - get() makes it again and the error is raised there
            pass

    def get(self) -> Any:
        if not self._value:
            self._thread.join()
        if not self._value:
            self._value.append(self._make())
        return self._value[0]
