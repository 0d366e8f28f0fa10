"""The sweep: runs what is not done yet, on a backend, recording everything in the ledger.

It owns what every backend shares: which runs are still to do, run
directories, attempts and retries, collecting metrics, recovering from a
sweep that died, and stopping cleanly. Progress reaches the caller as
``SweepEvent`` objects through ``on_event``; the library never prints.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil
import yaml

from benchlab.collect import collect_run
from benchlab.execute import triage
from benchlab.execute.base import Backend, Launch, Outcome, get_backend, run_dir_of
from benchlab.execute.local import kill_tree
from benchlab.execute.provenance import sweep_provenance, write_provenance
from benchlab.plan import Run, expand
from benchlab.spec import Spec
from benchlab.store import COMPLETED, FAILED, INTERRUPTED, TODO_STATES, ResultsLock, Store

STOP_GRACE_S = 5.0
ATTEMPT_ENV = "BENCHLAB_ATTEMPT_KEY"
_DUMPER = getattr(yaml, "CSafeDumper", yaml.SafeDumper)


@dataclass
class Progress:
    """Counts over the runs of this sweep's plan."""

    total: int
    completed: int = 0
    failed: int = 0
    running: int = 0
    skipped: int = 0  # already completed before this sweep
    eta_s: float | None = None

    @property
    def finished(self) -> int:
        return self.completed + self.failed + self.skipped


@dataclass
class SweepEvent:
    """Something that happened: ``begin`` (the plan, before any run), or ``start``, ``finish``,
    ``retry`` of a run."""

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

    @property
    def exit_code(self) -> int:
        if self.stopped:
            return 130
        return 1 if self.failed else 0


def default_jobs(cpus_per_run: float) -> int:
    """How many runs fit at once on this machine's cores."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    return max(1, int(cores // cpus_per_run)) if cpus_per_run > 0 else cores


def write_benchmark_meta(store: Store, spec: Spec, results_dir: Path) -> None:
    """Record what the report needs to know about the benchmark, in the ledger and next to it."""
    dump = spec.model_dump(mode="json", by_alias=True, exclude_none=True)
    store.set_meta(
        name=spec.name, description=spec.description, primary=spec.metrics.primary.name,
        goals={m.name: m.goal for m in spec.metrics.all},
        metrics=[m.name for m in spec.metrics.all], baseline=spec.baseline,
        tasks=[t.name for t in spec.tasks], configs=[c.name for c in spec.configs],
        targets={t.name: t.target for t in spec.tasks},
        references={t.name: [t.reference.low, t.reference.high] for t in spec.tasks if t.reference},
        seeds=spec.seed_list, spec_path=str(spec.path.resolve()) if spec.path else None,
        overrides=spec.overrides, spec=dump,
    )
    (results_dir / "benchmark.json").write_text(json.dumps(
        {"spec": dump, "spec_path": str(spec.path.resolve()) if spec.path else None,
         "overrides": spec.overrides}, indent=1, default=str))


class Sweep:
    """One invocation of ``benchlab run`` over a spec and a results folder."""

    def __init__(self, spec: Spec, results_dir: Path | str, *, jobs: int | None = None,
                 rerun_failed: bool = False, backend: str | Backend = "local",
                 on_event: Callable[[SweepEvent], None] | None = None,
                 max_failures: int | None = None, backend_options: dict[str, Any] | None = None):
        self.spec = spec
        self.results_dir = Path(results_dir).resolve()
        self.jobs = jobs or default_jobs(spec.resources.cpus)
        self.rerun_failed = rerun_failed
        self.on_event = on_event or (lambda event: None)
        self.max_failures = max_failures
        self._backend_arg = backend
        self._backend_options = backend_options or {}
        self._stop = threading.Event()
        self.backend: Backend | None = None

    def request_stop(self) -> None:
        """Stop launching, terminate what runs, record it as interrupted (safe from a signal handler)."""
        self._stop.set()
        if self.backend is not None:
            self.backend.wake()

    # ------------------------------------------------------------------ main loop

    def run(self) -> SweepResult:
        t0 = time.monotonic()
        with ResultsLock(self.results_dir):
            store = Store.create(self.results_dir)
            try:
                return self._run(store, t0)
            finally:
                store.close()

    def _make_backend(self) -> Backend:
        if not isinstance(self._backend_arg, str):
            return self._backend_arg
        factory = get_backend(self._backend_arg)
        if self._backend_arg == "local":
            return factory(jobs=self.jobs, **self._backend_options)
        return factory(spec=self.spec, results_dir=self.results_dir, **self._backend_options)

    def _run(self, store: Store, t0: float) -> SweepResult:
        spec = self.spec
        runs = expand(spec)
        write_benchmark_meta(store, spec, self.results_dir)
        store.register(runs)
        self._recover(store)
        statuses = store.statuses()
        wanted = set(TODO_STATES) | ({FAILED} if self.rerun_failed else set())
        todo = deque(r for r in runs if statuses.get(r.run_id) in wanted)
        progress = Progress(total=len(runs))
        progress.skipped = sum(1 for r in runs if statuses.get(r.run_id) == COMPLETED)
        progress.failed = sum(1 for r in runs if statuses.get(r.run_id) == FAILED and not self.rerun_failed)
        estimates = store.durations()
        self._order(todo, estimates)

        self.on_event(SweepEvent("begin", None, 0, progress))
        self.backend = backend = self._make_backend()
        shared = sweep_provenance(spec.work_path)
        host = socket.gethostname()
        base_env = dict(os.environ)
        base_env.setdefault("PYTHONUNBUFFERED", "1")
        db_key = str(store.path)
        tries: dict[str, int] = {}
        inflight: dict[int, tuple[Run, int, int, float]] = {}
        durations: list[float] = []
        failed_runs: list[str] = []
        interrupted = 0
        primary = spec.metrics.primary.name
        metrics = spec.metrics.all

        def eta() -> float | None:
            left = len(todo) + len(inflight)
            if not left:
                return 0.0
            per = (sum(durations) / len(durations)) if durations else (
                sum(estimates.values()) / len(estimates) if estimates else None)
            return None if per is None else per * left / max(1, min(self.jobs, left))

        try:
            while (todo or inflight) and not self._stop.is_set():
                # Launch while slots allow; a run that does not fit now waits, others may pass it.
                launched = True
                while launched and todo and not self._stop.is_set():
                    launched = False
                    if self.max_failures is not None and len(failed_runs) >= self.max_failures:
                        todo.clear()
                        break
                    for _ in range(len(todo)):
                        run = todo[0]
                        if backend.fits(run):
                            todo.popleft()
                            tries[run.run_id] = tries.get(run.run_id, 0) + 1
                            launch = self._launch(store, backend, run, host, base_env, db_key, shared)
                            if launch is None:
                                continue
                            inflight[launch.attempt_id] = (run, launch.attempt_id, launch.number,
                                                           time.time())
                            progress.running = len(inflight)
                            self.on_event(SweepEvent("start", run, launch.number, progress))
                            launched = True
                            break
                        todo.rotate(-1)
                if not inflight:
                    break
                for outcome in backend.wait(timeout=None):
                    run, attempt_id, number, started = inflight.pop(outcome.launch.attempt_id)
                    status, event = self._finish(store, outcome, shared, primary, metrics)
                    progress.running = len(inflight)
                    duration = outcome.ended - outcome.started
                    if status == COMPLETED:
                        progress.completed += 1
                        durations.append(duration)
                    elif status == INTERRUPTED:
                        interrupted += 1
                    elif tries[run.run_id] <= run.retries and event.failure_class not in (
                            triage.LAUNCH, triage.TIMEOUT):
                        todo.append(run)
                        store.set_status(run.run_id, "pending")
                        progress.eta_s = eta()
                        self.on_event(SweepEvent("retry", run, number, progress, status=FAILED,
                                                 duration=duration,
                                                 failure_class=event.failure_class,
                                                 error=event.error))
                        continue
                    else:
                        progress.failed += 1
                        failed_runs.append(run.name)
                    progress.eta_s = eta()
                    event.progress = progress
                    event.duration = duration
                    self.on_event(event)
        finally:
            if inflight:
                for outcome in backend.terminate_all(STOP_GRACE_S):
                    run, attempt_id, number, started = inflight.pop(outcome.launch.attempt_id)
                    outcome.interrupted = True
                    self._finish(store, outcome, shared, primary, metrics)
                    interrupted += 1
            backend.close()
        return SweepResult(
            results_dir=self.results_dir, total=len(runs), completed=progress.completed,
            failed=progress.failed, skipped=progress.skipped, interrupted=interrupted,
            stopped=self._stop.is_set(), wall_s=time.monotonic() - t0, failed_runs=failed_runs,
        )

    @staticmethod
    def _order(todo: deque[Run], estimates: dict[tuple[str, str], float]) -> None:
        """Longest expected first (known from earlier attempts); unknown ones keep plan order, first."""
        if not estimates:
            return
        ordered = sorted(todo, key=lambda r: -estimates.get((r.task, r.config), float("inf")))
        todo.clear()
        todo.extend(ordered)

    # ------------------------------------------------------------------ one attempt

    def _launch(self, store: Store, backend: Backend, run: Run, host: str,
                base_env: dict[str, str], db_key: str, shared: dict[str, Any]) -> Launch | None:
        run_dir = run_dir_of(self.results_dir, run.run_id)
        attempt_id, number = store.start_attempt(run.run_id, host=host)
        _prepare_run_dir(run_dir, number)
        (run_dir / "config.yaml").write_text(
            yaml.dump(run.resolved_config(), Dumper=_DUMPER, sort_keys=False))
        env = dict(base_env)
        for key, value in run.env.items():
            env[key] = value.replace("{run_dir}", str(run_dir))
        env.update(BENCHLAB_RUN_DIR=str(run_dir), BENCHLAB_RUN_ID=run.run_id,
                   BENCHLAB_SEED=str(run.seed), BENCHLAB_ATTEMPT=str(number),
                   BENCHLAB_TASK=run.task, BENCHLAB_CONFIG=run.config,
                   **{ATTEMPT_ENV: f"{db_key}#{attempt_id}"})
        launch = Launch(run=run, attempt_id=attempt_id, number=number, run_dir=run_dir,
                        command=run.command_for(run_dir), env=env, cwd=run.workdir,
                        timeout=run.timeout, log_path=run_dir / "train.log")
        try:
            info = backend.start(launch)
        except OSError as exc:
            error = f"could not start: {exc.strerror or exc} ({run.workdir})"
            store.finish_attempt(attempt_id, run.run_id, status=FAILED, run_status=FAILED,
                                 failure_class=triage.LAUNCH, error=error)
            progress = Progress(total=0)
            self.on_event(SweepEvent("finish", run, number, progress, status=FAILED,
                                     failure_class=triage.LAUNCH, error=error))
            return None
        if info.pid is not None:
            store.set_process(attempt_id, info.pid, info.pgid or info.pid, info.proc_start)
        return launch

    def _finish(self, store: Store, outcome: Outcome, shared: dict[str, Any], primary: str,
                metrics: list[Any]) -> tuple[str, SweepEvent]:
        launch = outcome.launch
        run, run_dir = launch.run, launch.run_dir
        tail = triage.log_tail(launch.log_path)
        collected = None
        failure: triage.Verdict | None = None
        if outcome.interrupted:
            failure = triage.Verdict(triage.INTERRUPTED, "interrupted by the user")
        elif outcome.error:
            failure = triage.Verdict(outcome.extra.get("failure_class", triage.LAUNCH), outcome.error)
        elif outcome.exit_code != 0 or outcome.timed_out:
            failure = triage.classify(exit_code=outcome.exit_code, signal=outcome.signal,
                                      timed_out=outcome.timed_out, tail=tail, timeout=launch.timeout)
        else:
            collected = collect_run(run_dir, metrics)
            missing = collected.missing(primary)
            if missing:
                failure = triage.Verdict(triage.MISSING_METRIC, missing)
        if run_dir.exists():
            write_provenance(run_dir, shared, run_id=run.run_id, run=run.name, attempt=launch.number,
                             started=outcome.started, ended=outcome.ended,
                             duration_s=outcome.ended - outcome.started,
                             exit_code=outcome.exit_code, signal=outcome.signal,
                             timed_out=outcome.timed_out, node=outcome.node, gpus=launch.gpus,
                             command=launch.command)
        if outcome.node:  # a cluster backend knows the node only once the attempt has run
            store.conn.execute("UPDATE attempts SET node = ? WHERE attempt_id = ?",
                               (outcome.node, launch.attempt_id))
        if failure is None:
            assert collected is not None
            store.finish_attempt(launch.attempt_id, run.run_id, status=COMPLETED, run_status=COMPLETED,
                                 exit_code=outcome.exit_code, ended=outcome.ended,
                                 metrics=collected.finals, series=collected.series)
            return COMPLETED, SweepEvent("finish", run, launch.number, Progress(0), status=COMPLETED,
                                         value=collected.finals.get(primary), metric=primary)
        status = INTERRUPTED if failure.failure_class == triage.INTERRUPTED else FAILED
        store.finish_attempt(launch.attempt_id, run.run_id, status=status, run_status=status,
                             exit_code=outcome.exit_code, signal=outcome.signal, ended=outcome.ended,
                             failure_class=failure.failure_class, error=failure.error, log_tail=tail)
        return status, SweepEvent("finish", run, launch.number, Progress(0), status=status,
                                  failure_class=failure.failure_class, error=failure.error)

    # ------------------------------------------------------------------ crash recovery

    def _recover(self, store: Store) -> None:
        """Attempts left 'running' by a sweep that died: kill what survives of them, mark them lost."""
        stale = store.attempts(status="running")
        if not stale:
            return
        keys = {f"{store.path}#{a.attempt_id}" for a in stale}
        by_key: dict[str, list[psutil.Process]] = {}
        # Processes started between the ledger write and the pid record are found by their env.
        for proc in psutil.process_iter(["pid"]):
            try:
                key = proc.environ().get(ATTEMPT_ENV)
            except (psutil.Error, OSError):
                continue
            if key in keys:
                by_key.setdefault(key, []).append(proc)
        for attempt in stale:
            if attempt.pid is not None and attempt.pgid is not None:
                kill_tree(attempt.pid, attempt.pgid, attempt.proc_start)
            for proc in by_key.get(f"{store.path}#{attempt.attempt_id}", []):
                try:
                    proc.kill()
                except psutil.Error:
                    pass
            store.finish_attempt(attempt.attempt_id, attempt.run_id, status=INTERRUPTED,
                                 run_status=INTERRUPTED, failure_class=triage.LOST,
                                 error="the benchlab process running it died; run again")


def _prepare_run_dir(run_dir: Path, number: int) -> None:
    """Make the run directory; an earlier attempt's files move to ``attempts/<n>/``.

    Nothing an earlier attempt wrote can then be read as this attempt's metrics.
    """
    run_dir.mkdir(parents=True, exist_ok=True)
    leftovers = [p for p in run_dir.iterdir() if p.name != "attempts"]
    if not leftovers:
        return
    keep = run_dir / "attempts" / str(max(1, number - 1))
    if keep.exists():
        keep = run_dir / "attempts" / f"{max(1, number - 1)}-{int(time.time())}"
    keep.mkdir(parents=True)
    for path in leftovers:
        shutil.move(str(path), keep / path.name)
