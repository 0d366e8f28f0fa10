"""The sweep: runs what is not done yet, on a backend, recording everything in the ledger.

It owns what every backend shares: which runs are still to do, run
directories, attempts and retries, collecting metrics, recovering from a
sweep that died, and stopping cleanly. Progress reaches the caller as
``SweepEvent`` objects through ``on_event``; the library never prints.
"""

from __future__ import annotations

import dataclasses
import functools
import gc
import itertools
import operator
import os
import socket
import sqlite3
import threading
import time
from collections import deque
from collections.abc import Callable, Collection, Iterable, Iterator
from dataclasses import dataclass, field
from operator import attrgetter
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from benchlab import preregistration, triage
from benchlab.collect import collect_run
from benchlab.collect.files import RECORDED_BY_BENCHLAB, write_extracted_metrics
from benchlab.errors import LedgerLost, UserError
from benchlab.evalrules import refuse_incomplete_checkpoints, settings_of
from benchlab.execute.base import Backend, Launch, Outcome, SweepContext, get_backend
from benchlab.execute.proctree import ATTEMPT_KEY_ENV, kill_strays, kill_tree
from benchlab.execute.provenance import (
    changed_files,
    code_state,
    spec_files,
    sweep_provenance,
    write_provenance,
)
from benchlab.execute.rundir import Preparer, write_run_dir
from benchlab.execute.version import (
    DIFF_FILE,
    VERSIONS_DIR,
    BenchmarkChanged,
    changes_since,
    current_version,
    write_version,
)
from benchlab.ledger import (
    COMPLETED,
    DB_NAME,
    FAILED,
    INTERRUPTED,
    PENDING,
    PRUNED,
    RUNNING,
    CodeState,
    LedgerGuard,
    PlanRecorder,
    ResultsLock,
    Store,
    disk_full,
    has_attempts,
    is_disk_full,
    runs_to_do,
)
from benchlab.plan import Run, expand
from benchlab.results import write_benchmark_meta
from benchlab.run_files import CONFIG_FILE, LOG_FILE, PROVENANCE_FILE, run_dir_of, runs_dir
from benchlab.spec import Spec

if TYPE_CHECKING:
    from benchlab.execute.gpu_sampler import GpuSampler

STOP_GRACE_S = 5.0
#: While the plan is being recorded, a step of it at least this often, however busy the runs keep the sweep.
PLAN_STEP_EVERY_S = 0.05


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
    """Something that happened: ``begin`` (the plan, before any run), ``start``, ``finish``,
    ``retry`` of a run, or a ``warning`` (``error`` holds its text; ``run`` may be None)."""

    kind: str
    run: Run | None
    attempt: int
    progress: Progress
    status: str | None = None
    value: float | None = None
    metric: str | None = None
    duration: float | None = None
    failure_class: str | None = None
    error: str | None = None


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
    #: (task, config) pairs that failed on every seed: ``{"task", "config", "failures"}``.
    flagged: list[dict[str, Any]] = field(default_factory=list)
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


def default_jobs(cpus_per_run: float) -> int:
    """How many runs fit at once on this machine's cores."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    return max(1, int(cores // cpus_per_run)) if cpus_per_run > 0 else cores


def check_spec_owns(store: Store, spec: Spec, results_dir: Path) -> None:
    """Refuse a results folder that holds the runs of another spec file (``ResultsOfOtherSpec``).

    A folder belongs to the spec file that first ran into it. A spec file that moved (the recorded
    one no longer exists) takes the folder over; a spec built in memory (no file) is not checked.
    """
    from benchlab.errors import ResultsOfOtherSpec

    recorded = store.benchmark()
    owner = recorded.spec_path if recorded is not None else None
    if spec.path is None or recorded is None or not owner:
        return
    mine = str(spec.path.resolve())
    # A spec promoted from the owner's search (`benchlab search --promote`) continues its benchmark.
    promoted_from = {str((spec.base_dir / c.origin.spec).resolve()) for c in spec.configs if c.origin is not None}
    if owner != mine and Path(owner).exists() and not os.path.samefile(owner, mine) and owner not in promoted_from:
        raise ResultsOfOtherSpec(results_dir, owner, recorded.name, mine, spec.name)


class Sweep:
    """One invocation of ``benchlab run`` over a spec and a results folder."""

    def __init__(self, spec: Spec, results_dir: Path | str, *, jobs: int | None = None,
                 rerun_failed: bool = False, backend: str | Backend | None = None,
                 on_event: Callable[[SweepEvent], None] | None = None,
                 max_failures: int | None = None, backend_options: dict[str, Any] | None = None,
                 gpus: str | None = None, rerun_all: bool = False, code: CodeState | None = None,
                 runs: list[Run] | None = None, allow_changed: bool = False, feeder: Feeder | None = None,
                 check_checkpoints: bool = True):
        """``backend`` is a backend's name (:func:`benchlab.execute.base.get_backend`) or one ready
        to use [default: the spec's ``backend``]; ``backend_options`` go to its
        :meth:`~benchlab.execute.base.Backend.for_sweep`; ``rerun_all`` runs every run of the plan
        again, finished or not (the earlier attempts stay on record); ``code`` is the state of the
        code under test (read from git when None); ``runs`` is the plan when it is not the spec's
        own runs (``--until-decided`` adds seeds); ``allow_changed`` goes on (recording it) where a
        dataset or the code changed since the runs began, instead of raising
        :class:`~benchlab.execute.version.BenchmarkChanged`; ``feeder`` hands the runs out a few
        at a time instead (see :class:`Feeder`); ``check_checkpoints`` False leaves to the caller
        whether the local checkpoints the runs load are whole (``benchlab watch`` decides that by
        its own rule, a marker file for one), instead of raising ``SpecError`` where one is not."""
        self.spec = spec
        self.check_checkpoints = check_checkpoints
        self._runs = runs
        self.feeder = feeder
        self._pruning: dict[int, str] = {}  # attempt id -> why its run is being pruned
        self.results_dir = Path(results_dir).resolve()
        self.jobs = jobs or default_jobs(spec.resources.cpus)
        self.rerun_failed = rerun_failed
        self.rerun_all = rerun_all
        self.code = code if code is not None else code_state(spec.work_path, spec_files(spec))
        self._code_id = 0
        self.allow_changed = allow_changed
        self.version_id: str | None = None
        self.on_event = on_event or (lambda event: None)
        self.max_failures = max_failures
        self._backend_arg: str | Backend = spec.backend if backend is None else backend
        self._backend_options = backend_options or {}
        self.gpus = gpus
        self._recovered_gpus: list[int] = []
        self._stop = threading.Event()
        self.backend: Backend | None = None
        self._preparer: Preparer | None = None
        self._sampler: GpuSampler | None = None
        self._gpu_models: dict[int, str] = {}
        self._plan_recorder: PlanRecorder | None = None
        self._held: list[tuple[Any, str]] = []  # (attempt, job id) a sweep that died left with a scheduler
        self._frozen = False  # whether the plan's objects are in the collector's permanent generation

    def request_stop(self) -> None:
        """Stop launching, terminate what runs, record it as interrupted (safe from a signal handler)."""
        self._stop.set()
        if self.backend is not None:
            self.backend.wake()

    # ------------------------------------------------------------------ main loop

    def run(self) -> SweepResult:
        t0 = time.monotonic()
        with ResultsLock(self.results_dir):
            refuse_without_ledger(self.results_dir)
            try:
                runs = self._own_runs()
                # Before the ledger is created or anything launched: a run still to do that would
                # load a missing or partly written checkpoint makes the whole sweep a user error.
                if self.check_checkpoints:
                    refuse_incomplete_checkpoints(self.spec, runs, lambda: ledger_statuses(self.results_dir),
                                                  rerun_all=self.rerun_all)
            except BaseException:
                self._unfreeze()
                raise
            store = Store.create(self.results_dir)
            guard: LedgerGuard | None = None
            try:
                self._guard = guard = LedgerGuard(store)
                return self._run(store, t0, runs)
            except sqlite3.DatabaseError as exc:
                if is_disk_full(exc):
                    raise disk_full(self.results_dir) from None
                # A write or read failed under us: say what became of the file, not SQLite's words.
                problem = guard.check(force=True) if guard is not None else None
                raise self._lost(problem or f"is unreadable ({exc})") from None
            except OSError as exc:
                if is_disk_full(exc):
                    raise disk_full(self.results_dir) from None
                raise
            finally:
                store.close()
                if guard is not None:
                    guard.close()
                self._unfreeze()

    def _unfreeze(self) -> None:
        if self._frozen:  # the plan's objects, kept from the collector while the sweep ran
            gc.unfreeze()
            self._frozen = False

    def _own_runs(self) -> list[Run]:
        """The plan before the ledger adds to it: none for a feeder (it hands runs out as it
        goes), the runs given, or the spec's."""
        if self.feeder is not None:
            return []
        if self._runs is not None:
            return self._runs
        runs, self._frozen = _built_apart_from_collector(lambda: expand(self.spec))
        return runs

    def _lost(self, problem: str) -> LedgerLost:
        db = self.results_dir / DB_NAME
        return LedgerLost(db, f"{db} {problem} while this sweep was running: it stopped launching runs "
                              f"and stopped the ones in flight (their run directories keep what they did). "
                              f"Recreate the ledger from the run directories with "
                              f"`benchlab collect --rebuild {self.results_dir}`, then run again to finish.")

    def _runs_here(self) -> bool:
        arg = self._backend_arg
        return (get_backend(arg) if isinstance(arg, str) else arg).runs_here

    def _make_backend(self, queue: RunQueue, todo: list[Run]) -> Backend:
        """The backend for ``queue``; ``todo`` holds the same runs in plan order."""
        if not isinstance(self._backend_arg, str):
            return self._backend_arg
        # The runs of a config share one resources object: gathered once each, through ``todo``.
        held = {id(res): res for res in map(_RESOURCES, todo)}
        context = SweepContext(spec=self.spec, results_dir=self.results_dir, jobs=self.jobs,
                               runs=list(queue), gpus=self.gpus, recovered_gpus=tuple(self._recovered_gpus),
                               resources=tuple(held.values()))
        return get_backend(self._backend_arg).for_sweep(context, **self._backend_options)

    def _run(self, store: Store, t0: float, runs: list[Run]) -> SweepResult:
        if self.feeder is None and self._runs is None and not self.rerun_all:
            # Finished, so never to do: they pass no checkpoint check, and the plan keeps them.
            runs = [*runs, *kept_runs(store, self.spec)]
        self._register(store, runs)
        self._recover(store)
        # Only the runs that are not pending: a resume of a plan that has just begun reads a few rows.
        statuses = store.statuses(pending=False)
        self.version_id = record_version(store, self.spec, self.code, self.results_dir, statuses,
                                         allow=self.allow_changed or self.rerun_all)
        preregistration.register(store, self.spec, operator.countOf(statuses.values(), COMPLETED))
        queue, budget, progress, done, todo = self._plan(store, runs, statuses)
        # The checks over every queued run go through ``todo``, the same runs in plan order: the
        # runs lie in memory in that order (see ``plan.expand``), and a pass in queue order, which
        # a resume groups by (task, config), reads them two to three times slower.
        if self._runs_here():
            self._check_workdirs(todo)
        changed = None if self.rerun_all else code_changed(store, self.code, done)
        if changed:
            self.on_event(SweepEvent("warning", None, 0, Progress(total=0), error=changed))
        self.on_event(SweepEvent("begin", None, 0, progress))
        self.backend = backend = self._make_backend(queue, todo)
        self._gpu_models = dict(backend.gpu_models)
        self._sampler = backend.gpu_sampler()
        if self._sampler is not None:
            self._sampler.start()
        st = self._start_state(store, backend, queue, budget, progress)
        self._adopt(st)
        self._drop_unplaceable(st, among=todo)
        del todo
        try:
            self._loop(st)
        except sqlite3.DatabaseError:
            st.lost = "is unreadable"
            raise
        finally:
            try:
                self._after_launch(st)
            finally:
                self._stop_in_flight(st)
                backend.close()
            if self._sampler is not None:
                self._sampler.stop()
            if backend.runs_here:
                kill_strays(st.db_key)
        problem = self._guard.check(force=True)  # lost after the last check: still say so
        if problem is not None:
            raise self._lost(problem)
        st.plan.finish()
        flagged = triage.flag_configs(store.runs(), store.attempts())
        store.set_flagged(flagged)
        tally = st.tally
        return SweepResult(
            results_dir=self.results_dir, total=len(runs), completed=progress.completed,
            failed=progress.failed, skipped=progress.skipped, interrupted=tally.interrupted,
            stopped=self._stop.is_set(), wall_s=time.monotonic() - t0, failed_runs=tally.failed_runs,
            flagged=flagged, gpu_busy_share=busy_share(tally.busy, len(backend.gpu_devices)),
            gpus=list(backend.gpu_devices), warnings=tally.warnings,
            gpu_util_mean=None if self._sampler is None else self._sampler.mean_utilization,
            pruned=progress.pruned,
        )

    # ------------------------------------------------------------------ before the first launch

    def _register(self, store: Store, runs: list[Run]) -> None:
        """Enter the plan in the ledger: the benchmark's record, its runs, the code under test."""
        check_spec_owns(store, self.spec, self.results_dir)
        write_benchmark_meta(store, self.spec, self.results_dir)
        if self.feeder is not None:
            # The plan grows as the feeder hands out runs (_top_up): nothing to record ahead.
            self._plan_recorder = PlanRecorder(store, [])
            self._plan_recorder.done = True
        else:
            # The runs and the plan they make are recorded between the first launches, a step at a
            # time (PlanRecorder): at 100,000 runs recording them first took seconds.
            self._plan_recorder = store.record_plan(runs)
        self._code_id = store.code_id(self.code)

    def _plan(self, store: Store, runs: list[Run],
              statuses: dict[str, str]) -> tuple[RunQueue, RetryBudget, Progress, list[str], list[Run]]:
        """The queue of runs to launch, in order, their retry budgets, the counts so far, the
        ids of the plan's completed runs (``statuses`` may leave pending runs out), and the
        queued runs in plan order."""
        found = runs_to_do(runs, statuses, rerun_failed=self.rerun_failed, rerun_all=self.rerun_all)
        todo = found.runs
        if self.rerun_all:  # every run starts over, with a whole retry budget
            store.new_budget([r.run_id for r in todo])
        elif self.rerun_failed:  # the user's explicit request for a new retry budget
            store.new_budget([r.run_id for r in todo if statuses.get(r.run_id) == FAILED])
        # Retry budgets are counted from the ledger over each run's whole life, so a resume after
        # a crash continues the budget instead of granting a new one.
        charged = store.charged_failures()
        if charged:  # usually none: the plan's ids are gathered only where some run has failures
            ids = todo_ids(todo)
            charged = {rid: counts for rid, counts in charged.items() if rid in ids}
        budget = RetryBudget(charged)
        for i, r in enumerate(todo if budget.charged else ()):
            if r.run_id in budget.charged and store.last_charged_failure(r.run_id) == triage.OOM:
                todo[i] = _for_retry(r, triage.OOM)
        progress = Progress(total=len(runs))
        progress.skipped = 0 if self.rerun_all else found.completed
        progress.failed = 0 if self.rerun_failed or self.rerun_all else found.failed
        queue = RunQueue(todo, store.durations())
        queue.order()
        return queue, budget, progress, found.completed_ids, todo

    def _check_workdirs(self, runs: Iterable[Run]) -> None:
        missing = missing_workdirs(runs)
        if missing:
            where = f" (workdir of {self.spec.path})" if self.spec.path else ""
            raise UserError(f"working directory {missing[0]} does not exist{where}; nothing was run. "
                            "Create it, or fix the spec's `workdir`.")

    def _start_state(self, store: Store, backend: Backend, queue: RunQueue, budget: RetryBudget,
                     progress: Progress) -> _LoopState:
        # Runs with no directory yet get theirs written ahead (when runs write on this disk).
        # One listing, not a stat per run: at 100,000 runs that is seconds before the first launch.
        try:
            existing = set(os.listdir(runs_dir(self.results_dir)))
        except FileNotFoundError:
            existing = set()
        fresh = any(r.run_id not in existing for r in queue)  # stops at the first one
        self._preparer = Preparer(self.results_dir) if fresh and backend.runs_here else None
        machine_gpus = {str(i): n for i, n in sorted(self._gpu_models.items())}
        work_path = self.spec.work_path
        # git and package metadata take tens of milliseconds: read while the first runs go.
        version_id = self.version_id
        shared = _Later(lambda: {**sweep_provenance(work_path), "benchmark_version": version_id,
                                 "code_diff_file": f"{VERSIONS_DIR}/{version_id}/{DIFF_FILE}",
                                 **({"machine_gpus": machine_gpus} if machine_gpus else {})})
        host = socket.gethostname()
        _record_hardware(store, host, machine_gpus)
        base_env = dict(os.environ)
        base_env.setdefault("PYTHONUNBUFFERED", "1")
        # Secret variables reach the runs here, never through their commands or config.yaml.
        base_env.update(self.spec.secret_env())
        assert self._plan_recorder is not None
        st = _LoopState(store=store, backend=backend, queue=queue, budget=budget, plan=self._plan_recorder,
                        eta=Eta(queue.estimates, self.jobs), tally=_Tally(progress), shared=shared, host=host,
                        base_env=base_env, db_key=str(store.path), existing=existing, lookahead=4 * self.jobs,
                        primary=self.spec.metrics.primary.name, metrics=self.spec.metrics.all)
        self._prepare_ahead(st)
        return st

    def _prepare_ahead(self, st: _LoopState) -> None:
        if self._preparer is not None:
            self._preparer.ahead(r for r in st.queue.ahead(st.lookahead) if r.run_id not in st.existing)

    # ------------------------------------------------------------------ the loop

    def _loop(self, st: _LoopState) -> None:
        """Launch what fits, wait for what ends, record it; until nothing is left or a stop."""
        backend, queue = st.backend, st.queue
        plan_due = time.monotonic() + PLAN_STEP_EVERY_S
        # Devices whose memory still drains keep the sweep open (bounded by the backend's
        # settle time), so a leak found after the last run is still reported.
        feeder = self.feeder
        poll_s = feeder.poll_s if feeder is not None else None
        while (self._top_up(st) or queue or st.inflight or backend.settling()) and not self._stop.is_set():
            self._check_ledger(st)
            queue.maybe_reorder()
            self._launch_what_fits(st)
            self._after_launch(st)
            if not st.inflight and not backend.settling():
                break
            # With the plan to record or directories to write ahead, only look for ended runs,
            # do a step of that work, and loop. The plan also gets a step at least every
            # PLAN_STEP_EVERY_S, however busy the runs keep the loop.
            plan = st.plan
            if not plan.done and time.monotonic() >= plan_due:
                plan.step()
                plan_due = time.monotonic() + PLAN_STEP_EVERY_S
            idle_work = not plan.done or (self._preparer is not None and self._preparer.pending())
            outcomes = backend.wait(timeout=0 if idle_work else poll_s)
            self._pass_on_warnings(st)
            self._pass_on_placements(st)
            # Runs that just ended come first: their slots' next runs wait on them, and the
            # curves are read again within a poll (unless reading them is already overdue).
            if feeder is not None and poll_s is not None and (
                    not outcomes or time.monotonic() - st.pruned_at >= 2 * poll_s):
                st.pruned_at = time.monotonic()
                for run_id, reason in feeder.to_prune().items():
                    self._prune(st, run_id, reason)
            if not outcomes:
                if not plan.done:
                    plan.step()
                    plan_due = time.monotonic() + PLAN_STEP_EVERY_S
                elif idle_work:
                    assert self._preparer is not None
                    self._preparer.step()
                else:
                    self._drop_unplaceable(st)  # a device may have been taken out of the pool
            for outcome in outcomes:
                self._on_outcome(st, outcome)
        if queue and not self._stop.is_set():
            self._drop_unplaceable(st)

    @staticmethod
    def _after_launch(st: _LoopState) -> None:
        while st.after_launch:
            st.after_launch.pop(0)()

    def _top_up(self, st: _LoopState) -> bool:
        """Ask the feeder for runs while slots would stay idle; False, so that it can lead the
        loop's condition."""
        feeder = self.feeder
        if feeder is None or self._stop.is_set():
            return False
        free = (st.backend.slots or self.jobs) - len(st.inflight) - len(st.queue)
        progress = st.tally.progress
        while free > 0:
            new = feeder.more(free)
            if not new:
                return False
            # The runs start in the transaction that records them: one commit, after their spawns
            # (a crash before it leaves Optuna's trial running, and the next search asks it again).
            with st.store.transaction():
                known = st.store.statuses(ids=[r.run_id for r in new])
                st.store.add_runs(new)
                st.store.add_to_plan(r.run_id for r in new)
                progress.total += len(new)
                for r in new:
                    state = known.get(r.run_id)
                    if state in (COMPLETED, PRUNED):
                        # Done before this sweep (the same run asked for again after a crash).
                        progress.skipped += 1
                        self.on_event(SweepEvent("finish", r, 0, progress, status=state))
                    else:
                        st.queue.runs.append(r)
                        free -= 1
                self._check_ledger(st)
                self._launch_what_fits(st)
        return False

    def _check_ledger(self, st: _LoopState) -> None:
        problem = self._guard.check()
        if problem is not None:
            st.lost = problem
            raise self._lost(problem)

    def _prune(self, st: _LoopState, run_id: str, reason: str) -> None:
        """Stop ``run_id`` for its feeder: dropped from the queue, or killed where it runs."""
        queued = next((r for r in st.queue if r.run_id == run_id), None)
        if queued is not None:
            st.queue.runs.remove(queued)
            st.store.set_status(run_id, PRUNED)
            st.tally.progress.pruned += 1
            self.on_event(SweepEvent("finish", queued, 0, st.tally.progress, status=PRUNED, error=reason))
            return
        for attempt_id, flight in st.inflight.items():
            if flight.run.run_id == run_id and attempt_id not in self._pruning and st.backend.cancel(attempt_id):
                self._pruning[attempt_id] = reason

    def _launch_what_fits(self, st: _LoopState) -> None:
        """Launch while slots allow; a run that does not fit now waits, others may pass it."""
        backend, queue, progress = st.backend, st.queue, st.tally.progress
        while queue and not self._stop.is_set():
            if self.max_failures is not None and len(st.tally.failed_runs) >= self.max_failures:
                queue.clear()
                return
            if backend.slots is not None and backend.running() >= backend.slots:
                return  # no run can fit: spare the scan
            run = queue.take_first(backend.fits)
            if run is None:
                return
            self._prepare_ahead(st)
            launch = self._launch(st.store, backend, run, st.host, st.base_env, st.db_key)
            if isinstance(launch, _LaunchFailed):
                # Counted like any failure: in the progress, the summary and the exit code.
                st.tally.fail(run)
                self.on_event(SweepEvent("finish", run, launch.number, progress, status=FAILED,
                                         failure_class=triage.LAUNCH, error=launch.error))
                continue
            st.inflight[launch.attempt_id] = _InFlight(run, launch.number, time.monotonic())
            progress.running = len(st.inflight)
            self.on_event(SweepEvent("start", run, launch.number, progress))

    def _on_outcome(self, st: _LoopState, outcome: Outcome) -> None:
        """Record an ended attempt, then count it, queue its retry, or report it finished."""
        flight = st.inflight.pop(outcome.launch.attempt_id)
        run, progress = flight.run, st.tally.progress
        if outcome.launch.attempt_id in self._pruning:
            event = self._finish_pruned(st.store, outcome, self._pruning.pop(outcome.launch.attempt_id), st.metrics)
            progress.running = len(st.inflight)
            progress.pruned += 1
            event.progress = progress
            self.on_event(event)
            return
        status, event = self._finish(st.store, outcome, st.shared, st.primary, st.metrics,
                                     retried=st.budget.allows_another(run), later=st.after_launch)
        progress.running = len(st.inflight)
        duration = outcome.ended - outcome.started
        st.tally.note_devices(outcome)
        cls = event.failure_class or ""
        if status == COMPLETED:
            progress.completed += 1
            st.eta.record(duration)
            st.queue.learn(run, duration)
        elif status == INTERRUPTED:
            st.tally.interrupted += 1
        elif st.budget.charge(run, cls):
            st.queue.retry_first(_for_retry(run, cls))
            st.store.set_status(run.run_id, PENDING)
            progress.eta_s = st.eta.get(st.queue, st.inflight.values())
            self.on_event(SweepEvent("retry", run, flight.number, progress, status=FAILED,
                                     duration=duration, failure_class=cls, error=event.error))
            return
        else:
            st.tally.fail(run)
        progress.eta_s = st.eta.get(st.queue, st.inflight.values())
        event.progress = progress
        event.duration = duration
        self.on_event(event)

    def _drop_unplaceable(self, st: _LoopState, among: Collection[Run] | None = None) -> None:
        """Fail the queued runs the backend says can never start (no device large enough, ...).
        ``among``: runs that include every queued one, to ask the backend about instead."""
        if type(st.backend).why_never is Backend.why_never:
            return  # the protocol's default: any run may start some day; spare the scan
        for run, reason in st.queue.remove_never_fitting(st.backend.why_never, among):
            with st.store.transaction():
                st.plan.ensure(run)
                attempt_id, number = st.store.start_attempt(run.run_id, host=st.host)
            error = f"cannot be placed: {reason}"
            st.store.finish_attempt(attempt_id, run.run_id, status=FAILED, run_status=FAILED,
                                    failure_class=triage.LAUNCH, error=error)
            st.tally.fail(run)
            self.on_event(SweepEvent("finish", run, number, st.tally.progress, status=FAILED,
                                     failure_class=triage.LAUNCH, error=error))

    def _pass_on_warnings(self, st: _LoopState) -> None:
        for text in st.backend.warnings():
            st.tally.warnings.append(text)
            self.on_event(SweepEvent("warning", None, 0, st.tally.progress, error=text))

    def _pass_on_placements(self, st: _LoopState) -> None:
        """Record what a cluster scheduler said of attempts (job ids, queue reasons, nodes, GPUs)."""
        found = st.backend.placements()
        if found:
            st.store.set_placements(found)

    def _adopt(self, st: _LoopState) -> None:
        """Re-attach to the jobs a sweep that died left with a cluster scheduler (they are still
        queued or running there, or finished meanwhile); the attempts the backend cannot follow
        (Slurm forgot them, or this sweep runs on another backend) are recorded lost."""
        held, self._held = self._held, []
        if not held:
            return  # nothing to re-attach: spare the index of every queued run
        adopted: list[Launch] = []
        by_id = {r.run_id: r for r in st.queue}
        for attempt, job_id in held:
            run = by_id.get(attempt.run_id)
            if run is not None:
                launch = self._make_launch(run, attempt.attempt_id, attempt.number, st.base_env, st.db_key)
                launch.gpus = [int(g) for g in (attempt.gpus or "").split(",") if g.isdigit()] or None
                if st.backend.adopt(launch, job_id):
                    adopted.append(launch)
                    continue
            note = "" if type(st.backend).adopt is not Backend.adopt else \
                f" (its job {job_id} may still run there: scancel {job_id})"
            st.store.finish_attempt(attempt.attempt_id, attempt.run_id, status=INTERRUPTED,
                                    run_status=INTERRUPTED, failure_class=triage.LOST,
                                    error=f"the benchlab process following it died; run again{note}")
        if not adopted:
            return
        st.queue.remove_ids({launch.run.run_id for launch in adopted})
        for launch in adopted:
            st.inflight[launch.attempt_id] = _InFlight(launch.run, launch.number, time.monotonic())
            self.on_event(SweepEvent("start", launch.run, launch.number, st.tally.progress))
        st.tally.progress.running = len(st.inflight)
        self._pass_on_placements(st)

    def _stop_in_flight(self, st: _LoopState) -> None:
        """Terminate what still runs (a stop, an error) and record it as interrupted."""
        backend = st.backend
        if not (st.inflight or backend.running()):
            return
        stopped = backend.terminate_all(STOP_GRACE_S)
        if st.lost is None:
            self._pass_on_placements(st)
        for outcome in stopped:
            if st.inflight.pop(outcome.launch.attempt_id, None) is None:
                continue  # started, but its attempt's row was never committed (a full disk)
            outcome.interrupted = True
            st.tally.interrupted += 1
            try:
                # A lost ledger is not written to: it may now be someone's backup.
                self._finish(st.store, outcome, st.shared, st.primary, st.metrics, record=st.lost is None)
            except (OSError, sqlite3.Error) as exc:
                if not is_disk_full(exc):
                    raise
                # Left 'running' in the ledger: the next sweep records it as lost, and runs it.

    # ------------------------------------------------------------------ one attempt

    def _launch(self, store: Store, backend: Backend, run: Run, host: str,
                base_env: dict[str, str], db_key: str) -> Launch | _LaunchFailed:
        # One transaction from the attempt's row to its pid: one commit per launch. A crash
        # before the commit leaves a process no row names; it carries this ledger's key in its
        # environment, and the next sweep's recovery kills every such process first.
        with store.transaction():
            return self._launch_recorded(store, backend, run, host, base_env, db_key)

    def _launch_recorded(self, store: Store, backend: Backend, run: Run, host: str,
                         base_env: dict[str, str], db_key: str) -> Launch | _LaunchFailed:
        run_dir = run_dir_of(self.results_dir, run.run_id)
        assert self._plan_recorder is not None
        self._plan_recorder.ensure(run)  # recorded before its attempt, in the same transaction
        attempt_id, number = store.start_attempt(run.run_id, host=host)
        store.tag_attempt(attempt_id, self._code_id)
        claimed = number == 1 and self._preparer is not None and self._preparer.claim(run.run_id)
        # A directory written ahead may have been removed since: written again, not blamed on the run.
        if not claimed or not os.path.exists(run_dir / CONFIG_FILE):
            # A local start opens (creates) the log itself: one file creation less before it.
            write_run_dir(run_dir, run, number, log=not backend.runs_here)
        launch = self._make_launch(run, attempt_id, number, base_env, db_key)
        try:
            info = backend.start(launch)
        except OSError as exc:
            if is_disk_full(exc):
                raise
            where = exc.filename if exc.filename else run.workdir
            error = f"could not start: {exc.strerror or exc} ({where})"
            store.finish_attempt(attempt_id, run.run_id, status=FAILED, run_status=FAILED,
                                 failure_class=triage.LAUNCH, error=error)
            return _LaunchFailed(number, error)
        # The backend chose the devices at start; the ledger keeps them with the attempt.
        store.set_process(attempt_id, info.pid, info.pgid or info.pid, info.proc_start, gpus=launch.gpus)
        if self._sampler is not None and launch.gpus and info.pid:
            self._sampler.track(attempt_id, launch.gpus, info.pgid or info.pid)
        return launch

    def _make_launch(self, run: Run, attempt_id: int, number: int, base_env: dict[str, str],
                     db_key: str) -> Launch:
        run_dir = run_dir_of(self.results_dir, run.run_id)
        env = dict(base_env)
        for key, value in run.env.items():
            env[key] = value.replace("{run_dir}", str(run_dir))
        env.update(BENCHLAB_RUN_DIR=str(run_dir), BENCHLAB_RUN_ID=run.run_id,
                   BENCHLAB_SEED=str(run.seed), BENCHLAB_ATTEMPT=str(number),
                   BENCHLAB_TASK=run.task, BENCHLAB_CONFIG=run.config,
                   **{ATTEMPT_KEY_ENV: f"{db_key}#{attempt_id}"})
        return Launch(run=run, attempt_id=attempt_id, number=number, run_dir=run_dir,
                      command=run.command_for(run_dir), env=env, cwd=run.workdir,
                      timeout=run.timeout, log_path=run_dir / LOG_FILE)

    def _finish(self, store: Store, outcome: Outcome, shared: _Later, primary: str,
                metrics: list[Any], record: bool = True,
                retried: Callable[[str], bool] | None = None,
                later: list[Callable[[], None]] | None = None) -> tuple[str, SweepEvent]:
        """Collect and record one ended attempt. ``retried(failure_class)`` says whether a failure
        of that class will be retried: the run is then recorded as pending in the same transaction
        as the failed attempt, so a crash in between cannot leave it failed with budget left.

        ``later``: where a completed attempt's ``provenance.json`` is put off to, so that the
        next run starts first. Killed in between, that run's folder lacks the file, which the
        ledger does not need; rebuilt from its folders, the ledger would count the run as to do
        again. A failed attempt's is written at once: its retry moves its files aside."""
        launch = outcome.launch
        run, run_dir = launch.run, launch.run_dir
        use = self._sampler.finish(launch.attempt_id) if self._sampler is not None else None
        tail: str | None = None  # the log's last lines, read only for a failure
        collected = None
        failure: triage.Verdict | None = None
        if outcome.interrupted:
            failure = triage.Verdict(triage.INTERRUPTED, "interrupted by the user")
        elif outcome.error:
            failure = triage.Verdict(outcome.extra.get("failure_class", triage.LAUNCH), outcome.error)
        elif outcome.exit_code != 0 or outcome.timed_out:
            tail = triage.log_tail(launch.log_path)
            failure = triage.classify(exit_code=outcome.exit_code, signal=outcome.signal,
                                      timed_out=outcome.timed_out, tail=tail, timeout=launch.timeout)
        else:
            collected = collect_run(run_dir, metrics, run.context())
            missing = collected.missing(primary)
            if missing:
                failure = triage.Verdict(triage.MISSING_METRIC, missing)
        extracted: dict[str, Any] = {}
        if collected is not None and write_extracted_metrics(run_dir, collected.finals, collected.extracted):
            extracted = {"metrics_json": RECORDED_BY_BENCHLAB}
        if collected is not None and collected.lm_eval is not None:
            extracted["lm_eval"] = collected.lm_eval.provenance
        # What the field's rules want recorded of an lm-eval or vLLM run (benchlab.evalrules).
        evaluation = settings_of(run.command, collected.lm_eval.provenance
                                 if collected is not None and collected.lm_eval is not None else None)
        if evaluation is not None:
            extracted["evaluation"] = evaluation
        write = None
        if run_dir.exists():
            write = functools.partial(
                write_provenance, run_dir, shared.get(), run_id=run.run_id, run=run.name, attempt=launch.number,
                started=outcome.started, ended=outcome.ended, duration_s=outcome.ended - outcome.started,
                exit_code=outcome.exit_code, signal=outcome.signal, timed_out=outcome.timed_out, node=outcome.node,
                gpus=launch.gpus, gpu_models=[self._gpu_models.get(i) for i in launch.gpus or ()],
                command=launch.command, metrics={"primary": primary, "goals": {m.name: m.goal for m in metrics}},
                **extracted, interrupted=outcome.interrupted, **({"transfer": outcome.extra} if outcome.extra else {}))
            if later is None or failure is not None or not record:
                write()
                write = None
        if not record:
            return INTERRUPTED, SweepEvent("finish", run, launch.number, Progress(0), status=INTERRUPTED)
        if use is not None:
            store.set_gpu_use(launch.attempt_id, use)
        if failure is None:
            assert collected is not None
            # A completed attempt's error holds a note that qualifies it, such as a partial lm-eval run.
            note = collected.lm_eval.partial_note() if collected.lm_eval is not None else None
            store.finish_attempt(launch.attempt_id, run.run_id, status=COMPLETED, run_status=COMPLETED,
                                 exit_code=outcome.exit_code, ended=outcome.ended, node=outcome.node,
                                 error=note, metrics=collected.finals, series=collected.series)
            if write is not None and later is not None:
                later.append(write)
            return COMPLETED, SweepEvent("finish", run, launch.number, Progress(0), status=COMPLETED,
                                         value=collected.finals.get(primary), metric=primary)
        status = INTERRUPTED if failure.failure_class == triage.INTERRUPTED else FAILED
        if tail is None:
            tail = triage.log_tail(launch.log_path)
        again = status == FAILED and retried is not None and retried(failure.failure_class)
        store.finish_attempt(launch.attempt_id, run.run_id, status=status, run_status=PENDING if again else status,
                             exit_code=outcome.exit_code, signal=outcome.signal, ended=outcome.ended,
                             node=outcome.node, failure_class=failure.failure_class, error=failure.error, log_tail=tail)
        return status, SweepEvent("finish", run, launch.number, Progress(0), status=status,
                                  failure_class=failure.failure_class, error=failure.error)

    def _finish_pruned(self, store: Store, outcome: Outcome, reason: str, metrics: list[Any]) -> SweepEvent:
        """Record an attempt its feeder pruned: what it logged until then is kept (the search
        report draws pruned curves), and its run is done: pruned, neither failed nor retried."""
        launch = outcome.launch
        run = launch.run
        if self._sampler is not None:
            self._sampler.finish(launch.attempt_id)
        collected = collect_run(launch.run_dir, metrics, run.context())
        store.finish_attempt(launch.attempt_id, run.run_id, status=PRUNED, run_status=PRUNED,
                             exit_code=outcome.exit_code, signal=outcome.signal, ended=outcome.ended,
                             node=outcome.node, error=reason, metrics=collected.finals, series=collected.series)
        return SweepEvent("finish", run, launch.number, Progress(0), status=PRUNED, error=reason,
                          duration=outcome.ended - outcome.started)

    # ------------------------------------------------------------------ crash recovery

    def _recover(self, store: Store) -> None:
        """Kill what a sweep that died left running; mark its attempts lost.

        Every process of an attempt carries this ledger's key in its environment, and the
        folder's lock is ours, so any process with the key is a leftover, including one
        launched just before a crash whose attempt row was never committed.
        """
        stale = store.attempts(status=RUNNING)
        # Attempts a cluster scheduler holds (a job id, no local process) may still be queued or
        # running there: the backend re-attaches to them (_adopt) instead of launching them again.
        placed = store.placements(a.attempt_id for a in stale)
        self._held = [(a, placed[a.attempt_id].job_id) for a in stale
                      if a.attempt_id in placed and a.pid is None]
        held_ids = {a.attempt_id for a, _ in self._held}
        stale = [a for a in stale if a.attempt_id not in held_ids]
        # Their devices hold memory until the driver has cleaned up after the killed processes;
        # the backend must not read that as someone else's work (SweepContext.recovered_gpus).
        self._recovered_gpus = sorted({int(i) for a in stale for i in (a.gpus or "").split(",") if i})
        for attempt in stale:
            if attempt.pid is not None and attempt.pgid is not None:
                kill_tree(attempt.pid, attempt.pgid, attempt.proc_start)
        kill_strays(str(store.path))
        for attempt in stale:
            store.finish_attempt(attempt.attempt_id, attempt.run_id, status=INTERRUPTED,
                                 run_status=INTERRUPTED, failure_class=triage.LOST,
                                 error="the benchlab process running it died; run again")


def record_version(store: Store, spec: Spec, code: CodeState, results_dir: Path, statuses: dict[str, str],
                   *, allow: bool) -> str:
    """Write the benchmark version of this sweep and record it in the ledger; return its id.

    Where runs already ran under an earlier version whose datasets or code differ, raise
    :class:`BenchmarkChanged` naming what changed, unless ``allow`` (the change is then recorded
    with the new version)."""
    now = current_version(spec, code, results_dir)
    versions = store.versions()
    changes = _version_changes(spec, versions, now, statuses)
    if changes and not allow:
        raise BenchmarkChanged(results_dir, changes)
    write_version(results_dir, now, spec)
    if not versions or versions[-1]["id"] != now.id:
        versions.append({**now.to_json(), "changes": changes})
        store.set_versions(versions)
    return now.id


def _version_changes(spec: Spec, versions: list[dict[str, Any]], now: Any, statuses: dict[str, str]) -> list[str]:
    """What changed since the last recorded version, where runs already began under it."""
    began = any(s != PENDING for s in statuses.values())
    if not versions or not began:
        return []
    return changes_since(versions[-1], now,
                         lambda since: changed_files(spec.work_path, since, spec_files(spec)))


def kept_runs(store: Store, spec: Spec) -> list[Run]:
    """The finished runs an earlier ``run --until-decided`` added beyond the spec's seeds: a sweep
    of the spec's own runs keeps them in its plan, so that the results table, ``benchlab.load``
    and every verdict still count them (see :func:`benchlab.execute.sequential.kept_runs`)."""
    # Only a ledger an --until-decided run wrote: the sequential module imports the statistics
    # (scipy), half a second before every resume's first launch.
    if store.sequential() is None:
        return []
    from benchlab.execute import sequential

    return sequential.kept_runs(store, spec)


@dataclass(frozen=True)
class SweepPlan:
    """The runs a :class:`Sweep` of a spec over a results folder plans, as it would plan them."""

    runs: list[Run]
    kept: int  # of them, finished runs an earlier ``run --until-decided`` added (see kept_runs)


def ledger_statuses(results_dir: Path) -> dict[str, str]:
    """Every run's state by id in the ledger of ``results_dir`` (none when it has no ledger yet)."""
    if not (results_dir / DB_NAME).exists():
        return {}
    with Store.open(results_dir) as store:
        return store.statuses()


def sweep_plan(spec: Spec, results_dir: Path | str, *, rerun_all: bool = False) -> SweepPlan:
    """The plan of ``Sweep(spec, results_dir).run()``: the spec's runs, and unless ``rerun_all``
    the runs :func:`kept_runs` keeps. Reads the ledger, writes nothing."""
    runs = expand(spec)
    db = Path(results_dir) / DB_NAME
    if rerun_all or not db.exists():
        return SweepPlan(runs, 0)
    with Store.open(Path(results_dir)) as store:
        kept = kept_runs(store, spec)
    return SweepPlan([*runs, *kept], len(kept))


def would_run(spec: Spec, results_dir: Path | str, *, runs: list[Run] | None = None, rerun_failed: bool = False,
              rerun_all: bool = False, allow_changed: bool = False, code: CodeState | None = None) -> list[Run]:
    """The runs ``Sweep(spec, results_dir, runs=runs, ...).run()`` would launch, in plan order,
    refusing what it would refuse (:func:`check_can_run`, a missing or partly written checkpoint)
    in the same words. ``benchlab run --dry-run`` lists them. Writes only the dataset hash cache."""
    check_can_run(spec, results_dir, code=code, allow_changed=allow_changed, rerun_all=rerun_all)
    statuses = ledger_statuses(Path(results_dir))
    planned = runs if runs is not None else sweep_plan(spec, results_dir, rerun_all=rerun_all).runs
    refuse_incomplete_checkpoints(spec, planned, lambda: statuses, rerun_all=rerun_all)
    return runs_to_do(planned, statuses, rerun_failed=rerun_failed, rerun_all=rerun_all).runs


def check_can_run(spec: Spec, results_dir: Path | str, *, code: CodeState | None = None,
                  allow_changed: bool = False, rerun_all: bool = False) -> None:
    """Raise what :meth:`Sweep.run` would refuse before launching anything (writing only the
    dataset hash cache): a
    ledger lost beside finished run directories, a folder of another spec file, a changed
    dataset or code under test (unless allowed). ``benchlab run --dry-run`` asks it."""
    results_dir = Path(results_dir).resolve()
    refuse_without_ledger(results_dir)
    if not (results_dir / DB_NAME).exists():
        return
    with Store.open(results_dir) as store:
        check_spec_owns(store, spec, results_dir)
        if allow_changed or rerun_all:
            return
        code = code if code is not None else code_state(spec.work_path, spec_files(spec))
        now = current_version(spec, code, results_dir)
        changes = _version_changes(spec, store.versions(), now,
                                   store.statuses(pending=False))
    if changes:
        raise BenchmarkChanged(results_dir, changes)


def code_changed(store: Store, now: CodeState, done: list[str]) -> str | None:
    """What to tell before the completed runs ``done`` (ids) are skipped although the code under
    test changed since they ran (None when it did not, or when either side is not in a git
    repository)."""
    if not now.known or not done:
        return None
    before = {s: n for s, n in store.completed_code(done).items() if s.known and not s.same_code(now)}
    if not before:
        return None
    n = sum(before.values())
    then = max(before, key=lambda s: before[s])
    return (f"the code under test changed since {n} of the {len(done)} finished runs ran (they ran "
            f"{then.describe()}{' and others' if len(before) > 1 else ''}; it is now {now.describe()}); "
            "they are kept as done: --rerun-all runs every run again")


def _record_hardware(store: Store, host: str, gpus: dict[str, str]) -> None:
    """Note in the ledger what this host is (CPU, cores, GPU models by index), for the report's
    Hardware line; each host that ran a sweep of this folder keeps its own entry."""
    from benchlab.execute.provenance import cpu_model

    hardware = store.hardware()
    known = hardware.get(host) or {}
    hardware[host] = {"cpu": cpu_model(), "cores": os.cpu_count(),
                      "gpus": {**(known.get("gpus") or {}), **gpus}}
    store.set_hardware(hardware)


@dataclass(frozen=True)
class _LaunchFailed:
    """A launch the backend refused: the attempt's number and why (already in the ledger)."""

    number: int
    error: str


def _built_apart_from_collector(build: Callable[[], list[Run]]) -> tuple[list[Run], bool]:
    """``build()`` with the cycle collector off, then every object there is moved to the
    collector's permanent generation (``gc.freeze``) before it is turned back on; whether it was.

    The plan is hundreds of thousands of objects that live as long as the sweep and are in no
    cycle. The collector's passes over them, a tenth of a second each at 100,000 runs, once for
    each of its generations, were a fifth of the time before the first launch and came back while
    the runs went. :meth:`Sweep.run` gives them back to the collector at its end (``gc.unfreeze``).
    Where something else froze objects already (a pre-forking server), the collector is left alone.
    """
    if gc.get_freeze_count():
        return build(), False
    was_on = gc.isenabled()
    gc.disable()
    try:
        runs = build()
        gc.freeze()
    finally:
        if was_on:
            gc.enable()
    return runs, True


def missing_workdirs(runs: Iterable[Run]) -> list[str]:
    """The working directories of ``runs`` that do not exist on this machine."""
    return sorted(w for w in set(map(_WORKDIR, runs)) if not os.path.isdir(w))


# Attribute getters for passes over every run of a plan: map() with them runs at C speed, a tenth
# of a Python loop's time at 100,000 runs.
_WORKDIR, _RUN_ID, _RESOURCES = attrgetter("workdir"), attrgetter("run_id"), attrgetter("resources")


def todo_ids(runs: Iterable[Run]) -> set[str]:
    """The ids of ``runs``, as a set."""
    return set(map(_RUN_ID, runs))


def refuse_without_ledger(results_dir: Path) -> None:
    """Raise ``LedgerLost`` when run directories show finished runs but the ledger is missing or
    holds no attempt: a sweep would run them all again, and the ledger can be rebuilt instead."""
    db = results_dir / DB_NAME
    if db.exists():
        # Read without writing anything; the sweep then says whether the folder is read-only.
        try:
            attempts = has_attempts(db)
        except sqlite3.DatabaseError as exc:
            raise LedgerLost(db, f"{db} is unreadable ({exc}); nothing was run. Recreate it from the run "
                                 f"directories with `benchlab collect --rebuild {results_dir}`.") from None
        if attempts:
            return
    folder = runs_dir(results_dir)
    if not folder.is_dir():
        return
    with os.scandir(folder) as entries:
        finished = next((e.name for e in entries if os.path.exists(os.path.join(e.path, PROVENANCE_FILE))),
                        None)
    if finished is None:
        return
    state = "is missing" if not db.exists() else "holds no attempt"
    raise LedgerLost(db, f"{db} {state}, but run directories under {folder} show finished runs "
                         f"(e.g. {finished}); nothing was run, so that they are not run again. Recreate the "
                         f"ledger from them with `benchlab collect --rebuild {results_dir}`, then run again.")


def _order(todo: deque[Run], estimates: dict[tuple[str, str], float]) -> None:
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
        _order(todo, estimates)
        cost = time.perf_counter() - t
        self.due = False
        self._next = time.monotonic() + cost / self.share


def _budget_left(run: Run, charged: dict[str, int]) -> Callable[[str], bool]:
    """Whether one more failure of a class, on top of those ``charged`` so far, leaves ``run`` a retry."""
    return lambda failure_class: charged.get(failure_class, 0) < run.retries_for(failure_class)


def _for_retry(run: Run, failure_class: str) -> Run:
    """The run as its next attempt should be launched: an out-of-memory run that shared a device
    gets a whole one to itself (the other runs on its device may have been what filled it)."""
    if failure_class == triage.OOM and 0 < run.resources.gpus < 1:
        return dataclasses.replace(run, resources=run.resources.model_copy(update={"gpus": 1.0}))
    return run


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


# ------------------------------------------------------------------ the loop's state


@dataclass
class _InFlight:
    """A launched attempt the sweep waits for."""

    run: Run
    number: int
    started: float  # monotonic clock at launch (for the ETA)


class RunQueue:
    """The runs still to launch, in launch order.

    Longest expected first (:func:`_order`), re-ordered when a (task, config) gets its first
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
        _order(self.runs, self.estimates)

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

    def get(self, queue: RunQueue, inflight: Iterable[_InFlight]) -> float | None:
        """Seconds left (None: some run's duration cannot be guessed yet)."""
        # O(queue) per call: recompute at most twice a second, and never for more than 2% of
        # the time (a 100,000-run queue takes tens of milliseconds).
        now_m = time.monotonic()
        if queue and now_m - self.computed_at < self.every_s:
            return self.value
        t = time.perf_counter()
        self.value, self.computed_at = self._compute(queue, list(inflight)), now_m
        self.every_s = max(0.5, 50 * (time.perf_counter() - t))
        return self.value

    def _compute(self, queue: RunQueue, inflight: list[_InFlight]) -> float | None:
        left = [*queue, *(f.run for f in inflight)]
        if not left:
            return 0.0
        guesses = [self.expected(r) for r in left]
        if any(g is None for g in guesses):
            return None
        now = time.monotonic()
        # Runs in flight are partly done; the rest queue behind the slots.
        done_part = sum(min(now - f.started, self.expected(f.run) or 0.0) for f in inflight)
        work = sum(g or 0.0 for g in guesses) - done_part
        return max(0.0, work) / max(1, min(self.jobs, len(left)))


@dataclass
class _Tally:
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

    def note_devices(self, outcome: Outcome) -> None:
        for i in outcome.launch.gpus or ():
            self.busy.setdefault(i, []).append((outcome.started, outcome.ended))


@dataclass
class _LoopState:
    """Everything the loop's pieces share, for one sweep."""

    store: Store
    backend: Backend
    queue: RunQueue
    budget: RetryBudget
    plan: PlanRecorder  # records the plan in the ledger a step at a time, between launches
    eta: Eta
    tally: _Tally
    shared: _Later  # provenance common to every run, read in the background
    host: str
    base_env: dict[str, str]
    db_key: str  # the ledger's path: with an attempt id, the key its processes carry
    existing: set[str]  # runs with a directory at the start; the others' are written ahead of their launch
    lookahead: int
    primary: str = ""
    metrics: list[Any] = field(default_factory=list)
    inflight: dict[int, _InFlight] = field(default_factory=dict)  # by attempt id
    lost: str | None = None  # what became of the ledger, once it is lost
    # Work for an ended run that nothing downstream waits for (its provenance.json), done once
    # the slot it freed has its next run: off the path from one run's end to the next one's start.
    after_launch: list[Callable[[], None]] = field(default_factory=list)
    pruned_at: float = 0.0  # when the feeder was last asked what to prune (monotonic)


class _Later:
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
