"""What a sweep tells its caller as it goes: :class:`SweepEvent` objects of a few kinds
(:class:`EventKind`), each with the :class:`Progress` counts at that moment; how it ended
(:class:`SweepResult`); and what a caller may feed it runs through (:class:`Feeder`). The library never
prints; the command line's progress bar, the search driver and a Python caller read these."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from benchlab.ledger import COMPLETED
from benchlab.plan import Run

if TYPE_CHECKING:
    from benchlab.ledger import FlaggedPair


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

    @property
    def completed(self) -> bool:
        """Whether the run this event finished completed (a ``FINISH`` of a run that failed, or any
        other kind of event, is not)."""
        return self.status == COMPLETED


@dataclass
class SweepResult:
    """How a sweep ended."""

    results_dir: Path
    total: int
    completed: int
    failed: int
    skipped: int
    interrupted: int
    stopped: bool
    wall_s: float
    failed_runs: list[str] = field(default_factory=list)
    #: (task, config) pairs that failed on every seed.
    flagged: list[FlaggedPair] = field(default_factory=list)
    #: Busy device-seconds / available device-seconds over the sweep's launches (None: no GPUs).
    gpu_busy_share: float | None = None
    gpus: list[int] = field(default_factory=list)  # the devices the sweep could use
    warnings: list[str] = field(default_factory=list)
    #: Mean utilisation (percent) of the devices runs held, from the GPU sampler (None: not sampled).
    gpu_util_mean: float | None = None
    pruned: int = 0

    @property
    def pending(self) -> int:
        """Runs of the plan this sweep left without an outcome (stopped before it launched them)."""
        return max(0, self.total - self.completed - self.failed - self.skipped - self.interrupted - self.pruned)

    @property
    def exit_code(self) -> int:
        if self.stopped:
            return 130
        return 1 if self.failed else 0


class Feeder(Protocol):
    """Hands a sweep its runs as slots free up, and names runs to stop early: what
    ``benchlab search`` plugs into the sweep (its trials are asked for one at a time).

    A sweep with a feeder starts with no plan; each run ``more`` returns joins the plan (the
    ledger's runs in the spec). Runs already completed or pruned are not run again: they are
    reported as ``finish`` events with attempt 0. A run ``to_prune`` names is killed (its
    process group, through the backend's ``cancel``) or dropped from the queue, and recorded
    as ``pruned``: not a failure, never retried.
    """

    #: Seconds between calls of ``to_prune`` while runs are in flight (None: it is never called).
    poll_s: float | None

    def more(self, free: int) -> list[Run]:
        """Runs to add now that ``free`` slots are idle (an empty list: none for now)."""

    def to_prune(self) -> dict[str, str]:
        """Run id -> why it is pruned, for runs queued or in flight that are to stop now."""
