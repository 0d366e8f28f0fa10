"""Ending an attempt's process tree on this machine: SIGTERM, a grace period, SIGKILL.

One definition, used by the local backend (timeouts and stops of the runs it started) and by
the sweep's crash recovery (what a benchlab that died left running, found in the ledger).
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
    """Whether ``proc`` still runs (a zombie does not)."""
    try:
        return proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def pgid_of(pid: int) -> int | None:
    try:
        return os.getpgid(pid)
    except (ProcessLookupError, PermissionError):
        return None


def signal_tree(pgid: int, sig: int, extra: list[psutil.Process] | tuple[()] = ()) -> None:
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
    targets = [*members, *extra]
    if not leader_ours and not targets:
        return False
    signal_tree(pgid, signal.SIGTERM, extra)
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline:
        alive = [p for p in targets if is_alive(p)]
        if not alive and not (leader_ours and psutil.pid_exists(pid) and is_alive(psutil.Process(pid))):
            return True
        time.sleep(0.05)
    signal_tree(pgid, signal.SIGKILL, extra)
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
