"""Starting one attempt of a run: its row in the ledger, its run directory, its environment, and
the backend's start, in one transaction (:class:`Launcher`).

One transaction from the attempt's row to its pid, one commit per launch: a crash before the
commit leaves a process no row names; it carries this ledger's key in its environment
(``BENCHLAB_ATTEMPT_KEY``), and the next sweep's recovery kills every such process first.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from benchlab import triage
from benchlab.execute.base import Backend, Launch
from benchlab.execute.logcap import LogCap
from benchlab.execute.proctree import ATTEMPT_KEY_ENV
from benchlab.execute.rundir import Preparer, write_run_dir
from benchlab.ledger import FAILED, PlanRecorder, Store, is_disk_full
from benchlab.names.run_files import CONFIG_FILE, LOG_FILE, run_dir_of
from benchlab.plan import Run

if TYPE_CHECKING:
    from benchlab.execute.gpu_sampler import GpuSampler


@dataclass(frozen=True)
class Started:
    """An attempt the backend started, and the devices it placed it on (None: none)."""

    launch: Launch
    gpus: list[int] | None


@dataclass(frozen=True)
class LaunchFailed:
    """A launch the backend refused: the attempt's number and why (already in the ledger)."""

    number: int
    error: str


@dataclass(frozen=True)
class Launcher:
    """What starting an attempt needs, the same for every attempt of a sweep."""

    results_dir: Path
    #: Records the plan a step at a time; a run is recorded before its first attempt.
    plan: PlanRecorder
    code_id: int  # the ledger's id of the code under test, each attempt tagged with it
    host: str
    base_env: dict[str, str]
    db_key: str  # the ledger's path: with an attempt id, the key its processes carry
    #: Writes run directories ahead of their launch (None: each is written at its launch).
    preparer: Preparer | None = None
    sampler: GpuSampler | None = None
    #: The sweep's keeper of the runs' logs (None: no cap), told of each log as its attempt starts.
    logs: LogCap | None = None

    def start(self, store: Store, backend: Backend, run: Run) -> Started | LaunchFailed:
        """Record and start one attempt of ``run`` in one transaction."""
        with store.transaction():
            return self._start(store, backend, run)

    def _start(self, store: Store, backend: Backend, run: Run) -> Started | LaunchFailed:
        run_dir = run_dir_of(self.results_dir, run.run_id)
        self.plan.ensure(run)  # recorded before its attempt, in the same transaction
        attempt_id, number = store.start_attempt(run.run_id, host=self.host)
        store.tag_attempt(attempt_id, self.code_id)
        claimed = number == 1 and self.preparer is not None and self.preparer.claim(run.run_id)
        # A directory written ahead may have been removed since: written again, not blamed on the run.
        if not claimed or not os.path.exists(run_dir / CONFIG_FILE):
            # A local start opens (creates) the log itself: one file creation less before it.
            write_run_dir(run_dir, run, number, log=not backend.runs_here)
        launch = self.make_launch(run, attempt_id, number)
        try:
            info = backend.start(launch)
        except OSError as exc:
            if is_disk_full(exc):
                raise
            where = exc.filename if exc.filename else run.workdir
            error = f"could not start: {exc.strerror or exc} ({where})"
            store.finish_attempt(attempt_id, run.run_id, status=FAILED, run_status=FAILED,
                                 failure_class=triage.LAUNCH, error=error)
            return LaunchFailed(number, error)
        if self.logs is not None:
            self.logs.track(launch.log_path)
        # The backend chose the devices at start; the ledger keeps them with the attempt.
        gpus = list(info.gpus) if info.gpus is not None else None
        store.set_process(attempt_id, info.pid, info.pgid or info.pid, info.proc_start, gpus=gpus)
        if info.placement is not None:
            store.set_placements([info.placement])
        if self.sampler is not None and gpus and info.pid:
            self.sampler.track(attempt_id, gpus, info.pgid or info.pid)
        return Started(launch, gpus)

    def make_launch(self, run: Run, attempt_id: int, number: int) -> Launch:
        """Attempt ``number`` of ``run`` as a backend starts it: its command, environment, log."""
        run_dir = run_dir_of(self.results_dir, run.run_id)
        env = dict(self.base_env)
        for key, value in run.env.items():
            env[key] = value.replace("{run_dir}", str(run_dir))
        env.update(BENCHLAB_RUN_DIR=str(run_dir), BENCHLAB_RUN_ID=run.run_id,
                   BENCHLAB_SEED=str(run.seed), BENCHLAB_ATTEMPT=str(number),
                   BENCHLAB_TASK=run.task, BENCHLAB_CONFIG=run.config,
                   **{ATTEMPT_KEY_ENV: f"{self.db_key}#{attempt_id}"})
        return Launch(run=run, attempt_id=attempt_id, number=number, run_dir=run_dir,
                      command=run.command_for(run_dir), env=env, cwd=run.workdir,
                      timeout=run.timeout, log_path=run_dir / LOG_FILE)
