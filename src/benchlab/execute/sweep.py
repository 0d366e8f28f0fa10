"""The sweep: runs what is not done yet, on a backend, recording everything in the ledger.

It owns what every backend shares: which runs are still to do, run
directories, attempts and retries, collecting metrics, recovering from a
sweep that died, and stopping cleanly. Progress reaches the caller as
``SweepEvent`` objects through ``on_event``; the library never prints.
"""

from __future__ import annotations

import dataclasses
import itertools
import os
import socket
import sqlite3
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import psutil

from benchlab import triage
from benchlab.collect import collect_run
from benchlab.collect.files import RECORDED_BY_BENCHLAB, write_extracted_metrics
from benchlab.errors import LedgerLost
from benchlab.execute.base import Backend, Launch, Outcome, get_backend, run_dir_of
from benchlab.execute.local import SETTLE_POLL_S, SETTLE_S, kill_tree
from benchlab.execute.provenance import code_state, sweep_provenance, write_provenance
from benchlab.execute.rundir import Preparer, write_run_dir
from benchlab.plan import Run, expand
from benchlab.results import write_benchmark_meta
from benchlab.run_files import CONFIG_FILE, LOG_FILE, PROVENANCE_FILE
from benchlab.spec import Spec
from benchlab.store import (
    COMPLETED,
    DB_NAME,
    FAILED,
    INTERRUPTED,
    PRUNED,
    TO_RUN_STATES,
    CodeState,
    LedgerGuard,
    ResultsLock,
    Store,
    disk_full,
    is_disk_full,
)

STOP_GRACE_S = 5.0
#: Seconds of inventory readings before deciding which devices are free (real GPUs only).
GPU_SAMPLE_WINDOW_S = 1.0
ATTEMPT_ENV = "BENCHLAB_ATTEMPT_KEY"


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
    process group, through the backend's optional ``cancel``) or dropped from the queue, and
    recorded as ``pruned``: not a failure, never retried.
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

    meta = store.meta()
    owner = meta.get("spec_path")
    if spec.path is None or not owner:
        return
    mine = str(spec.path.resolve())
    # A spec promoted from the owner's search (`benchlab search --promote`) continues its benchmark.
    promoted_from = {str((spec.base_dir / c.origin.spec).resolve()) for c in spec.configs if c.origin is not None}
    if owner != mine and Path(owner).exists() and not os.path.samefile(owner, mine) and owner not in promoted_from:
        raise ResultsOfOtherSpec(results_dir, owner, str(meta.get("name")), mine, spec.name)


class Sweep:
    """One invocation of ``benchlab run`` over a spec and a results folder."""

    def __init__(self, spec: Spec, results_dir: Path | str, *, jobs: int | None = None,
                 rerun_failed: bool = False, backend: str | Backend = "local",
                 on_event: Callable[[SweepEvent], None] | None = None,
                 max_failures: int | None = None, backend_options: dict[str, Any] | None = None,
                 gpus: str | None = None, rerun_all: bool = False, code: CodeState | None = None,
                 runs: list[Run] | None = None, feeder: Feeder | None = None):
        """``rerun_all`` runs every run of the plan again, finished or not (the earlier attempts
        stay on record); ``code`` is the state of the code under test (read from git when None);
        ``runs`` is the plan when it is not the spec's own runs (``--until-decided`` adds seeds);
        ``feeder`` hands the runs out one batch at a time instead (see ``Feeder``)."""
        self.spec = spec
        self._runs = runs
        self.feeder = feeder
        self._pruning: dict[int, str] = {}  # attempt id -> why its run is being pruned
        self.results_dir = Path(results_dir).resolve()
        self.jobs = jobs or default_jobs(spec.resources.cpus)
        self.rerun_failed = rerun_failed
        self.rerun_all = rerun_all
        self.code = code if code is not None else code_state(spec.work_path, spec.path)
        self._code_id = 0
        self.on_event = on_event or (lambda event: None)
        self.max_failures = max_failures
        self._backend_arg = backend
        self._backend_options = backend_options or {}
        self.gpus = gpus
        self.gpu_names: dict[int, str] = {}
        self.gpu_devices: list[int] = []
        self.inventory: Any = None  # the GPU inventory, when GPUs are in use
        self._recovered_gpus: list[int] = []
        self._stop = threading.Event()
        self.backend: Backend | None = None
        self._preparer: Preparer | None = None
        self._sampler: Any = None  # the GpuSampler, while GPU runs are placed locally

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
            store = Store.create(self.results_dir)
            try:
                self._guard = LedgerGuard(store)
                return self._run(store, t0)
            except sqlite3.DatabaseError as exc:
                if is_disk_full(exc):
                    raise disk_full(self.results_dir) from None
                # A write or read failed under us: say what became of the file, not SQLite's words.
                raise self._lost(self._guard.check(force=True) or f"is unreadable ({exc})") from None
            except OSError as exc:
                if is_disk_full(exc):
                    raise disk_full(self.results_dir) from None
                raise
            finally:
                store.close()

    def _lost(self, problem: str) -> LedgerLost:
        db = self.results_dir / DB_NAME
        return LedgerLost(db, f"{db} {problem} while this sweep was running: it stopped launching runs "
                              f"and stopped the ones in flight (their run directories keep what they did). "
                              f"Recreate the ledger from the run directories with "
                              f"`benchlab collect --rebuild {self.results_dir}`, then run again to finish.")

    def _make_backend(self, todo: Iterable[Run]) -> Backend:
        if not isinstance(self._backend_arg, str):
            return self._backend_arg
        factory = get_backend(self._backend_arg)
        if self._backend_arg == "local":
            return factory(jobs=self.jobs, **self._gpu_options(todo), **self._backend_options)
        return factory(spec=self.spec, results_dir=self.results_dir, **self._backend_options)

    def _gpu_options(self, todo: Iterable[Run]) -> dict[str, Any]:
        """The local backend's GPU pool and inventory for ``--gpus`` (``self.gpus``).

        Nothing is read when no run asks for a GPU and ``--gpus`` was not given: a
        CPU-only sweep pays nothing and leaves ``CUDA_VISIBLE_DEVICES`` as it found it.
        """
        from benchlab.errors import UserError
        from benchlab.execute.gpus import NoInventory, open_inventory, visible_indices
        from benchlab.execute.placement import GpuPool, parse_gpus, select_devices

        wanting = [r for r in todo if r.resources.gpus > 0]
        if self.gpus is None and not wanting:
            return {}
        selection = parse_gpus(self.gpus or "auto")
        if selection.mode == "none":
            if wanting:
                raise UserError(f"--gpus none, but {len(wanting)} run(s) ask for GPUs "
                                f"(resources.gpus of {wanting[0].name} is "
                                f"{wanting[0].resources.gpus:g}); set resources.gpus: 0 or drop --gpus none")
            return {"hide_gpus": True}
        inventory = open_inventory()
        if isinstance(inventory, NoInventory):
            if selection.mode == "list":
                raise UserError(f"--gpus {self.gpus}: {inventory.reason}")
            if wanting:
                raise UserError(f"{len(wanting)} run(s) ask for GPUs (resources.gpus of "
                                f"{wanting[0].name} is {wanting[0].resources.gpus:g}), but "
                                f"{inventory.reason}")
            return {}
        if self._recovered_gpus:
            _wait_for_memory(inventory, self._recovered_gpus)
        states = inventory.sample(GPU_SAMPLE_WINDOW_S)
        visible = visible_indices(states)
        devices = select_devices(selection, states, visible)
        self.gpu_names = {s.index: s.name for s in states}
        self.inventory = inventory
        pool = GpuPool(devices)
        self.gpu_devices = pool.usable
        if wanting and not pool.usable:
            seen = ", ".join(f"{st.index} {st.verdict}" + (" (MIG on)" if st.mig else "")
                             + (" (hidden by CUDA_VISIBLE_DEVICES)" if visible is not None
                                and st.index not in visible else "") for st in states)
            raise UserError(f"no free GPU for the {len(wanting)} run(s) that ask for one "
                            f"(GPUs: {seen}); name devices with --gpus to share them anyway, "
                            "and see `benchlab gpus` for who holds them")
        return {"gpu_pool": pool, "inventory": inventory, "hide_gpus": bool(states)}

    def _run(self, store: Store, t0: float) -> SweepResult:
        spec = self.spec
        feeder = self.feeder
        runs = [] if feeder is not None else expand(spec) if self._runs is None else self._runs
        check_spec_owns(store, spec, self.results_dir)
        write_benchmark_meta(store, spec, self.results_dir)
        if feeder is None:
            with store.transaction():  # the runs and the plan they make change together
                store.register(runs)
                store.set_plan(r.run_id for r in runs)
        self._code_id = store.code_id(self.code)
        self._recover(store)
        statuses = store.statuses()
        wanted = set(TO_RUN_STATES) | ({FAILED} if self.rerun_failed else set())
        if self.rerun_all:
            wanted |= {FAILED, COMPLETED}
        todo = deque(r for r in runs if statuses.get(r.run_id) in wanted)
        if self.rerun_all:  # every run starts over, with a whole retry budget
            store.new_budget([r.run_id for r in todo])
        elif self.rerun_failed:  # the user's explicit request for a new retry budget
            store.new_budget([r.run_id for r in todo if statuses.get(r.run_id) == FAILED])
        # Retry budgets are counted from the ledger over each run's whole life, so a resume after
        # a crash continues the budget instead of granting a new one.
        failures = store.charged_failures({r.run_id for r in todo})
        for i, r in enumerate(todo):
            if r.run_id in failures and store.last_charged_failure(r.run_id) == triage.OOM:
                todo[i] = _for_retry(r, triage.OOM)
        progress = Progress(total=len(runs))
        progress.skipped = sum(1 for r in runs if statuses.get(r.run_id) == COMPLETED and not self.rerun_all)
        progress.failed = sum(1 for r in runs if statuses.get(r.run_id) == FAILED and not self.rerun_failed
                              and not self.rerun_all)
        estimates = store.durations()
        _order(todo, estimates)

        if isinstance(self._backend_arg, str) and self._backend_arg == "local":
            missing = missing_workdirs(todo)
            if missing:
                from benchlab.errors import UserError

                where = f" (workdir of {spec.path})" if spec.path else ""
                raise UserError(f"working directory {missing[0]} does not exist{where}; nothing was run. "
                                "Create it, or fix the spec's `workdir`.")

        changed = None if self.rerun_all else code_changed(store, self.code, runs, statuses)
        if changed:
            self.on_event(SweepEvent("warning", None, 0, Progress(total=0), error=changed))
        self.on_event(SweepEvent("begin", None, 0, progress))
        self.backend = backend = self._make_backend(todo)
        if self.inventory is not None and getattr(backend, "gpu_pool", None) is not None:
            from benchlab.execute.gpu_sampler import GpuSampler

            self._sampler = GpuSampler(self.inventory).start()
        # Runs with no directory yet get theirs written ahead (local backend: the same disk).
        # One listing, not a stat per run: at 100,000 runs that is seconds before the first launch.
        try:
            existing = set(os.listdir(run_dir_of(self.results_dir, "x").parent))
        except FileNotFoundError:
            existing = set()
        fresh = {r.run_id for r in todo if r.run_id not in existing}
        lookahead = 4 * self.jobs
        self._preparer = Preparer(self.results_dir) if fresh and backend.name == "local" else None

        def prepare_ahead() -> None:
            if self._preparer is not None:
                self._preparer.ahead(r for r in itertools.islice(todo, lookahead) if r.run_id in fresh)

        prepare_ahead()
        machine_gpus = {str(i): n for i, n in sorted(self.gpu_names.items())}
        # git and package metadata take tens of milliseconds: read while the first runs go.
        shared = _Later(lambda: {**sweep_provenance(spec.work_path),
                                 **({"machine_gpus": machine_gpus} if machine_gpus else {})})
        host = socket.gethostname()
        _record_hardware(store, host, machine_gpus)
        base_env = dict(os.environ)
        base_env.setdefault("PYTHONUNBUFFERED", "1")
        db_key = str(store.path)
        inflight: dict[int, tuple[Run, int, int, float]] = {}
        durations: list[float] = []
        failed_runs: list[str] = []
        warnings: list[str] = []
        busy: dict[int, list[tuple[float, float]]] = {}
        interrupted = 0
        primary = spec.metrics.primary.name
        metrics = spec.metrics.all
        # Optional parts of a backend (the local one has them; see base.py).
        why_never = getattr(backend, "why_never", None)
        settling = getattr(backend, "settling", None)
        drain_warnings = getattr(backend, "warnings", None)
        slots: int | None = getattr(backend, "jobs", None)

        def expected(run: Run) -> float | None:
            est = estimates.get((run.task, run.config))
            if est is not None:
                return est
            if durations:
                return sum(durations) / len(durations)
            return sum(estimates.values()) / len(estimates) if estimates else None

        eta_value: list[float | None] = [None]
        eta_at = [float("-inf")]  # when it was computed (monotonic)

        eta_every = [0.5]

        def eta() -> float | None:
            # O(queue) per call: recompute at most twice a second, and never for more than 2% of
            # the time (a 100,000-run queue takes tens of milliseconds).
            now_m = time.monotonic()
            if todo and now_m - eta_at[0] < eta_every[0]:
                return eta_value[0]
            t = time.perf_counter()
            eta_value[0], eta_at[0] = _eta(), now_m
            eta_every[0] = max(0.5, 50 * (time.perf_counter() - t))
            return eta_value[0]

        def _eta() -> float | None:
            left = [*todo, *(v[0] for v in inflight.values())]
            if not left:
                return 0.0
            guesses = [expected(r) for r in left]
            if any(g is None for g in guesses):
                return None
            now = time.time()
            # Runs in flight are partly done; the rest queue behind the slots.
            done_part = sum(min(now - v[3], expected(v[0]) or 0.0) for v in inflight.values())
            work = sum(g or 0.0 for g in guesses) - done_part
            return max(0.0, work) / max(1, min(self.jobs, len(left)))

        def fail_unplaceable(run: Run, reason: str) -> None:
            attempt_id, number = store.start_attempt(run.run_id, host=host)
            error = f"cannot be placed: {reason}"
            store.finish_attempt(attempt_id, run.run_id, status=FAILED, run_status=FAILED,
                                 failure_class=triage.LAUNCH, error=error)
            progress.failed += 1
            failed_runs.append(run.name)
            self.on_event(SweepEvent("finish", run, number, progress, status=FAILED,
                                     failure_class=triage.LAUNCH, error=error))

        def drop_unplaceable() -> None:
            if why_never is None:
                return
            # The answer rests on a run's resources, which the runs of a config share: asked once
            # per resources object (held, so that its id stays its own), not 100,000 times.
            answers: dict[int, tuple[Any, str | None]] = {}
            for run in list(todo):
                known = answers.get(id(run.resources))
                if known is None:
                    known = answers[id(run.resources)] = (run.resources, why_never(run))
                reason = known[1]
                if reason is not None:
                    todo.remove(run)
                    fail_unplaceable(run, reason)

        def pass_on_warnings() -> None:
            if drain_warnings is None:
                return
            for text in drain_warnings():
                warnings.append(text)
                self.on_event(SweepEvent("warning", None, 0, progress, error=text))

        def top_up() -> bool:
            """Ask the feeder for runs while slots would stay idle; False, so that it can lead
            the loop's condition."""
            if feeder is None or self._stop.is_set():
                return False
            free = (slots or self.jobs) - len(inflight) - len(todo)
            while free > 0:
                new = feeder.more(free)
                if not new:
                    return False
                with store.transaction():
                    store.add_runs(new)
                    store.add_to_plan(r.run_id for r in new)
                known = store.statuses()
                progress.total += len(new)
                for r in new:
                    state = known.get(r.run_id)
                    if state in (COMPLETED, PRUNED):
                        # Done before this sweep (the same trial asked again after a crash).
                        progress.skipped += 1
                        self.on_event(SweepEvent("finish", r, 0, progress, status=state))
                    else:
                        todo.append(r)
                        free -= 1
            return False

        def prune(run_id: str, reason: str) -> None:
            queued = next((r for r in todo if r.run_id == run_id), None)
            if queued is not None:
                todo.remove(queued)
                store.set_status(run_id, PRUNED)
                progress.pruned += 1
                self.on_event(SweepEvent("finish", queued, 0, progress, status=PRUNED, error=reason))
                return
            cancel = getattr(backend, "cancel", None)
            for attempt_id, (run, *_rest) in inflight.items():
                if run.run_id == run_id and attempt_id not in self._pruning and cancel is not None:
                    self._pruning[attempt_id] = reason
                    cancel(attempt_id)

        drop_unplaceable()
        replan = _Replanner()
        lost: str | None = None
        poll_s = feeder.poll_s if feeder is not None else None
        try:
            # Devices whose memory still drains keep the sweep open (bounded by the backend's
            # settle time), so a leak found after the last run is still reported.
            while (top_up() or todo or inflight or (settling and settling())) and not self._stop.is_set():
                problem = self._guard.check()
                if problem is not None:
                    lost = problem
                    raise self._lost(problem)
                replan.maybe(todo, estimates)
                # Launch while slots allow; a run that does not fit now waits, others may pass it.
                launched = True
                while launched and todo and not self._stop.is_set():
                    launched = False
                    if self.max_failures is not None and len(failed_runs) >= self.max_failures:
                        todo.clear()
                        break
                    if slots is not None and backend.running() >= slots:
                        break  # no run can fit: spare the scan
                    # The first run in queue order that fits; the queue keeps its order, so a
                    # long run that waits for a whole device stays ahead of shorter ones.
                    pick = next((i for i, r in enumerate(todo) if backend.fits(r)), None)
                    if pick is None:
                        break
                    run = todo[pick]
                    del todo[pick]
                    prepare_ahead()
                    launch = self._launch(store, backend, run, host, base_env, db_key)
                    launched = True
                    if isinstance(launch, _LaunchFailed):
                        # Counted like any failure: in the progress, the summary and the exit code.
                        progress.failed += 1
                        failed_runs.append(run.name)
                        self.on_event(SweepEvent("finish", run, launch.number, progress, status=FAILED,
                                                 failure_class=triage.LAUNCH, error=launch.error))
                        continue
                    inflight[launch.attempt_id] = (run, launch.attempt_id, launch.number,
                                                   time.time())
                    progress.running = len(inflight)
                    self.on_event(SweepEvent("start", run, launch.number, progress))
                if not inflight and not (settling and settling()):
                    break
                # With directories to write ahead, only look for ended runs, write one, and loop.
                idle_work = self._preparer is not None and self._preparer.pending()
                outcomes = backend.wait(timeout=0 if idle_work else poll_s)
                pass_on_warnings()
                if feeder is not None and poll_s is not None:
                    for run_id, reason in feeder.to_prune().items():
                        prune(run_id, reason)
                if not outcomes:
                    if idle_work:
                        assert self._preparer is not None
                        self._preparer.step()
                    else:
                        drop_unplaceable()  # a device may have been taken out of the pool
                for outcome in outcomes:
                    run, attempt_id, number, started = inflight.pop(outcome.launch.attempt_id)
                    if attempt_id in self._pruning:
                        event = self._finish_pruned(store, outcome, self._pruning.pop(attempt_id), metrics)
                        progress.running = len(inflight)
                        progress.pruned += 1
                        event.progress = progress
                        self.on_event(event)
                        continue
                    status, event = self._finish(store, outcome, shared, primary, metrics,
                                                 retried=_budget_left(run, failures.get(run.run_id, {})))
                    progress.running = len(inflight)
                    duration = outcome.ended - outcome.started
                    for i in outcome.launch.gpus or ():
                        busy.setdefault(i, []).append((outcome.started, outcome.ended))
                    cls = event.failure_class or ""
                    counts = failures.setdefault(run.run_id, {})
                    if status == FAILED:
                        counts[cls] = counts.get(cls, 0) + 1
                    if status == COMPLETED:
                        progress.completed += 1
                        durations.append(duration)
                        key = (run.task, run.config)
                        if key not in estimates:
                            # The first measurement of this (task, config): re-plan the queue.
                            estimates[key] = duration
                            replan.mark()
                    elif status == INTERRUPTED:
                        interrupted += 1
                    elif counts[cls] <= run.retries_for(cls):
                        todo.appendleft(_for_retry(run, cls))
                        store.set_status(run.run_id, "pending")
                        progress.eta_s = eta()
                        self.on_event(SweepEvent("retry", run, number, progress, status=FAILED,
                                                 duration=duration, failure_class=cls,
                                                 error=event.error))
                        continue
                    else:
                        progress.failed += 1
                        failed_runs.append(run.name)
                    progress.eta_s = eta()
                    event.progress = progress
                    event.duration = duration
                    self.on_event(event)
            if todo and not self._stop.is_set():
                drop_unplaceable()
        except sqlite3.DatabaseError:
            lost = "is unreadable"
            raise
        finally:
            if inflight or backend.running():
                for outcome in backend.terminate_all(STOP_GRACE_S):
                    if inflight.pop(outcome.launch.attempt_id, None) is None:
                        continue  # started, but its attempt's row was never committed (a full disk)
                    outcome.interrupted = True
                    interrupted += 1
                    try:
                        # A lost ledger is not written to: it may now be someone's backup.
                        self._finish(store, outcome, shared, primary, metrics, record=lost is None)
                    except (OSError, sqlite3.Error) as exc:
                        if not is_disk_full(exc):
                            raise
                        # Left 'running' in the ledger: the next sweep records it as lost, and runs it.
            backend.close()
            if self._sampler is not None:
                self._sampler.stop()
            if isinstance(self._backend_arg, str) and self._backend_arg == "local":
                kill_strays(db_key)
        problem = self._guard.check(force=True)  # lost after the last check: still say so
        if problem is not None:
            raise self._lost(problem)
        flagged = triage.flag_configs(store.runs(), store.attempts())
        store.set_meta(flagged=flagged)
        return SweepResult(
            results_dir=self.results_dir, total=len(runs), completed=progress.completed,
            failed=progress.failed, skipped=progress.skipped, interrupted=interrupted,
            stopped=self._stop.is_set(), wall_s=time.monotonic() - t0, failed_runs=failed_runs,
            flagged=flagged, gpu_busy_share=busy_share(busy, len(self.gpu_devices)),
            gpus=list(self.gpu_devices), warnings=warnings,
            gpu_util_mean=None if self._sampler is None else self._sampler.mean_utilization,
            pruned=progress.pruned,
        )

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
        attempt_id, number = store.start_attempt(run.run_id, host=host)
        store.tag_attempt(attempt_id, self._code_id)
        claimed = number == 1 and self._preparer is not None and self._preparer.claim(run.run_id)
        # A directory written ahead may have been removed since: written again, not blamed on the run.
        if not claimed or not os.path.exists(run_dir / CONFIG_FILE):
            write_run_dir(run_dir, run, number)
        env = dict(base_env)
        for key, value in run.env.items():
            env[key] = value.replace("{run_dir}", str(run_dir))
        env.update(BENCHLAB_RUN_DIR=str(run_dir), BENCHLAB_RUN_ID=run.run_id,
                   BENCHLAB_SEED=str(run.seed), BENCHLAB_ATTEMPT=str(number),
                   BENCHLAB_TASK=run.task, BENCHLAB_CONFIG=run.config,
                   **{ATTEMPT_ENV: f"{db_key}#{attempt_id}"})
        launch = Launch(run=run, attempt_id=attempt_id, number=number, run_dir=run_dir,
                        command=run.command_for(run_dir), env=env, cwd=run.workdir,
                        timeout=run.timeout, log_path=run_dir / LOG_FILE)
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

    def _finish(self, store: Store, outcome: Outcome, shared: _Later, primary: str,
                metrics: list[Any], record: bool = True,
                retried: Callable[[str], bool] | None = None) -> tuple[str, SweepEvent]:
        """Collect and record one ended attempt. ``retried(failure_class)`` says whether a failure
        of that class will be retried: the run is then recorded as pending in the same transaction
        as the failed attempt, so a crash in between cannot leave it failed with budget left."""
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
        if run_dir.exists():
            write_provenance(run_dir, shared.get(), run_id=run.run_id, run=run.name, attempt=launch.number,
                             started=outcome.started, ended=outcome.ended,
                             duration_s=outcome.ended - outcome.started,
                             exit_code=outcome.exit_code, signal=outcome.signal,
                             timed_out=outcome.timed_out, node=outcome.node, gpus=launch.gpus,
                             gpu_models=[self.gpu_names.get(i) for i in launch.gpus or ()],
                             command=launch.command, metrics={"primary": primary, "goals": {
                                 m.name: m.goal for m in metrics}}, **extracted, interrupted=outcome.interrupted,
                             **({"transfer": outcome.extra} if outcome.extra else {}))
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
            return COMPLETED, SweepEvent("finish", run, launch.number, Progress(0), status=COMPLETED,
                                         value=collected.finals.get(primary), metric=primary)
        status = INTERRUPTED if failure.failure_class == triage.INTERRUPTED else FAILED
        if tail is None:
            tail = triage.log_tail(launch.log_path)
        again = status == FAILED and retried is not None and retried(failure.failure_class)
        store.finish_attempt(launch.attempt_id, run.run_id, status=status, run_status="pending" if again else status,
                             exit_code=outcome.exit_code, signal=outcome.signal, ended=outcome.ended,
                             node=outcome.node, failure_class=failure.failure_class, error=failure.error, log_tail=tail)
        return status, SweepEvent("finish", run, launch.number, Progress(0), status=status,
                                  failure_class=failure.failure_class, error=failure.error)

    def _finish_pruned(self, store: Store, outcome: Outcome, reason: str, metrics: list[Any]) -> SweepEvent:
        """Record an attempt its feeder pruned: what it logged until then is kept (the report
        draws pruned curves), and its run is done: pruned, neither failed nor retried."""
        launch = outcome.launch
        run = launch.run
        collected = collect_run(launch.run_dir, metrics, run.context())
        store.finish_attempt(launch.attempt_id, run.run_id, status=PRUNED, run_status=PRUNED,
                             exit_code=outcome.exit_code, signal=outcome.signal, ended=outcome.ended,
                             node=outcome.node, error=reason, metrics=collected.finals,
                             series=collected.series)
        return SweepEvent("finish", run, launch.number, Progress(0), status=PRUNED, error=reason,
                          duration=outcome.ended - outcome.started)

    # ------------------------------------------------------------------ crash recovery

    def _recover(self, store: Store) -> None:
        """Kill what a sweep that died left running; mark its attempts lost.

        Every process of an attempt carries this ledger's key in its environment, and the
        folder's lock is ours, so any process with the key is a leftover, including one
        launched just before a crash whose attempt row was never committed.
        """
        stale = store.attempts(status="running")
        # Their devices hold memory until the driver has cleaned up after the killed processes;
        # the inventory must not read that as someone else's work (see _gpu_options).
        self._recovered_gpus = sorted({int(i) for a in stale for i in (a.gpus or "").split(",") if i})
        for attempt in stale:
            if attempt.pid is not None and attempt.pgid is not None:
                kill_tree(attempt.pid, attempt.pgid, attempt.proc_start)
        kill_strays(str(store.path))
        for attempt in stale:
            store.finish_attempt(attempt.attempt_id, attempt.run_id, status=INTERRUPTED,
                                 run_status=INTERRUPTED, failure_class=triage.LOST,
                                 error="the benchlab process running it died; run again")


def code_changed(store: Store, now: CodeState, runs: list[Run], statuses: dict[str, str]) -> str | None:
    """What to tell before finished runs are skipped although the code under test changed since
    they ran (None when it did not, or when either side is not in a git repository)."""
    if not now.known:
        return None
    done = [r.run_id for r in runs if statuses.get(r.run_id) == COMPLETED]
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

    hardware = dict(store.meta().get("hardware") or {})
    known = hardware.get(host) or {}
    hardware[host] = {"cpu": cpu_model(), "cores": os.cpu_count(),
                      "gpus": {**(known.get("gpus") or {}), **gpus}}
    store.set_meta(hardware=hardware)


@dataclass(frozen=True)
class _LaunchFailed:
    """A launch the backend refused: the attempt's number and why (already in the ledger)."""

    number: int
    error: str


def missing_workdirs(runs: Iterable[Run]) -> list[str]:
    """The working directories of ``runs`` that do not exist on this machine."""
    return sorted(w for w in {r.workdir for r in runs} if not os.path.isdir(w))


def refuse_without_ledger(results_dir: Path) -> None:
    """Raise ``LedgerLost`` when run directories show finished runs but the ledger is missing or
    holds no attempt: a sweep would run them all again, and the ledger can be rebuilt instead."""
    db = results_dir / DB_NAME
    if db.exists():
        try:
            conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=30)
            try:
                (attempts,) = conn.execute("SELECT COUNT(*) FROM (SELECT 1 FROM attempts LIMIT 1)").fetchone()
            finally:
                conn.close()
        except sqlite3.DatabaseError as exc:
            raise LedgerLost(db, f"{db} is unreadable ({exc}); nothing was run. Recreate it from the run "
                                 f"directories with `benchlab collect --rebuild {results_dir}`.") from None
        if attempts:
            return
    runs_dir = results_dir / "runs"
    if not runs_dir.is_dir():
        return
    with os.scandir(runs_dir) as entries:
        finished = next((e.name for e in entries if os.path.exists(os.path.join(e.path, PROVENANCE_FILE))),
                        None)
    if finished is None:
        return
    state = "is missing" if not db.exists() else "holds no attempt"
    raise LedgerLost(db, f"{db} {state}, but run directories under {runs_dir} show finished runs "
                         f"(e.g. {finished}); nothing was run, so that they are not run again. Recreate the "
                         f"ledger from them with `benchlab collect --rebuild {results_dir}`, then run again.")


def _wait_for_memory(inventory: Any, devices: list[int], limit_s: float = SETTLE_S,
                     poll_s: float = SETTLE_POLL_S) -> None:
    """Wait (at most ``limit_s``) until ``devices`` hold no more than a driver's bookkeeping
    (the inventory's one definition of an empty device, :func:`benchlab.execute.gpus.empty_margin_mib`)."""
    from benchlab.execute.gpus import empty_margin_mib

    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        readings = {r.index: r for r in inventory.read()}
        if all(i not in readings or readings[i].memory_used_mib <= empty_margin_mib(readings[i].memory_total_mib)
               for i in devices):
            return
        time.sleep(poll_s)


def kill_strays(db_key: str) -> int:
    """Kill processes of this ledger's attempts that outlived them (a child that left its
    process group with ``setsid`` and kept running); returns how many.

    Found by the ``BENCHLAB_ATTEMPT_KEY`` every attempt's processes inherit; done once
    per sweep, not per run, because reading every process's environment is slow.
    """
    prefix = f"{db_key}#"
    me = os.getpid()
    killed = 0
    for proc in psutil.process_iter(["pid"]):
        if proc.pid == me:
            continue
        try:
            key = proc.environ().get(ATTEMPT_ENV, "")
        except (psutil.Error, OSError):
            continue
        if key.startswith(prefix):
            try:
                proc.kill()
                killed += 1
            except psutil.Error:
                pass
    return killed


def _order(todo: deque[Run], estimates: dict[tuple[str, str], float]) -> None:
    """Longest expected first (known from earlier attempts), unknown durations first, wider
    requests first among equals: the order of :func:`benchlab.execute.placement.longest_first`,
    with the key computed once per (task, config, GPUs), not per run (a stable sort keeps
    submission order in ties)."""
    if len(todo) < 2:
        return
    keys: dict[tuple[str, str, float], tuple[int, float, float]] = {}

    def key(r: Run) -> tuple[int, float, float]:
        k = (r.task, r.config, r.resources.gpus)
        found = keys.get(k)
        if found is None:
            e = estimates.get((r.task, r.config))
            found = keys[k] = (0, 0.0, 0.0) if e is None else (1, -e, -r.resources.gpus)
        return found

    items = sorted(todo, key=key)
    todo.clear()
    todo.extend(items)


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
