"""Ending processes on this machine: SIGTERM, a grace period, SIGKILL.

The one definition of that sequence (:func:`end`), used by the sweep's crash recovery (what
a benchlab that died left running, found in the ledger: :func:`kill_tree`), by the Slurm
backend on the node (a run's timeout, a job's cancellation), and by ``benchlab gpus
--reclaim``. The local backend never blocks on a grace period: it sends the two signals
with :func:`signal_tree` from its event loop, :data:`KILL_GRACE_S` apart unless told
otherwise.

An attempt's processes are its process group plus any descendant that left it (``setsid``);
every one of them carries the attempt's key (:data:`ATTEMPT_KEY_ENV`) in its environment
unless it cleared it, which is how strays are found when all else is gone.

The Ray backend keeps its own two copies of the same sequence (in the task and in the
worker's reaper): they are pickled by value to workers where benchlab may not be installed,
so they may use the standard library only.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

import psutil

#: Seconds between SIGTERM and SIGKILL.
KILL_GRACE_S = 5.0
#: The environment variable that names an attempt's ledger and id (``<ledger>#<attempt id>``)
#: in each of its processes.
ATTEMPT_KEY_ENV = "BENCHLAB_ATTEMPT_KEY"
#: How far a process's kernel start time may lie from the clock reading taken as it was spawned
#: and still be the same process: the kernel's figure rests on the boot time in whole seconds.
START_TOLERANCE_S = 2.0

_BOOT_TIME: float | None = None
_CLOCK_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def process_start_time(pid: int) -> float | None:
    """The kernel's start time of ``pid`` (seconds since the epoch), to tell it from a reused pid.

    The same figure as ``psutil.Process(pid).create_time()``; on Linux it is read
    from /proc directly, with the boot time read once, as it is taken per launch.
    """
    global _BOOT_TIME
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            fields = fh.read().rsplit(b")", 1)[1].split()
        if _BOOT_TIME is None:
            _BOOT_TIME = psutil.boot_time()
        return _BOOT_TIME + int(fields[19]) / _CLOCK_TICKS  # field 22: starttime, in clock ticks
    except (OSError, IndexError, ValueError):
        pass
    try:
        return psutil.Process(pid).create_time()
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        return None


def descendants(pid: int) -> list[psutil.Process]:
    """Every live descendant of ``pid`` (empty when it is gone or cannot be read)."""
    try:
        return psutil.Process(pid).children(recursive=True)
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        return []


def is_alive(proc: psutil.Process) -> bool:
    """Whether ``proc`` still runs (a zombie does not: it holds no memory and its parent reaps
    it, not us); one that cannot be read counts as running."""
    try:
        return proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False
    except psutil.Error:
        return True


def pgid_of(pid: int) -> int | None:
    try:
        return os.getpgid(pid)
    except (ProcessLookupError, PermissionError):
        return None


def signal_tree(pgid: int | None, sig: int, extra: Sequence[psutil.Process] = ()) -> dict[int, psutil.Error]:
    """Send ``sig`` to a process group (none when ``pgid`` is None) and to ``extra``, processes
    that may have left it (``setsid``); returns, by pid, those of ``extra`` it could not reach."""
    if pgid is not None:
        try:
            os.killpg(pgid, sig)
        except (ProcessLookupError, PermissionError):
            pass
    missed: dict[int, psutil.Error] = {}
    for proc in extra:
        try:
            proc.send_signal(sig)
        except psutil.Error as exc:
            missed[proc.pid] = exc
    return missed


@dataclass(frozen=True)
class Ending:
    """What :func:`end` made of the processes it was given (``procs`` and ``watch``)."""

    #: Exited within the grace period.
    termed: list[psutil.Process] = field(default_factory=list)
    #: Still running at its end, and sent SIGKILL.
    killed: list[psutil.Process] = field(default_factory=list)
    #: Of ``killed``, those still running ``kill_wait`` seconds after the SIGKILL.
    survivors: list[psutil.Process] = field(default_factory=list)
    #: By pid, those of ``procs`` a signal could not reach: ``psutil.NoSuchProcess`` for one that
    #: had ended before the SIGTERM, else why it was refused (they are in no other list).
    missed: dict[int, psutil.Error] = field(default_factory=dict)


def end(procs: Sequence[psutil.Process], grace: float = KILL_GRACE_S, *, group: int | None = None,
        watch: Sequence[psutil.Process] = (), kill_wait: float = 0.0) -> Ending:
    """SIGTERM to ``procs`` and to process ``group``; up to ``grace`` seconds for them to exit;
    then, if any is left, SIGKILL to the group and to those of ``procs`` left.

    The grace period ends early once every one of ``procs`` and ``watch`` has exited (a zombie
    has); ``watch`` names processes waited for but signalled only through the group (its
    members, the group's leader), so that none gets the signal twice. With ``kill_wait``, waits
    up to that long for the killed ones to go, to report ``survivors``.
    """
    missed = signal_tree(group, signal.SIGTERM, procs)
    reached = [p for p in procs if p.pid not in missed]
    alive = _wait_for_exit([*reached, *watch], grace)
    termed = [p for p in [*reached, *watch] if p not in alive]
    if not alive:
        return Ending(termed, [], [], missed)
    late = signal_tree(group, signal.SIGKILL, [p for p in alive if p in reached])
    for p in alive:
        if p.pid not in late:
            continue
        if isinstance(late[p.pid], psutil.NoSuchProcess):
            termed.append(p)  # it exited between the last look and the SIGKILL
        else:
            missed[p.pid] = late[p.pid]
    killed = [p for p in alive if p.pid not in late]
    survivors = _wait_for_exit(killed, kill_wait) if kill_wait > 0 else []
    return Ending(termed, killed, survivors, missed)


def _wait_for_exit(procs: list[psutil.Process], timeout: float) -> list[psutil.Process]:
    """Those of ``procs`` still running after at most ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    alive = [p for p in procs if is_alive(p)]
    while alive and time.monotonic() < deadline:
        time.sleep(0.05)
        alive = [p for p in alive if is_alive(p)]
    return alive


def kill_tree(pid: int, pgid: int, proc_start: float | None, grace: float = KILL_GRACE_S) -> bool:
    """Kill what is left of an attempt started by an earlier benchlab (found in the ledger).

    ``pid`` is touched only if its start time matches the recorded one (the clock as it
    was spawned, within ``START_TOLERANCE_S``), and group members only if they started
    after the attempt, so a reused pid or a foreign process is never signalled.
    Returns whether anything was signalled.
    """
    leader_start = process_start_time(pid)
    leader_ours = (leader_start is not None and proc_start is not None
                   and abs(leader_start - proc_start) < START_TOLERANCE_S)
    if leader_start is not None and not leader_ours:
        return False  # the pid now belongs to someone else
    floor = (proc_start or 0.0) - START_TOLERANCE_S
    members = []
    for proc in psutil.process_iter(["pid", "create_time"]):
        if proc.pid != pid and pgid_of(proc.pid) == pgid and (proc.info["create_time"] or 0) >= floor:
            members.append(proc)
    extra = descendants(pid) if leader_ours else []
    if not leader_ours and not members and not extra:
        return False
    leader = []
    if leader_ours:
        try:
            leader = [psutil.Process(pid)]
        except psutil.NoSuchProcess:
            pass
    end(extra, grace, group=pgid, watch=[*members, *leader])
    return True


def kill_strays(ledger_key: str) -> int:
    """Kill processes of this ledger's attempts that outlived them (a child that left its
    process group with ``setsid`` and kept running); returns how many.

    Found by the :data:`ATTEMPT_KEY_ENV` every attempt's processes inherit; done once
    per sweep, not per run, because reading every process's environment is slow.
    """
    prefix = f"{ledger_key}#"
    me = os.getpid()
    killed = 0
    for proc in psutil.process_iter(["pid"]):
        if proc.pid == me:
            continue
        try:
            key = proc.environ().get(ATTEMPT_KEY_ENV, "")
        except (psutil.Error, OSError):
            continue
        if key.startswith(prefix):
            try:
                proc.kill()
                killed += 1
            except psutil.Error:
                pass
    return killed
