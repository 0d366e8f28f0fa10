"""The debug backend: one attempt at a time, run to its end inside :meth:`DebugBackend.start`.

``backend: debug`` (or ``--backend debug``) runs each run's command in the foreground, one after
the other, with no pool, no GPU placement and no process-group bookkeeping: the sweep's loop,
retries, ETA and ledger behave as with any backend, in an order that is easy to follow and to
step through in a debugger. Given a ``target`` (a Python callable, in-process only), it calls
that instead of the command, in the calling thread: the sweep's policies are then tested without
starting a single process, as submitit's debug executor does for its jobs.

What it leaves out, on purpose: the timeout of an in-process target (a callable cannot be stopped
from outside), stopping a run midway (``cancel`` says no), and GPUs (runs see the environment's
``CUDA_VISIBLE_DEVICES`` as it is).
"""

from __future__ import annotations

import socket
import subprocess
import threading
import time
import traceback
from collections.abc import Callable
from typing import IO

from benchlab.execute.base import Backend, Launch, Outcome, ProcessInfo
from benchlab.plan import Run

#: A run done in-process: given the launch (its environment, run directory, log), it returns the
#: exit code; what it prints to the log file it is handed goes to the run's ``train.log``.
Target = Callable[[Launch, IO[str]], int]


class DebugBackend(Backend):
    """Runs each launch to its end as it starts: one at a time, in the calling thread."""

    name = "debug"
    runs_here = True  # run directories and working directories are this machine's
    slots = 1

    def __init__(self, target: Target | None = None):
        self.target = target
        self.host = socket.gethostname()
        self._ended: list[Outcome] = []
        self._woken = threading.Event()

    def fits(self, run: Run) -> bool:
        return not self._ended

    def start(self, launch: Launch) -> ProcessInfo:
        started = time.time()
        exit_code: int | None
        timed_out = False
        # Opened here, as a local start does: the sweep leaves train.log to a backend of this machine.
        with open(launch.log_path, "a", encoding="utf-8") as log:
            if self.target is not None:
                try:
                    exit_code = self.target(launch, log)
                except Exception:  # noqa: BLE001 - a run that raises failed, as a command that exits 1
                    log.write(traceback.format_exc())
                    exit_code = 1
            else:
                log.flush()
                try:
                    exit_code = subprocess.run(launch.command, shell=True, cwd=launch.cwd, env=launch.env,
                                               stdout=log, stderr=subprocess.STDOUT, timeout=launch.timeout,
                                               check=False).returncode
                except subprocess.TimeoutExpired:
                    exit_code, timed_out = None, True
        signal = -exit_code if exit_code is not None and exit_code < 0 else None
        self._ended.append(Outcome(launch=launch, exit_code=None if signal else exit_code, signal=signal,
                                   timed_out=timed_out, started=started, ended=time.time(), node=self.host))
        return ProcessInfo(pid=None, pgid=None, proc_start=None, node=self.host)

    def wait(self, timeout: float | None) -> list[Outcome]:
        if not self._ended and timeout != 0:
            # Nothing runs between starts: only a wake() or the timeout ends the wait.
            self._woken.wait(timeout)
            self._woken.clear()
        ended, self._ended = self._ended, []
        return ended

    def wake(self) -> None:
        self._woken.set()

    def running(self) -> int:
        return len(self._ended)

    def terminate_all(self, grace: float) -> list[Outcome]:
        ended, self._ended = self._ended, []
        for outcome in ended:
            outcome.interrupted = True
        return ended

    def close(self) -> None:
        self._ended = []
