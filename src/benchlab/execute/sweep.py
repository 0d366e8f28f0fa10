"""The sweep: runs what is not done yet, on a backend, recording everything in the ledger.

It owns what every backend shares: which runs are still to do, run
directories, attempts and retries, collecting metrics, recovering from a
sweep that died, and stopping cleanly. Progress reaches the caller as
``SweepEvent`` objects through ``on_event``; the library never prints.
"""

from __future__ import annotations

import gc
import os
import socket
import threading
import time
from collections.abc import Callable, Collection
from dataclasses import replace
from operator import attrgetter
from pathlib import Path
from typing import TYPE_CHECKING, Any

from benchlab import triage
from benchlab.errors import LedgerError, LedgerLost
from benchlab.evalrules import refuse_incomplete_checkpoints, rule_warnings
from benchlab.execute.base import Backend, BackendOptions, Launch, Outcome, SweepContext, get_backend
from benchlab.execute.events import EventKind, Feeder, Progress, SweepEvent, SweepResult
from benchlab.execute.launching import Launcher, LaunchFailed
from benchlab.execute.logcap import LogCap, cap_bytes
from benchlab.execute.loop_state import InFlight, Later, LoopState, Tally, busy_share
from benchlab.execute.opening import (
    SweepPlan,
    built_apart_from_collector,
    check_can_run,
    ledger_statuses,
    open_results_folder,
    record_hardware,
    refuse_without_ledger,
    sweep_plan,
    would_run,
)
from benchlab.execute.proctree import kill_strays
from benchlab.execute.provenance import (
    code_state,
    spec_files,
    sweep_provenance,
)
from benchlab.execute.queue import Eta, RetryBudget, RunQueue, for_retry
from benchlab.execute.record import Recorder, record_attempt, record_pruned
from benchlab.execute.rundir import Preparer
from benchlab.execute.version import (
    DIFF_FILE,
    VERSIONS_DIR,
)
from benchlab.ledger import (
    COMPLETED,
    DB_NAME,
    FAILED,
    INTERRUPTED,
    PENDING,
    PRUNED,
    CodeState,
    LedgerGuard,
    PlanRecorder,
    ResultsLock,
    Store,
    disk_full,
    is_disk_full,
)
from benchlab.names.run_files import runs_dir
from benchlab.plan import Run, expand
from benchlab.secrets import known_fingerprints
from benchlab.spec import Spec

if TYPE_CHECKING:
    from benchlab.execute.gpu_sampler import GpuSampler

# The checks a dry run shares with the sweep live with the opening of a folder; named here too,
# where the command line and scripts have always found them.
__all__ = ["EventKind", "Feeder", "Progress", "Sweep", "SweepEvent", "SweepPlan", "SweepResult", "busy_share",
           "check_can_run", "default_jobs", "ledger_statuses", "refuse_without_ledger", "sweep_plan", "would_run"]

STOP_GRACE_S = 5.0
#: While the plan is being recorded, a step of it at least this often, however busy the runs keep the sweep.
PLAN_STEP_EVERY_S = 0.05


def default_jobs(cpus_per_run: float) -> int:
    """How many runs fit at once on this machine's cores."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    return max(1, int(cores // cpus_per_run)) if cpus_per_run > 0 else cores


class Sweep:
    """One invocation of ``benchlab run`` over a spec and a results folder."""

    def __init__(self, spec: Spec, results_dir: Path | str, *, jobs: int | None = None,
                 rerun_failed: bool = False, backend: str | Backend | None = None,
                 on_event: Callable[[SweepEvent], None] | None = None,
                 max_failures: int | None = None,
                 backend_options: BackendOptions | None = None,
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
        self._backend_options = backend_options.keywords() if backend_options is not None else {}
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
        self._plan: list[Run] | None = None  # the spec's runs, expanded once for the warnings and the run
        self._rules: list[str] | None = None
        self._logs: LogCap | None = None

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
                if runs is self._plan:  # frozen only here, where the sweep's end gives it back
                    _, self._frozen = built_apart_from_collector(lambda: runs)
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
            except LedgerError as exc:
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
        self._plan = self._rules = None  # a later run() expands the spec again, as it may have changed
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
        if self._plan is None:
            self._plan = expand(self.spec)  # built with the cycle collector held off (plan.expand)
        return self._plan

    def planned(self) -> list[Run]:
        """The runs this sweep plans before its ledger adds to them: the runs it was given, or the
        spec's, expanded once (until :meth:`run` ends) for the caller and the run alike; none for a
        feeder's."""
        return self._own_runs()

    def rule_warnings(self) -> list[str]:
        """The field's evaluation rules the runs of this sweep break
        (:func:`benchlab.evalrules.rule_warnings`), on the plan :meth:`run` then runs: expanding a
        spec of 100,000 runs takes a quarter of a second, and it is done once for both."""
        if self._rules is None:
            self._rules = rule_warnings(self.spec, self._own_runs())
        return list(self._rules)

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
        opened = open_results_folder(
            store, self.spec, self.results_dir, runs, code=self.code, fed=self.feeder is not None,
            keep_until_decided=self._runs is None, rerun_failed=self.rerun_failed, rerun_all=self.rerun_all,
            allow_changed=self.allow_changed, check_workdirs=self._runs_here())
        self._plan_recorder, self._code_id, self.version_id = opened.plan, opened.code_id, opened.version_id
        self._held, self._recovered_gpus = list(opened.recovered.held), opened.recovered.gpus
        runs, queue, budget, todo = opened.runs, opened.queue, opened.budget, opened.todo
        progress = Progress(total=len(runs), skipped=opened.skipped, failed=opened.failed)
        if opened.warning:
            self.on_event(SweepEvent(EventKind.WARNING, None, 0, Progress(total=0), error=opened.warning))
        self.on_event(SweepEvent(EventKind.BEGIN, None, 0, progress))
        del opened  # ``todo`` (the queued runs in plan order) goes once the backend has seen it
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
        except LedgerError:
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
            if self._logs is not None:
                self._logs.close()
            if backend.runs_here:
                kill_strays(st.launcher.db_key)
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

    def _start_state(self, store: Store, backend: Backend, queue: RunQueue, budget: RetryBudget,
                     progress: Progress) -> LoopState:
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
        shared = Later(lambda: replace(sweep_provenance(work_path), benchmark_version=version_id,
                                       code_diff_file=f"{VERSIONS_DIR}/{version_id}/{DIFF_FILE}",
                                       machine_gpus=machine_gpus))
        record_hardware(store, socket.gethostname(), machine_gpus)
        base_env = dict(os.environ)
        base_env.setdefault("PYTHONUNBUFFERED", "1")
        # Secret variables reach the runs here, never through their commands or config.yaml.
        base_env.update(self.spec.secret_env())
        assert self._plan_recorder is not None
        # One keeper of every attempt's log, whatever the backend: each log in the results folder
        # is kept within log_cap_mb while its run writes, and cut to it when the attempt ends.
        cap = cap_bytes(self.spec.log_cap_mb)
        self._logs = LogCap(cap) if cap is not None else None
        launcher = Launcher(self.results_dir, self._plan_recorder, self._code_id, socket.gethostname(), base_env,
                            str(store.path), self._preparer, self._sampler, logs=self._logs)
        recorder = Recorder(primary=self.spec.metrics.primary.name, metrics=self.spec.metrics.all,
                            shared=shared.get, gpu_models=self._gpu_models, sampler=self._sampler,
                            hide=tuple(known_fingerprints(self.results_dir)), logs=self._logs)
        st = LoopState(store=store, backend=backend, queue=queue, budget=budget, plan=self._plan_recorder,
                       eta=Eta(queue.estimates, self.jobs), tally=Tally(progress), recorder=recorder,
                       launcher=launcher, existing=existing, lookahead=4 * self.jobs)
        self._prepare_ahead(st)
        return st

    def _prepare_ahead(self, st: LoopState) -> None:
        if self._preparer is not None:
            self._preparer.ahead(r for r in st.queue.ahead(st.lookahead) if r.run_id not in st.existing)

    # ------------------------------------------------------------------ the loop

    def _loop(self, st: LoopState) -> None:
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
    def _after_launch(st: LoopState) -> None:
        while st.after_launch:
            st.after_launch.pop(0)()

    def _top_up(self, st: LoopState) -> bool:
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
                        self.on_event(SweepEvent(EventKind.FINISH, r, 0, progress, status=state))
                    else:
                        st.queue.runs.append(r)
                        free -= 1
                self._check_ledger(st)
                self._launch_what_fits(st)
        return False

    def _check_ledger(self, st: LoopState) -> None:
        problem = self._guard.check()
        if problem is not None:
            st.lost = problem
            raise self._lost(problem)

    def _prune(self, st: LoopState, run_id: str, reason: str) -> None:
        """Stop ``run_id`` for its feeder: dropped from the queue, or killed where it runs."""
        queued = next((r for r in st.queue if r.run_id == run_id), None)
        if queued is not None:
            st.queue.runs.remove(queued)
            st.store.set_status(run_id, PRUNED)
            st.tally.progress.pruned += 1
            self.on_event(SweepEvent(EventKind.FINISH, queued, 0, st.tally.progress, status=PRUNED, error=reason))
            return
        for attempt_id, flight in st.inflight.items():
            if flight.run.run_id == run_id and attempt_id not in self._pruning and st.backend.cancel(attempt_id):
                self._pruning[attempt_id] = reason

    def _launch_what_fits(self, st: LoopState) -> None:
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
            started = st.launcher.start(st.store, backend, run)
            if isinstance(started, LaunchFailed):
                # Counted like any failure: in the progress, the summary and the exit code.
                st.tally.fail(run)
                self.on_event(SweepEvent(EventKind.FINISH, run, started.number, progress, status=FAILED,
                                         failure_class=triage.LAUNCH, error=started.error))
                continue
            launch, gpus = started.launch, started.gpus
            st.inflight[launch.attempt_id] = InFlight(run, launch.number, time.monotonic(), gpus)
            progress.running = len(st.inflight)
            self.on_event(SweepEvent(EventKind.START, run, launch.number, progress))

    def _on_outcome(self, st: LoopState, outcome: Outcome) -> None:
        """Record an ended attempt, then count it, queue its retry, or report it finished."""
        flight = st.inflight.pop(outcome.launch.attempt_id)
        run, progress = flight.run, st.tally.progress
        if outcome.launch.attempt_id in self._pruning:
            pruned = record_pruned(st.store, outcome, st.recorder, self._pruning.pop(outcome.launch.attempt_id))
            progress.running = len(st.inflight)
            progress.pruned += 1
            self.on_event(SweepEvent(EventKind.FINISH, run, flight.number, progress, status=PRUNED, error=pruned.error,
                                     duration=pruned.duration))
            return
        result = record_attempt(st.store, outcome, st.recorder, gpus=flight.gpus,
                                retried=st.budget.allows_another(run), later=st.after_launch)
        status, duration = result.status, result.duration
        progress.running = len(st.inflight)
        st.tally.note_devices(outcome, flight.gpus)
        cls = result.failure_class or ""
        if status == COMPLETED:
            progress.completed += 1
            st.eta.record(duration)
            st.queue.learn(run, duration)
        elif status == INTERRUPTED:
            st.tally.interrupted += 1
        elif st.budget.charge(run, cls):
            st.queue.retry_first(for_retry(run, cls))
            st.store.set_status(run.run_id, PENDING)
            progress.eta_s = st.eta.get(st.queue, [(f.run, f.started) for f in st.inflight.values()])
            self.on_event(SweepEvent(EventKind.RETRY, run, flight.number, progress, status=FAILED,
                                     duration=duration, failure_class=cls, error=result.error))
            return
        else:
            st.tally.fail(run)
        progress.eta_s = st.eta.get(st.queue, [(f.run, f.started) for f in st.inflight.values()])
        self.on_event(SweepEvent(EventKind.FINISH, run, flight.number, progress, status=status, value=result.value,
                                 metric=result.metric, duration=duration, failure_class=result.failure_class,
                                 error=result.error))

    def _drop_unplaceable(self, st: LoopState, among: Collection[Run] | None = None) -> None:
        """Fail the queued runs the backend says can never start (no device large enough, ...).
        ``among``: runs that include every queued one, to ask the backend about instead."""
        if type(st.backend).why_never is Backend.why_never:
            return  # the protocol's default: any run may start some day; spare the scan
        for run, reason in st.queue.remove_never_fitting(st.backend.why_never, among):
            with st.store.transaction():
                st.plan.ensure(run)
                attempt_id, number = st.store.start_attempt(run.run_id, host=st.launcher.host)
            error = f"cannot be placed: {reason}"
            st.store.finish_attempt(attempt_id, run.run_id, status=FAILED, run_status=FAILED,
                                    failure_class=triage.LAUNCH, error=error)
            st.tally.fail(run)
            self.on_event(SweepEvent(EventKind.FINISH, run, number, st.tally.progress, status=FAILED,
                                     failure_class=triage.LAUNCH, error=error))

    def _pass_on_warnings(self, st: LoopState) -> None:
        logs = self._logs.take_warnings() if self._logs is not None else []
        for text in st.backend.warnings() + logs:
            st.tally.warnings.append(text)
            self.on_event(SweepEvent(EventKind.WARNING, None, 0, st.tally.progress, error=text))

    def _pass_on_placements(self, st: LoopState) -> None:
        """Record what a cluster scheduler said of attempts (job ids, queue reasons, nodes, GPUs)."""
        found = st.backend.placements()
        if found:
            st.store.set_placements(found)

    def _adopt(self, st: LoopState) -> None:
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
                launch = st.launcher.make_launch(run, attempt.attempt_id, attempt.number)
                launch.gpus = [int(g) for g in (attempt.gpus or "").split(",") if g.isdigit()] or None
                if st.backend.adopt(launch, job_id):
                    adopted.append(launch)
                    if self._logs is not None:
                        self._logs.track(launch.log_path)
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
            st.inflight[launch.attempt_id] = InFlight(launch.run, launch.number, time.monotonic(), launch.gpus)
            self.on_event(SweepEvent(EventKind.START, launch.run, launch.number, st.tally.progress))
        st.tally.progress.running = len(st.inflight)
        self._pass_on_placements(st)

    def _stop_in_flight(self, st: LoopState) -> None:
        """Terminate what still runs (a stop, an error) and record it as interrupted."""
        backend = st.backend
        if not (st.inflight or backend.running()):
            return
        stopped = backend.terminate_all(STOP_GRACE_S)
        if st.lost is None:
            self._pass_on_placements(st)
        for outcome in stopped:
            flight = st.inflight.pop(outcome.launch.attempt_id, None)
            if flight is None:
                continue  # started, but its attempt's row was never committed (a full disk)
            outcome.interrupted = True
            st.tally.interrupted += 1
            try:
                # A lost ledger is not written to: it may now be someone's backup.
                record_attempt(st.store, outcome, st.recorder, gpus=flight.gpus, write_ledger=st.lost is None)
            except (OSError, LedgerError) as exc:
                if not is_disk_full(exc):
                    raise
                # Left 'running' in the ledger: the next sweep records it as lost, and runs it.


# Attribute getters for passes over every run of a plan: map() with them runs at C speed, a tenth
# of a Python loop's time at 100,000 runs.
_WORKDIR, _RUN_ID, _RESOURCES = attrgetter("workdir"), attrgetter("run_id"), attrgetter("resources")


