"""Reclaiming GPUs from the caller's own idle-held processes (``benchlab gpus --reclaim``).

A process is ended only when it is the caller's and the driver shows it holding
memory on that device at that moment: the plan lists processes the driver
reports with memory held, and :func:`confirm` reads the driver again right
before the signals, dropping any the device no longer lists (or lists with no
memory). It is the caller's when the process table says its real uid is the
caller's, read again right before it is signalled, together with its start
time, so a pid reused by someone else in between is never touched. What was
freed is measured afterwards (:func:`measured_freed`), never assumed from what
the processes held. Everything else on an
idle-held device is left alone and listed with the reason: another user's process,
one whose owner cannot be seen from here (another container, a pid the process
table does not know), or memory held with no process listed at all.

Each of the caller's processes gets SIGTERM, then SIGKILL once ``grace_s`` has
passed without it exiting (:func:`benchlab.execute.proctree.end`); a zombie counts as
gone, as it holds no GPU memory.

:func:`end_and_measure` is the whole of it after the plan and the user's yes: confirm, end, wait
for the driver to let go, measure (``benchlab gpus --reclaim`` prints what it returns).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass

import psutil

from benchlab.execute.gpus import DeviceReading, DeviceState, GpuProcess, Inventory
from benchlab.execute.proctree import KILL_GRACE_S, end

#: Seconds a process may take to go after its SIGKILL before it is reported as still running.
SIGKILL_WAIT_S = 5.0
#: Seconds the driver may take to show an ended process's memory as free.
RELEASE_WAIT_S = 5.0


@dataclass(frozen=True)
class Holder:
    """A process holding an idle-held device, and what reclaiming makes of it."""

    device: int
    process: GpuProcess
    #: None when it is the caller's; else why it is left alone.
    refusal: str | None
    #: The kernel's start time when it was looked at, to tell it from a reused pid.
    started: float | None = None
    #: Its command line, as the process table shows it ('' when it cannot be read).
    command: str = ""


@dataclass(frozen=True)
class ReclaimPlan:
    """What ``--reclaim`` would do: ``mine`` to end, ``left`` alone (with reasons), and
    idle-held ``unseen`` devices whose memory no listed process holds."""

    mine: list[Holder]
    left: list[Holder]
    unseen: list[int]


@dataclass(frozen=True)
class Freed:
    """The outcome for one process: ``how`` is ``SIGTERM``, ``SIGKILL``, ``gone`` (it had ended
    by itself) or ``failed: <reason>``."""

    holder: Holder
    how: str


def _look(pid: int) -> tuple[int | None, float | None, str]:
    """(real uid, start time, command line) of ``pid`` from the process table, (None, None, '') if not visible."""
    try:
        proc = psutil.Process(pid)
        uid, started = proc.uids().real, proc.create_time()
    except (psutil.Error, OSError):
        return None, None, ""
    try:
        command = " ".join(proc.cmdline())
    except (psutil.Error, OSError):
        command = ""
    return uid, started, command


def _protected() -> set[int]:
    """pid 1, this process and its ancestors: never ended, whoever owns them."""
    out = {0, 1, os.getpid()}
    try:
        out.update(p.pid for p in psutil.Process().parents())
    except psutil.Error:
        pass
    return out


def plan(states: Iterable[DeviceState], uid: int | None = None) -> ReclaimPlan:
    """Sort the processes on idle-held devices into the caller's (``uid``, default this
    process's real uid) and the rest."""
    uid = os.getuid() if uid is None else uid
    mine: list[Holder] = []
    left: list[Holder] = []
    unseen: list[int] = []
    protected = _protected()
    for state in states:
        if state.verdict != "idle-held":
            continue
        if not state.processes:
            unseen.append(state.index)
        for proc in state.processes:
            owner_uid, started, command = _look(proc.pid)
            if proc.pid in protected:
                left.append(Holder(state.index, proc, "it is init or the process asking (or one of its parents)"))
            elif owner_uid is None:
                left.append(Holder(state.index, proc, "its owner cannot be seen from here "
                                   "(another container, or it has ended)"))
            elif owner_uid != uid:
                who = proc.user or f"uid {owner_uid}"
                left.append(Holder(state.index, proc, f"it belongs to {who}, not to you"))
            elif not proc.used_memory_mib:
                left.append(Holder(state.index, proc, _NO_MEMORY, started, command))
            else:
                mine.append(Holder(state.index, proc, None, started, command))
    return ReclaimPlan(mine, left, unseen)


_NO_MEMORY = "the driver does not show it holding memory on this GPU"


def confirm(holders: list[Holder], readings: Iterable[DeviceReading]) -> tuple[list[Holder], list[Holder]]:
    """Split ``holders`` by a reading taken now: those the driver still shows holding memory on their
    device, and the others (with the reason), which must not be signalled."""
    held = {(r.index, p.pid): p.used_memory_mib for r in readings for p in r.processes}
    still: list[Holder] = []
    gone: list[Holder] = []
    for h in holders:
        mib = held.get((h.device, h.process.pid))
        if mib:
            still.append(h)
        else:
            why = _NO_MEMORY if (h.device, h.process.pid) in held else \
                "the driver no longer lists it on this GPU"
            gone.append(Holder(h.device, h.process, why, h.started, h.command))
    return still, gone


def measured_freed(before: Iterable[DeviceReading], after: Iterable[DeviceReading]) -> dict[int, int]:
    """MiB of memory freed on each device between two readings (used before minus used after, at least 0)."""
    used_after = {r.index: r.memory_used_mib for r in after}
    return {r.index: max(0, r.memory_used_mib - used_after[r.index]) for r in before if r.index in used_after}


def _same(holder: Holder, uid: int) -> psutil.Process | None:
    """The holder's process if it is still the one planned (same start time, still ours)."""
    try:
        proc = psutil.Process(holder.process.pid)
        if proc.uids().real != uid or holder.started is None or abs(proc.create_time() - holder.started) > 1e-3:
            return None
        return proc
    except (psutil.Error, OSError):
        return None


def reclaim(holders: list[Holder], grace_s: float = KILL_GRACE_S, uid: int | None = None) -> list[Freed]:
    """End the caller's ``holders``: SIGTERM to all at once, SIGKILL to those alive after ``grace_s``."""
    uid = os.getuid() if uid is None else uid
    out: dict[int, Freed] = {}
    live: dict[int, Holder] = {}
    procs: list[psutil.Process] = []
    for h in holders:
        proc = _same(h, uid)
        if proc is None:
            out[h.process.pid] = Freed(h, "gone")
        else:
            live[proc.pid] = h
            procs.append(proc)
    # Each process is signalled on its own, not its group: a holder's group may hold
    # processes of the caller's that hold no device.
    ending = end(procs, grace_s, kill_wait=SIGKILL_WAIT_S)
    for pid, exc in ending.missed.items():
        out[pid] = Freed(live[pid], "gone" if isinstance(exc, psutil.NoSuchProcess) else f"failed: {exc}")
    for proc in ending.termed:
        out[proc.pid] = Freed(live[proc.pid], "SIGTERM")
    for proc in ending.killed:
        out[proc.pid] = Freed(live[proc.pid], "SIGKILL")
    for proc in ending.survivors:
        out[proc.pid] = Freed(live[proc.pid], "failed: still running after SIGKILL")
    return [out[h.process.pid] for h in holders]


@dataclass(frozen=True)
class Reclaimed:
    """What :func:`end_and_measure` did, and what the driver measured around it."""

    #: One outcome per process signalled or found gone, in the order given.
    freed: list[Freed]
    #: Holders the driver no longer showed holding memory right before the signals: left alone.
    gone: list[Holder]
    #: (device, pid) of processes ended whose entry the driver still listed once the wait was over.
    lingering: list[tuple[int, int]]
    #: The readings right before the signals and after the wait.
    before: list[DeviceReading]
    after: list[DeviceReading]

    @property
    def devices(self) -> list[int]:
        """The devices of the processes signalled or found gone, in index order."""
        return sorted({f.holder.device for f in self.freed})

    @property
    def measured_freed_mib(self) -> dict[int, int]:
        """MiB freed on each of :attr:`devices` as the driver measures it (used before minus used after)."""
        measured = measured_freed(self.before, self.after)
        return {d: measured.get(d, 0) for d in self.devices}

    def used_mib(self, device: int, *, after: bool) -> int | None:
        """Memory in use on ``device`` before the signals, or after the wait (None: not read)."""
        readings = self.after if after else self.before
        return next((r.memory_used_mib for r in readings if r.index == device), None)

    @property
    def failed(self) -> bool:
        """Whether some process could not be ended."""
        return any(f.how.startswith("failed") for f in self.freed)


def end_and_measure(inventory: Inventory, holders: list[Holder], grace_s: float = KILL_GRACE_S,
                    release_wait_s: float = RELEASE_WAIT_S, uid: int | None = None,
                    clock: Callable[[], float] = time.monotonic,
                    sleep: Callable[[float], None] = time.sleep) -> Reclaimed:
    """End the caller's planned ``holders`` (:func:`plan`'s ``mine``, after the user said yes) and
    measure what that freed: read the driver and drop any holder it no longer shows holding memory
    (:func:`confirm`), end the rest (:func:`reclaim`), then read again until the driver lists none of
    the ended processes, or for ``release_wait_s`` at most, and compare the two readings."""
    before = inventory.read()
    mine, gone = confirm(holders, before)
    freed = reclaim(mine, grace_s=grace_s, uid=uid)
    ended = {(f.holder.device, f.holder.process.pid) for f in freed if f.how in ("SIGTERM", "SIGKILL", "gone")}
    deadline = clock() + release_wait_s
    after = inventory.read()
    while any((r.index, p.pid) in ended for r in after for p in r.processes) and clock() < deadline:
        sleep(0.25)
        after = inventory.read()
    lingering = [(r.index, p.pid) for r in after for p in r.processes if (r.index, p.pid) in ended]
    return Reclaimed(freed, gone, lingering, before, after)
