"""What a sweep tells its caller as it goes: :class:`SweepEvent` objects of a few kinds
(:class:`EventKind`), each with the :class:`Progress` counts at that moment. The library never
prints; the command line's progress bar, the search driver and a Python caller read these."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from benchlab.plan import Run


class EventKind(StrEnum):
    """The kinds of :class:`SweepEvent`. A ``StrEnum``: each equals its lower-case name, so a
    caller written against the names (``event.kind == "finish"``) reads them unchanged."""

    #: The plan is known, before any run starts (``progress`` holds its counts).
    BEGIN = "begin"
    #: An attempt of ``run`` started (number ``attempt``).
    START = "start"
    #: ``run`` is done for this sweep: ``status`` says how (completed, failed, interrupted, pruned);
    #: attempt 0 for a run found done already (a feeder asked for it again).
    FINISH = "finish"
    #: An attempt of ``run`` failed and the run is queued again (its budget allows it).
    RETRY = "retry"
    #: Something the user should know (``error`` holds its text; ``run`` may be None).
    WARNING = "warning"


@dataclass
class Progress:
    """Counts over the runs of this sweep's plan."""

    total: int
    completed: int = 0
    failed: int = 0
    running: int = 0
    skipped: int = 0  # already completed before this sweep
    eta_s: float | None = None
    pruned: int = 0  # stopped early by a search's pruner (not failures)

    @property
    def finished(self) -> int:
        return self.completed + self.failed + self.skipped + self.pruned


@dataclass
class SweepEvent:
    """Something that happened in a sweep (see :class:`EventKind` for what each kind carries)."""

    kind: EventKind
    run: Run | None
    attempt: int
    progress: Progress
    status: str | None = None
    value: float | None = None
    metric: str | None = None
    duration: float | None = None
    failure_class: str | None = None
    error: str | None = None
