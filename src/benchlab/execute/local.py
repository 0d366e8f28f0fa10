"""The local backend: each attempt a subprocess in its own process group on this machine.

Slots are counted in CPU cores (``-j``) and, when GPUs are in play, in GPU
shares handed out by the placement policy. A waiter thread per process turns
each exit into an event, so a freed slot is refilled at once rather than at
the next poll. Timeouts and stops kill the whole process tree: SIGTERM to the
group and every descendant found, a grace period, then SIGKILL.
"""

from __future__ import annotations

import os
import queue
import signal
import socket
import subprocess
import threading
import time
from dataclasses import dataclass, field

import psutil

from benchlab.execute.base import Launch, Outcome, ProcessInfo, register
from benchlab.plan import Run

KILL_GRACE_S = 5.0


def process_start_time(pid: int) -> float | None:
    """The kernel's start time of ``pid`` (seconds since the epoch), to tell it from a reused pid."""
    try:
        return psutil.Process(pid).create_time()
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        return None


def _descendants(pid: int) -> list[psutil.Process]:
    try:
        return psutil.Process(pid).children(recursive=True)
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        return []


def signal_tree(pgid: int, sig: int, extra: list[psutil.Process] = ()) -> None:  # type: ignore[assignment]
    """Send ``sig`` to a process group and to descendants that left it (``setsid``)."""
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass
    for proc in extra:
        try:
            proc.send_signal(sig)
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            pass


def kill_tree(pid: int, pgid: int, proc_start: float | None, grace: float = KILL_GRACE_S) -> bool:
    """Kill what is left of an attempt started by an earlier benchlab (found in the ledger).

    ``pid`` is touched only if its start time matches the recorded one, and group
    members only if they started after the attempt, so a reused pid or a foreign
    process is never signalled. Returns whether anything was signalled.
    """
    leader_start = process_start_time(pid)
    leader_ours = (leader_start is not None and proc_start is not None
                   and abs(leader_start - proc_start) < 1.0)
    if leader_start is not None and not leader_ours:
        return False  # the pid now belongs to someone else
    floor = (proc_start or 0.0) - 1.0
    members = []
    for proc in psutil.process_iter(["pid", "create_time"]):
        if proc.pid != pid and _pgid_of(proc.pid) == pgid and (proc.info["create_time"] or 0) >= floor:
            members.append(proc)
    extra = _descendants(pid) if leader_ours else []
    targets = [*members, *extra]
    if not leader_ours and not targets:
        return False
    signal_tree(pgid, signal.SIGTERM, extra)
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline:
        alive = [p for p in targets if _alive(p)]
        if not alive and not (leader_ours and psutil.pid_exists(pid) and _alive(psutil.Process(pid))):
            return True
        time.sleep(0.05)
    signal_tree(pgid, signal.SIGKILL, extra)
    return True


def _pgid_of(pid: int) -> int | None:
    try:
        return os.getpgid(pid)
    except (ProcessLookupError, PermissionError):
        return None


def _alive(proc: psutil.Process) -> bool:
    try:
        return proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


@dataclass
class _Running:
    launch: Launch
    proc: subprocess.Popen[bytes]
    started: float
    deadline: float | None
    kill_at: float | None = None
    timed_out: bool = False
    stopping: bool = False
    descendants: list[psutil.Process] = field(default_factory=list)


@register("local")
class LocalBackend:
    """Runs attempts as local subprocesses, at most ``jobs`` at a time."""

    name = "local"

    def __init__(self, jobs: int, grace: float = KILL_GRACE_S):
        self.jobs = jobs
        self.grace = grace
        self.host = socket.gethostname()
        self._running: dict[int, _Running] = {}
        self._events: queue.SimpleQueue[int | None] = queue.SimpleQueue()

    # -- capacity -------------------------------------------------------------

    def fits(self, run: Run) -> bool:
        return len(self._running) < self.jobs

    def running(self) -> int:
        return len(self._running)

    # -- lifecycle ------------------------------------------------------------

    def start(self, launch: Launch) -> ProcessInfo:
        with open(launch.log_path, "ab", buffering=0) as log:
            proc = subprocess.Popen(
                launch.command, shell=True, cwd=launch.cwd, env=launch.env,
                stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                start_new_session=True, close_fds=True,
            )
        now = time.monotonic()
        deadline = now + launch.timeout if launch.timeout else None
        self._running[proc.pid] = _Running(launch, proc, time.time(), deadline)
        threading.Thread(target=self._wait_one, args=(proc,), daemon=True,
                         name=f"wait-{proc.pid}").start()
        return ProcessInfo(proc.pid, proc.pid, process_start_time(proc.pid), self.host)

    def _wait_one(self, proc: subprocess.Popen[bytes]) -> None:
        proc.wait()
        self._events.put(proc.pid)

    def wake(self) -> None:
        self._events.put(None)

    def wait(self, timeout: float | None) -> list[Outcome]:
        end = None if timeout is None else time.monotonic() + timeout
        outcomes: list[Outcome] = []
        while not outcomes:
            self._enforce_deadlines()
            now = time.monotonic()
            limit = self._next_deadline()
            wait_for = None
            if end is not None:
                wait_for = max(0.0, end - now)
            if limit is not None:
                wait_for = max(0.0, limit - now) if wait_for is None else min(wait_for, max(0.0, limit - now))
            try:
                pid = self._events.get(timeout=wait_for)
            except queue.Empty:
                pid = None
                self._enforce_deadlines()
                if end is not None and time.monotonic() >= end:
                    break
                continue
            if pid is None:
                break  # woken
            outcome = self._reap(pid)
            if outcome is not None:
                outcomes.append(outcome)
            # Collect whatever else has already ended, without blocking.
            while True:
                try:
                    more = self._events.get_nowait()
                except queue.Empty:
                    break
                if more is None:
                    continue
                extra = self._reap(more)
                if extra is not None:
                    outcomes.append(extra)
        return outcomes

    def _next_deadline(self) -> float | None:
        times = [t for r in self._running.values() for t in (r.deadline, r.kill_at)
                 if t is not None and not (t is r.deadline and r.timed_out)]
        return min(times) if times else None

    def _enforce_deadlines(self) -> None:
        now = time.monotonic()
        for r in self._running.values():
            if r.deadline is not None and not r.timed_out and now >= r.deadline:
                r.timed_out = True
                self._term(r, now)
            elif r.kill_at is not None and now >= r.kill_at:
                r.kill_at = None
                signal_tree(r.proc.pid, signal.SIGKILL, r.descendants)

    def _term(self, r: _Running, now: float) -> None:
        r.descendants = _descendants(r.proc.pid)
        signal_tree(r.proc.pid, signal.SIGTERM, r.descendants)
        r.kill_at = now + self.grace

    def _reap(self, pid: int) -> Outcome | None:
        r = self._running.pop(pid, None)
        if r is None:
            return None
        # The leader is gone; anything it left in its group must not outlive the attempt.
        signal_tree(pid, signal.SIGKILL, [p for p in r.descendants if _alive(p)])
        code = r.proc.returncode
        sig = -code if code is not None and code < 0 else None
        return Outcome(
            launch=r.launch, exit_code=None if sig else code, signal=sig, timed_out=r.timed_out,
            interrupted=r.stopping and not r.timed_out, started=r.started, ended=time.time(),
            node=self.host,
        )

    def terminate_all(self, grace: float) -> list[Outcome]:
        now = time.monotonic()
        for r in self._running.values():
            r.stopping = True
            self._term(r, now)
        deadline = now + grace
        outcomes: list[Outcome] = []
        while self._running and time.monotonic() < deadline:
            outcomes += self.wait(timeout=max(0.0, deadline - time.monotonic()))
        for r in list(self._running.values()):
            signal_tree(r.proc.pid, signal.SIGKILL, r.descendants)
        while self._running:
            outcomes += self.wait(timeout=1.0)
        return outcomes

    def close(self) -> None:
        if self._running:
            self.terminate_all(self.grace)
