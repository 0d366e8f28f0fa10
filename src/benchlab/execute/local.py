"""The local backend: each attempt a subprocess in its own process group on this machine.

Slots are counted in runs at once (``-j``) and, when GPUs are in play, in GPU
shares handed out by the placement policy (:class:`GpuPool`): a run starts when
both fit, and a CPU-only run never waits for a GPU. Timeouts and stops kill the
whole process tree: SIGTERM to the group and every descendant found, a grace
period, then SIGKILL.

Exits are watched through pidfds (Linux 5.3+), polled together with a wake-up
pipe, so the sweep's one ``poll`` call sees every exit as it happens and a freed
slot is refilled at once; starting a thread per run would cost more than the
launch itself. Where pidfds are missing, a waiter thread per process does the job.

Every descendant of a run is found without relying on what it inherits: the
backend makes its process the *child subreaper* of its runs (Linux
``PR_SET_CHILD_SUBREAPER``), so a process that leaves its run's process group
and session and clears its environment (``setsid env -i sleep 313 &``) is
re-parented to benchlab instead of to init when its parent exits. Such orphans
are found among benchlab's own children at each run's end and killed with the
run they came from (the run named in their environment or by their session; one
that names none, with the last of the runs that were going when it started), and
whatever is left at the end of the sweep.

When a GPU run ends and leaves its device with no other run of ours, the device
is not handed out again until its memory falls back near what it held when the
sweep started (the driver frees memory a little after the process exits). A
device whose memory stays held past ``settle_s`` — a leaked child, a zombie —
is taken out of the pool for the rest of the sweep, with a warning.
"""

from __future__ import annotations

import ctypes
import math
import os
import queue
import select
import shlex
import signal
import socket
import sys
import threading
import time
from dataclasses import dataclass, field
from operator import attrgetter
from typing import TYPE_CHECKING, Any

import psutil

from benchlab.errors import UserError
from benchlab.execute.base import Backend, BackendOptions, Launch, Outcome, ProcessInfo, SweepContext
from benchlab.execute.gpus import Inventory, empty_margin_mib
from benchlab.execute.placement import GpuPool, GpuRequest
from benchlab.execute.proctree import ATTEMPT_KEY_ENV, KILL_GRACE_S, descendants, is_alive, signal_tree
from benchlab.plan import Run

if TYPE_CHECKING:
    from benchlab.execute.gpu_sampler import GpuSampler

#: Seconds a device's memory may take to drain after its run ended before the device is retired.
SETTLE_S = 10.0
SETTLE_POLL_S = 0.2
#: Seconds of inventory readings before deciding which devices are free (real GPUs only).
GPU_SAMPLE_WINDOW_S = 1.0


PR_SET_CHILD_SUBREAPER = 36
PR_GET_CHILD_SUBREAPER = 37


def _prctl(option: int, arg: int) -> int | None:
    """``prctl(option, arg)`` through libc (Linux), or None where it cannot be called."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return int(libc.prctl(option, ctypes.c_ulong(arg), 0, 0, 0))
    except (OSError, AttributeError):
        return None


def child_subreaper(on: bool) -> bool | None:
    """Make this process the reaper of its orphaned descendants (or stop); returns the setting
    it had before, or None where the kernel has no such setting."""
    before = ctypes.c_int(0)
    if _prctl(PR_GET_CHILD_SUBREAPER, ctypes.addressof(before)) != 0:
        return None
    if _prctl(PR_SET_CHILD_SUBREAPER, int(on)) != 0:
        return None
    return bool(before.value)


def own_children() -> list[int]:
    """Pids of this process's children, from /proc (orphans re-parented to it included)."""
    pids: list[int] = []
    try:
        tasks = os.listdir("/proc/self/task")
    except OSError:
        return [p.pid for p in psutil.Process().children()]
    for task in tasks:
        try:
            with open(f"/proc/self/task/{task}/children") as fh:
                pids += map(int, fh.read().split())
        except OSError:
            continue
    return pids


@dataclass
class Child:
    """A started attempt's shell: its pid, and its exit status once reaped (negative: killed by that signal)."""

    pid: int
    returncode: int | None = None


def spawn(command: str, cwd: str, env: dict[str, str], log_path: str) -> Child:
    """Start ``command`` under /bin/sh in a new session, stdout and stderr appended to ``log_path``.

    posix_spawn (a vfork underneath) costs less than half of what subprocess.Popen's
    fork+exec does from a large Python process, which matters at hundreds of runs.
    The shell changes into ``cwd`` itself, since posix_spawn cannot.
    """
    if not os.path.isdir(cwd):
        raise FileNotFoundError(2, "no such working directory", cwd)
    fd = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        script = f"cd {shlex.quote(cwd)} || exit 126\n{command}"
        pid = os.posix_spawn("/bin/sh", ["/bin/sh", "-c", script], env, setsid=True, file_actions=[
            (os.POSIX_SPAWN_OPEN, 0, os.devnull, os.O_RDONLY, 0),
            (os.POSIX_SPAWN_DUP2, fd, 1),
            (os.POSIX_SPAWN_DUP2, fd, 2),
        ])
    finally:
        os.close(fd)
    return Child(pid)


def _reaped(pid: int) -> bool:
    """Collect ``pid``'s exit status if it has one; whether it is gone (or never was our child)."""
    try:
        done, _ = os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        return True
    return done == pid


@dataclass
class _Running:
    launch: Launch
    proc: Child
    started: float  # wall clock, for the record
    started_m: float  # monotonic: what the run's time and its timeout are measured on
    deadline: float | None
    gpus: list[int] | None = None  # the devices placed at start
    kill_at: float | None = None
    timed_out: bool = False
    stopping: bool = False
    descendants: list[psutil.Process] = field(default_factory=list)


def settle_margin_mib(memory_total_mib: int) -> int:
    """How far above its starting level a device's memory may stay and still count as freed:
    the inventory's own margin for an empty device, so the two never disagree."""
    return empty_margin_mib(memory_total_mib)


@dataclass(frozen=True)
class LocalOptions(BackendOptions):
    """The local backend's own options, for a Python caller (the command line sets none): how long
    a GPU freed by a run may take to give back its memory before the next run is placed on it."""

    #: Seconds to wait for a freed GPU's memory to drain.
    settle_s: float = SETTLE_S
    #: Seconds between looks at a draining GPU.
    settle_poll_s: float = SETTLE_POLL_S
    #: Seconds between SIGTERM and SIGKILL when a run is stopped.
    grace: float = KILL_GRACE_S


class LocalBackend(Backend):
    """Runs attempts as local subprocesses, at most ``jobs`` at a time.

    With ``gpu_pool``, GPU runs are also placed on devices (``CUDA_VISIBLE_DEVICES``
    set per run). ``hide_gpus`` gives CPU-only runs ``CUDA_VISIBLE_DEVICES=""`` so they
    cannot allocate on a device that GPU runs were promised. ``inventory`` is read after
    a GPU run ends, every ``settle_poll_s`` for up to ``settle_s`` seconds, until the
    device's memory is back near its starting level.
    """

    name = "local"
    runs_here = True

    def __init__(self, jobs: int, grace: float = KILL_GRACE_S, gpu_pool: GpuPool | None = None,
                 inventory: Inventory | None = None, hide_gpus: bool = False,
                 settle_s: float = SETTLE_S, settle_poll_s: float = SETTLE_POLL_S,
                 gpu_models: dict[int, str] | None = None):
        self.jobs = self.slots = jobs
        self.gpu_models = dict(gpu_models or {})
        self.gpu_devices = list(gpu_pool.usable) if gpu_pool is not None else []
        self.grace = grace
        self.host = socket.gethostname()
        self.gpu_pool = gpu_pool
        self.inventory = inventory
        self.hide_gpus = hide_gpus
        self.settle_s = settle_s
        self.settle_poll_s = settle_poll_s
        self._running: dict[int, _Running] = {}
        # What threads report (a settled device, a fallback waiter's exit, wake()) goes through
        # this queue plus a byte on the pipe, which is what interrupts poll().
        self._events: queue.SimpleQueue[int | None | tuple[int, list[int]]] = queue.SimpleQueue()
        self._wake_r, self._wake_w = os.pipe()
        os.set_blocking(self._wake_r, False)
        os.set_blocking(self._wake_w, False)
        self._poll = select.poll()
        self._poll.register(self._wake_r, select.POLLIN)
        self._pidfds: dict[int, Child] = {}  # pidfd -> its process
        # Orphans of our runs come back to us (None: the kernel cannot do that; see the module doc).
        self._reaper_before = child_subreaper(True)
        self._own_session = os.getsid(0)
        self._settling: dict[int, list[int]] = {}  # attempt id -> devices whose memory drains
        self._warnings: list[str] = []

    @classmethod
    def for_sweep(cls, context: SweepContext, **options: Any) -> LocalBackend:
        """``context.jobs`` runs at once, on the GPUs ``--gpus`` selects (see :func:`gpu_setup`)."""
        setup = gpu_setup(context)
        return cls(jobs=context.jobs, gpu_pool=setup.gpu_pool, inventory=setup.inventory,
                   hide_gpus=setup.hide_gpus, gpu_models=setup.gpu_models, **options)

    def gpu_sampler(self) -> GpuSampler | None:
        if self.inventory is None or self.gpu_pool is None:
            return None
        from benchlab.execute.gpu_sampler import GpuSampler

        return GpuSampler(self.inventory)

    # -- capacity -------------------------------------------------------------

    def _request(self, run: Run) -> GpuRequest:
        res = run.resources
        return GpuRequest(gpus=res.gpus, gpu_memory=res.gpu_memory)

    def fits(self, run: Run) -> bool:
        if len(self._running) >= self.jobs:
            return False
        if self.gpu_pool is None:
            return True
        request = self._request(run)
        return request.devices == 0 or self.gpu_pool.place(request) is not None

    def why_never(self, run: Run) -> str | None:
        """Why ``run`` can never start on this machine's usable GPUs (None if it can)."""
        request = GpuRequest.of(run.resources)
        if request.devices == 0:
            return None
        if self.gpu_pool is None:
            return f"asks for {request.gpus:g} GPU(s) but GPUs are not in use in this sweep"
        return self.gpu_pool.why_never(request)

    def settling(self) -> int:
        """How many ended GPU runs still wait for their devices' memory to drain."""
        return len(self._settling)

    def warnings(self) -> list[str]:
        """Warnings since the last call (a device taken out of the pool, ...)."""
        out, self._warnings = self._warnings, []
        return out

    def running(self) -> int:
        return len(self._running)

    # -- lifecycle ------------------------------------------------------------

    def start(self, launch: Launch) -> ProcessInfo:
        gpus = self._place(launch)
        placed = gpus is not None
        # The clock just before the spawn stands for the process's start time: reading the
        # kernel's figure from /proc now would wait on the child's exec.
        spawned_at = time.time()
        try:
            proc = spawn(launch.command, launch.cwd, launch.env, str(launch.log_path))
        except BaseException:
            if placed:
                assert self.gpu_pool is not None
                self.gpu_pool.release(launch.attempt_id)
            raise
        now = time.monotonic()
        deadline = now + launch.timeout if launch.timeout else None
        # Only the start is read from the wall clock: the run's length comes from the monotonic
        # one, so a clock step (NTP, a VM resumed) neither stretches nor shrinks it.
        self._running[proc.pid] = _Running(launch, proc, spawned_at, now, deadline, gpus)
        self._watch(proc)
        return ProcessInfo(proc.pid, proc.pid, spawned_at, self.host, gpus=None if gpus is None else tuple(gpus))

    def _watch(self, proc: Child) -> None:
        """Have ``poll`` in :meth:`wait` report the exit of ``proc``."""
        try:
            fd = os.pidfd_open(proc.pid)
        except (AttributeError, OSError):
            threading.Thread(target=self._wait_one, args=(proc,), daemon=True,
                             name=f"wait-{proc.pid}").start()
            return
        self._pidfds[fd] = proc
        self._poll.register(fd, select.POLLIN)

    def _place(self, launch: Launch) -> list[int] | None:
        """Reserve the launch's GPUs and point its environment at them; the devices taken (None: none)."""
        request = self._request(launch.run) if self.gpu_pool is not None else None
        if request is None or request.devices == 0:
            if self.hide_gpus:
                launch.env["CUDA_VISIBLE_DEVICES"] = ""
            return None
        assert self.gpu_pool is not None
        placement = self.gpu_pool.acquire(launch.attempt_id, request)
        if placement is None:
            raise OSError(f"no GPU free for {request.gpus:g} GPU(s) (start() without fits())")
        launch.env.update(placement.env())
        return list(placement.devices)

    def _release(self, launch: Launch) -> None:
        """Give back a finished run's GPUs; devices it leaves empty wait for their memory first."""
        pool = self.gpu_pool
        if pool is None or launch.attempt_id not in pool.holders:
            return
        placement = pool.release(launch.attempt_id)
        if self.inventory is None:
            return
        empty = [i for i in placement.devices if pool.reserved(i) == (0, 0)]
        if not empty:
            return
        limits = {}
        for i in empty:
            pool.block(i)
            d = pool.device(i)
            limits[i] = d.baseline_used_mib + settle_margin_mib(d.memory_total_mib)
        self._settling[launch.attempt_id] = empty
        threading.Thread(target=self._settle, args=(launch.attempt_id, limits), daemon=True,
                         name=f"settle-{launch.attempt_id}").start()

    def _settle(self, key: int, limits: dict[int, int]) -> None:
        """Poll the inventory until each device's memory is at most its limit (MiB); report the
        devices still above it after ``settle_s``. Runs in its own thread; touches no pool."""
        assert self.inventory is not None
        devices = list(limits)
        deadline = time.monotonic() + self.settle_s
        left = list(devices)
        while True:
            try:
                used = {r.index: r.memory_used_mib for r in self.inventory.read()}
            except Exception:  # noqa: BLE001 - a failed reading counts as not drained yet; the deadline holds
                used = {}
            left = [i for i in left if used.get(i, limits[i] + 1) > limits[i]]
            if not left or time.monotonic() >= deadline:
                break
            time.sleep(self.settle_poll_s)
        self._post((key, left))

    def _settled(self, key: int, leaked: list[int]) -> None:
        assert self.gpu_pool is not None
        for i in self._settling.pop(key, []):
            if i in leaked:
                reason = (f"memory still held {self.settle_s:g}s after its run ended "
                          "(a leaked process?)")
                self.gpu_pool.retire(i, reason)
                self._warnings.append(f"GPU {i}: {reason}; not used again in this sweep "
                                      "(see `benchlab gpus`)")
            else:
                self.gpu_pool.unblock(i)

    def _wait_one(self, proc: Child) -> None:
        _, status = os.waitpid(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)
        self._post(proc.pid)

    def _post(self, event: int | None | tuple[int, list[int]]) -> None:
        self._events.put(event)
        try:
            os.write(self._wake_w, b"\0")
        except (BlockingIOError, OSError):
            pass  # the pipe is full (poll will wake anyway) or closed (the backend is done)

    def wake(self) -> None:
        self._post(None)

    def _ready(self, wait_for: float | None) -> tuple[list[int], bool]:
        """Exited pids and whether the caller should return to the sweep (woken, or a device
        came back), waiting at most ``wait_for`` seconds (None: until something happens)."""
        timeout = -1 if wait_for is None else math.ceil(wait_for * 1000)
        exited: list[int] = []
        for fd, _ in self._poll.poll(timeout):
            if fd == self._wake_r:
                try:
                    while os.read(self._wake_r, 4096):
                        pass
                except BlockingIOError:
                    pass
                continue
            proc = self._pidfds.pop(fd)
            self._poll.unregister(fd)
            os.close(fd)
            _, status = os.waitpid(proc.pid, 0)  # a zombie by now: returns at once
            proc.returncode = os.waitstatus_to_exitcode(status)
            exited.append(proc.pid)
        back = False
        while True:
            try:
                event = self._events.get_nowait()
            except queue.Empty:
                break
            if event is None:
                back = True
            elif isinstance(event, tuple):
                self._settled(*event)
                back = True
            else:
                exited.append(event)
        return exited, back

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
            exited, back = self._ready(wait_for)
            for pid in exited:
                outcome = self._reap(pid)
                if outcome is not None:
                    outcomes.append(outcome)
            if back:
                break  # woken, or a device came back: the sweep may launch again
            if not exited:
                self._enforce_deadlines()
                if end is not None and time.monotonic() >= end:
                    break
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
        r.descendants = descendants(r.proc.pid)
        signal_tree(r.proc.pid, signal.SIGTERM, r.descendants)
        r.kill_at = now + self.grace

    def _reap(self, pid: int) -> Outcome | None:
        r = self._running.pop(pid, None)
        if r is None:
            return None
        # The leader is gone; anything it left in its group must not outlive the attempt.
        signal_tree(pid, signal.SIGKILL, [p for p in r.descendants if is_alive(p)])
        self._kill_orphans(r)
        self._release(r.launch)
        code = r.proc.returncode
        sig = -code if code is not None and code < 0 else None
        return Outcome(
            launch=r.launch, exit_code=None if sig else code, signal=sig, timed_out=r.timed_out,
            interrupted=r.stopping and not r.timed_out, started=r.started,
            ended=r.started + (time.monotonic() - r.started_m),
            node=self.host, gpus=r.gpus,
        )

    def _orphans(self) -> list[int]:
        """Our children that are no run's leader and live in another session than ours: processes
        of runs whose parents exited (a child benchlab itself starts stays in its session)."""
        if self._reaper_before is None:
            return []
        leaders = {r.proc.pid for r in self._running.values()}
        found = []
        for pid in own_children():
            if pid in leaders:
                continue
            try:
                if os.getsid(pid) != self._own_session:
                    found.append(pid)
            except OSError:
                continue
        return found

    def _owner(self, pid: int) -> _Running | None:
        """The running attempt an orphan belongs to, by the key in its environment or its session."""
        try:
            key = psutil.Process(pid).environ().get(ATTEMPT_KEY_ENV, "")
        except (psutil.Error, OSError):
            key = ""
        attempt = key.rpartition("#")[2]
        try:
            sid = os.getsid(pid)
        except OSError:
            sid = None
        for r in self._running.values():
            if str(r.launch.attempt_id) == attempt or r.proc.pid == sid:
                return r
        return None

    def _kill_orphans(self, ended: _Running | None) -> None:
        """Kill the orphans of ``ended`` (every orphan when None) and reap the dead ones.

        An orphan that names a run still going is left to that run's end. One that names
        none (an emptied environment, a session of its own) may come from any run that was
        going when it started: it is left alone while another such run still goes (killing
        it could break that run, a server it started for itself), and killed at the end of
        the last one. An escapee of a run alone in the sweep still dies with its run.
        """
        killed = []
        for pid in self._orphans():
            owner = self._owner(pid) if ended is not None else None
            if owner is not None:
                if all(p.pid != pid for p in owner.descendants):
                    try:
                        owner.descendants.append(psutil.Process(pid))
                    except psutil.Error:
                        pass
                continue
            if ended is not None and self._may_be_of_a_running_run(pid):
                continue
            try:
                os.kill(pid, signal.SIGKILL)
                killed.append(pid)
            except OSError:
                pass
        deadline = time.monotonic() + 1.0
        while killed and time.monotonic() < deadline:
            killed = [pid for pid in killed if not _reaped(pid)]
            if killed:
                time.sleep(0.01)

    def _may_be_of_a_running_run(self, pid: int) -> bool:
        """Whether a run still going had started when orphan ``pid`` did (it may be its parent's)."""
        try:
            born = psutil.Process(pid).create_time()
        except psutil.Error:
            return False
        # Compared with each run's shell as the kernel dates both (in clock ticks since boot, so
        # that no clock of ours, read a little after the spawn, can put a run after its own child).
        for r in self._running.values():
            try:
                if psutil.Process(r.proc.pid).create_time() <= born:
                    return True
            except psutil.Error:
                return True  # its shell cannot be read: it may still be the parent
        return False

    def cancel(self, attempt_id: int) -> bool:
        """Kill one attempt's process group now (a pruned search trial: nothing of it is kept
        that a grace period would save); its outcome comes back through ``wait``."""
        for r in self._running.values():
            if r.launch.attempt_id == attempt_id:
                r.descendants = descendants(r.proc.pid)
                signal_tree(r.proc.pid, signal.SIGKILL, r.descendants)
                return True
        return False

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
        if self._reaper_before is not None:
            self._kill_orphans(None)
            child_subreaper(self._reaper_before)
            self._reaper_before = None
        # -1 first: a settle thread posting late must not write into a reused descriptor.
        fds = [*self._pidfds, self._wake_r, self._wake_w]
        self._wake_r = self._wake_w = -1
        self._pidfds.clear()
        for fd in fds:
            try:
                os.close(fd)
            except OSError:
                pass


@dataclass(frozen=True)
class GpuSetup:
    """What the local backend places runs with, from ``--gpus`` and the inventory
    (:func:`gpu_setup`); the defaults are a sweep that touches no GPU."""

    gpu_pool: GpuPool | None = None
    inventory: Inventory | None = None
    #: Runs see no device but those they are given (``CUDA_VISIBLE_DEVICES`` set for each).
    hide_gpus: bool = False
    #: Models of this machine's GPUs by index (None: not read).
    gpu_models: dict[int, str] | None = None


def gpu_setup(context: SweepContext) -> GpuSetup:
    """The local backend's GPU pool, inventory and device names for ``--gpus`` (``context.gpus``).

    Nothing is read when no run asks for a GPU and ``--gpus`` was not given: a
    CPU-only sweep pays nothing and leaves ``CUDA_VISIBLE_DEVICES`` as it found it.
    """
    from benchlab.execute.gpus import NoInventory, open_inventory, visible_indices
    from benchlab.execute.placement import parse_gpus, select_devices

    gpus = context.gpus
    # The runs of a config share one resources object: each is asked once, and the runs that
    # want a GPU are listed only when one does (a pass at C speed, not a Python loop per run).
    if context.resources is not None:
        asking = any(res.gpus > 0 for res in context.resources)
    else:
        held = list(map(attrgetter("resources"), context.runs))
        asking = any(res.gpus > 0 for res in dict(zip(map(id, held), held, strict=True)).values())
    wanting = [r for r in context.runs if r.resources.gpus > 0] if asking else []
    if gpus is None and not wanting:
        return GpuSetup()
    selection = parse_gpus(gpus or "auto")
    if selection.mode == "none":
        if wanting:
            raise UserError(f"--gpus none, but {len(wanting)} run(s) ask for GPUs "
                            f"(resources.gpus of {wanting[0].name} is "
                            f"{wanting[0].resources.gpus:g}); set resources.gpus: 0 or drop --gpus none")
        return GpuSetup(hide_gpus=True)
    inventory = open_inventory()
    if isinstance(inventory, NoInventory):
        if selection.mode == "list":
            raise UserError(f"--gpus {gpus}: {inventory.reason}")
        if wanting:
            raise UserError(f"{len(wanting)} run(s) ask for GPUs (resources.gpus of "
                            f"{wanting[0].name} is {wanting[0].resources.gpus:g}), but "
                            f"{inventory.reason}")
        return GpuSetup()
    if context.recovered_gpus:
        # Their memory drains once the driver has cleaned up after the killed processes; the
        # inventory must not read that as someone else's work.
        wait_for_memory(inventory, list(context.recovered_gpus))
    states = inventory.sample(GPU_SAMPLE_WINDOW_S)
    visible = visible_indices(states)
    devices = select_devices(selection, states, visible)
    pool = GpuPool(devices)
    if wanting and not pool.usable:
        seen = ", ".join(f"{st.index} {st.verdict}" + (" (MIG on)" if st.mig else "")
                         + (" (hidden by CUDA_VISIBLE_DEVICES)" if visible is not None
                            and st.index not in visible else "") for st in states)
        raise UserError(f"no free GPU for the {len(wanting)} run(s) that ask for one "
                        f"(GPUs: {seen}); name devices with --gpus to share them anyway, "
                        "and see `benchlab gpus` for who holds them")
    return GpuSetup(gpu_pool=pool, inventory=inventory, hide_gpus=bool(states),
                    gpu_models={st.index: st.name for st in states})


def wait_for_memory(inventory: Inventory, devices: list[int], limit_s: float = SETTLE_S,
                    poll_s: float = SETTLE_POLL_S) -> None:
    """Wait (at most ``limit_s``) until ``devices`` hold no more than a driver's bookkeeping
    (the inventory's one definition of an empty device, :func:`benchlab.execute.gpus.empty_margin_mib`)."""
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        readings = {r.index: r for r in inventory.read()}
        if all(i not in readings or readings[i].memory_used_mib <= empty_margin_mib(readings[i].memory_total_mib)
               for i in devices):
            return
        time.sleep(poll_s)
