"""Where a results folder stands: the one status model ``benchlab status`` prints and the
dashboard shows.

Both readers used to derive it each their own way, the dashboard with an ETA the command did
not have. Here it is decided once: the counts by state as a reader should show them (the
"running" of a sweep that is gone counts as interrupted, :mod:`benchlab.execute.liveness`),
the benchmark's state, one ETA, and, for the command, the runs in flight, the failures grouped
by what went wrong and the rest of what ``benchlab status`` lists.

Kept light: ``benchlab status`` runs again and again from a second shell, so nothing here
loads numpy, pandas or the spec's models.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from benchlab.errors import UsageError
from benchlab.execute.liveness import SweepLiveness, as_seen, counts_as_seen, sweep_liveness
from benchlab.ledger import COMPLETED, FAILED, INTERRUPTED, PARTIAL_NOTE_PREFIX, PENDING, RUNNING, Status, Store
from benchlab.names.results_files import LEDGER_FILE

if TYPE_CHECKING:
    from benchlab.ledger import (
        AttemptRecord,
        FlaggedPair,
        GpuUse,
        OpenRun,
        Placement,
        PlanProgress,
        RunRecord,
        SequentialRecord,
    )
    from benchlab.names.benchmark_info import BenchmarkInfo
    from benchlab.triage import FailureGroup

#: The run states in the order ``benchlab status`` gives their counts.
COUNTS_ORDER: tuple[Status, ...] = (COMPLETED, RUNNING, PENDING, FAILED, INTERRUPTED)

#: The benchmark's state, as the dashboard's first page and ``status --json`` give it.
STATE_RUNNING = "running"
STATE_DONE = "done"
STATE_FAILED = "failed runs"
STATE_STOPPED = "stopped"
STATE_EMPTY = "empty"


@dataclass(frozen=True)
class FailureGroupView:
    """A group of failed runs (same class, same error), with the flagged (task, config) pairs whose
    every run is in it: said once, with the group, not again on a line of their own."""

    group: FailureGroup
    flagged: list[FlaggedPair]


@dataclass(frozen=True)
class StatusDetail:
    """What ``benchlab status`` lists beyond the summary: every run, what is in flight, failures."""

    runs: dict[str, RunRecord]  # the runs in the spec, by id, in plan order
    outside: list[RunRecord]  # runs kept in the ledger that the spec no longer names
    outside_counts: dict[str, int]
    running: list[AttemptRecord]  # attempts in flight (none when the sweep is gone)
    placed: dict[int, Placement]  # a cluster scheduler's view of them, by attempt id
    failures_by_class: dict[str, list[AttemptRecord]]  # the last attempt of each failed run
    groups: list[FailureGroupView]
    flagged: list[FlaggedPair]  # (task, config) pairs whose every run failed
    members: dict[tuple[str, str], list[str]]  # run ids of each (task, config)
    partial: list[AttemptRecord]  # completed runs noted as partial (lm-eval's --limit)
    gpu_attempts: list[tuple[str, AttemptRecord]]
    sequential: SequentialRecord | None
    recording: PlanProgress | None  # a plan recorded part-way (Store.plan_recording)
    backups: list[Path]
    leftovers: list[Path]  # files of a ledger rebuild, running or killed
    rebuilding: str | None  # who rebuilds the ledger now, if one does

    def not_in_spec(self) -> list[tuple[RunRecord, str]]:
        """Each run not in the spec with why: its definition changed (the spec still names its task,
        config and seed: "superseded"), or the spec no longer names it ("removed")."""
        coords = {(r.task, r.config, r.seed) for r in self.runs.values()}
        return [(r, "superseded" if (r.task, r.config, r.seed) in coords else "removed") for r in self.outside]


@dataclass(frozen=True)
class FolderStatus:
    """A results folder as a reader should show it, read at ``as_of``."""

    folder: Path
    benchmark: BenchmarkInfo | None  # None before a sweep recorded one
    counts: dict[str, int]  # runs in the spec by state, as seen (see the module's docstring)
    total: int
    state: str  # running | done | failed runs | stopped | empty
    eta_s: float | None  # seconds until the runs left are done; only while the sweep runs
    liveness: SweepLiveness | None  # None when the ledger shows nothing running: nothing to judge
    left_running: int  # attempts the ledger says are running but whose sweep is gone
    last_activity: float | None
    gpu_uses: list[GpuUse | None]  # of each run placed on GPUs (its latest attempt)
    as_of: float
    detail: StatusDetail | None = field(default=None)

    @property
    def name(self) -> str:
        return self.benchmark.name if self.benchmark is not None else self.folder.name

    @property
    def description(self) -> str:
        return self.benchmark.description if self.benchmark is not None else ""

    @property
    def finished(self) -> int:
        return self.counts.get(COMPLETED, 0) + self.counts.get(FAILED, 0)

    @property
    def progress(self) -> float:
        return self.finished / self.total if self.total else 0.0

    @property
    def sweep_gone(self) -> bool:
        return self.liveness is not None and self.liveness.is_gone

    def seen(self, status: str) -> str:
        """A run's ledger status as this folder's readers show it (see :func:`as_seen`)."""
        return status if self.liveness is None else as_seen(status, self.liveness)


def benchmark_state(counts: dict[str, int]) -> str:
    """The benchmark's state from its counts as seen: running while a run runs; empty without runs;
    "failed runs" when nothing is left to run and some failed; done when every run completed;
    else stopped (runs left, none running)."""
    total = sum(counts.values())
    if counts.get(RUNNING):
        return STATE_RUNNING
    if total == 0:
        return STATE_EMPTY
    if counts.get(FAILED) and not counts.get(PENDING) and not counts.get(INTERRUPTED):
        return STATE_FAILED
    if counts.get(COMPLETED, 0) == total:
        return STATE_DONE
    return STATE_STOPPED


def estimate_eta(open_runs: Iterable[OpenRun], durations: dict[tuple[str, str], float],
                 now: float) -> float | None:
    """Seconds until the runs left are done, by the sweep's own rule
    (:func:`benchlab.execute.queue.estimate_eta`): each run's expected duration (the mean of its
    (task, config)'s completed attempts, else of all) less what a running one has done, over the
    runs running side by side. None before any attempt completed (nothing to expect from)."""
    from benchlab.execute.queue import estimate_eta as eta

    left = ((r.task, r.config, r.started if r.status == RUNNING else None) for r in open_runs)
    return eta(left, durations, now) if durations else None


def duration_text(seconds: float | None) -> str:
    """A duration as both readers print an ETA: ``45s``, ``12m05s``, ``3h07m``; "—" when unknown."""
    if seconds is None:
        return "—"
    s = int(round(seconds))
    h, rest = divmod(s, 3600)
    m, sec = divmod(rest, 60)
    return f"{h}h{m:02d}m" if h else (f"{m}m{sec:02d}s" if m else f"{sec}s")


def status(folder: Path | str, *, detail: bool = True, read_only: bool | None = None) -> FolderStatus:
    """Where ``folder`` stands. ``detail=False`` reads only the summary (counts, state, ETA, last
    activity, GPU use): what a page listing many benchmarks needs, milliseconds at 10,000 runs.
    ``read_only`` as :meth:`Store.open` takes it (the dashboard never writes)."""
    folder = Path(folder)
    with Store.open(folder, read_only=read_only) as store:
        benchmark = store.benchmark()
        counts = store.counts()
        last_activity = store.last_activity()
        gpu_attempts = store.gpu_attempts()
        attempts = store.attempts() if detail else []
        every = store.runs(current_only=False) if detail else []
        runs = {r.run_id: r for r in every if r.in_spec}
        running = [a for a in attempts if a.status == RUNNING and a.run_id in runs]
        liveness = sweep_liveness(folder) if running or counts.get(RUNNING) else None
        left_running = 0
        if liveness is not None and liveness.is_gone:
            left_running = len(running)
            counts = counts_as_seen(counts, liveness)
            running = []
        now = time.time()
        eta = estimate_eta(store.open_runs(), store.durations(), now) if counts.get(RUNNING) else None
        if detail:
            more = _detail(folder, store, every, runs, attempts, running, gpu_attempts)
    return FolderStatus(folder, benchmark, counts, sum(counts.values()), benchmark_state(counts), eta, liveness,
                        left_running, last_activity, [a.gpu_use for _, a in gpu_attempts], now,
                        more if detail else None)


def _detail(folder: Path, store: Store, every: list[RunRecord], runs: dict[str, RunRecord],
            attempts: list[AttemptRecord], running: list[AttemptRecord],
            gpu_attempts: list[tuple[str, AttemptRecord]]) -> StatusDetail:
    from benchlab.ledger import ledger_backups, lock_holder, rebuild_leftovers
    from benchlab.names.failures import failed_runs
    from benchlab.triage import flag_configs, group_failures

    placed = store.placements(a.attempt_id for a in attempts if a.status == RUNNING)
    outside = [r for r in every if not r.in_spec]
    outside_counts: dict[str, int] = {}
    for r in outside:
        outside_counts[r.status] = outside_counts.get(r.status, 0) + 1
    last: dict[str, AttemptRecord] = {}
    for a in attempts:
        last[a.run_id] = a
    flagged = flag_configs(runs.values(), attempts)
    leftovers = rebuild_leftovers(folder)
    rebuilding = lock_holder(folder) if leftovers else None
    if rebuilding is not None and "rebuild" not in rebuilding:
        rebuilding = None
    failures = [f.last for f in failed_runs(runs.values(), attempts) if f.last is not None]
    # Completed runs whose note says they are partial (lm-eval's --limit; collect/lm_eval.py PARTIAL).
    partial = [last[rid] for rid, r in runs.items() if r.status == COMPLETED and rid in last
               and (last[rid].error or "").startswith(PARTIAL_NOTE_PREFIX)]
    by_class: dict[str, list[AttemptRecord]] = {}
    for a in failures:
        by_class.setdefault(a.failure_class or "unknown", []).append(a)
    groups = group_failures(failures)
    # A flagged (task, config) whose every run is in one group is that group's problem.
    members: dict[tuple[str, str], list[str]] = {}
    for rid, r in runs.items():
        members.setdefault((r.task, r.config), []).append(rid)
    group_of = {a.run_id: n for n, g in enumerate(groups) for a in g.attempts}
    explained: list[list[FlaggedPair]] = [[] for _ in groups]
    for f in flagged:
        ids = members[(f.task, f.config)]
        n = group_of.get(ids[0])
        if n is not None and all(group_of.get(rid) == n for rid in ids):
            explained[n].append(f)
    return StatusDetail(runs, outside, outside_counts, running, placed, by_class,
                        [FailureGroupView(g, fl) for g, fl in zip(groups, explained, strict=True)], flagged,
                        members, partial, gpu_attempts, store.sequential(), store.plan_recording(),
                        ledger_backups(folder), leftovers, rebuilding)


def run_states(folder: Path, run_ids: Iterable[str]) -> dict[str, Status]:
    """The state of each of ``run_ids`` in ``folder``'s ledger: ``pending`` for a run it does not hold,
    and for every run where the folder has no ledger yet (a spec not run, as ``benchlab validate``
    plans it). Creates no ledger."""
    known: dict[str, str] = {}
    if (Path(folder) / LEDGER_FILE).exists():
        with Store.open(folder) as store:
            known = store.statuses()
    return {rid: Status(known.get(rid, PENDING)) for rid in run_ids}


def find_run(folder: Path, key: str) -> RunRecord:
    """The run of ``folder`` named by ``key``: its name (``digits/mlp/s3``), its id, or the start of
    its id. Of several runs of one name (a spec changed since), the one in the spec, else the current
    one.

    Raises:
        UsageError: no run, or several, match ``key`` (the message names some).
    """
    with Store.open(folder) as store:
        runs = store.runs(current_only=False)
    exact = [r for r in runs if key in (r.run_id, r.name)]
    if exact:
        current = [r for r in exact if r.in_spec] or [r for r in exact if r.current]
        return (current or exact)[0]
    prefix = [r for r in runs if r.run_id.startswith(key)]
    if len(prefix) == 1:
        return prefix[0]
    if len(prefix) > 1:
        raise UsageError(f"run {key!r} is ambiguous: " + ", ".join(r.run_id for r in prefix[:8]))
    names = ", ".join(r.name for r in runs[:6])
    raise UsageError(f"no run {key!r} in this results folder (runs are named like: {names}, or by id)")


def is_running(folder: Path, run_id: str) -> bool:
    """Whether the ledger of ``folder`` has the run ``run_id`` running now (``logs --follow`` stops
    following a log once it is not)."""
    with Store.open(folder) as store:
        return store.statuses(ids=[run_id]).get(run_id) == RUNNING


__all__ = ["COUNTS_ORDER", "STATE_DONE", "STATE_EMPTY", "STATE_FAILED", "STATE_RUNNING", "STATE_STOPPED",
           "FailureGroupView", "FolderStatus", "StatusDetail", "benchmark_state", "duration_text", "estimate_eta",
           "find_run", "is_running", "run_states", "status"]
