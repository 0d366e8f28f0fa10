"""Running model-generated code: one sandboxed process per sample.

Each program runs through ``_jail.py`` (see its docstring for the three
isolation modes) with:

- its own session and process group, killed as a whole at the wall-clock limit;
- rlimits on CPU seconds, address space, processes, file size and open files;
- an empty environment, so no secret of the server reaches it;
- output capped at ``output_cap`` bytes;
- no network: a new network namespace with nothing but a downed loopback;
- no writable path outside itself: inside its mount namespace every mount is
  read-only, and its one writable place is a private tmpfs of ``tmpfs_mb`` MiB
  and ``max_files`` files. Where the mounts cannot be made read-only, every
  world-writable directory found at start-up is covered instead.

``probe_isolation`` finds the strongest mode this machine allows and
``probe_filesystem`` how writes are confined under it; when either falls short,
``Sandbox.warning`` says so (the server logs it at start-up and shows it in
``/health``).
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

from benchlab.errors import EvaluationError
from benchlab.evaluate.config import SandboxSettings

_JAIL = str(Path(__file__).with_name("_jail.py"))
_MODES = ("root", "userns", "none")
_FILESYSTEMS = ("readonly", "cover", "none")
# Pseudo file systems whose world-writable entries are not directories a program can fill.
_NOT_SCANNED = {"proc", "sysfs", "cgroup", "cgroup2", "devpts", "mqueue", "bpf", "tracefs",
                "debugfs", "securityfs", "pstore", "configfs", "fusectl", "hugetlbfs", "binfmt_misc"}
# Unprivileged uids, one per concurrent sandbox, so that one sample's fork bomb
# exhausts only its own RLIMIT_NPROC. Nothing on a normal system owns them.
_UID_BASE = 61000


@dataclass(frozen=True)
class SandboxLimits:
    """Limits of one program. Seconds, MiB, counts; ``output_cap`` in bytes per stream."""

    timeout_secs: float = 10.0
    cpu_secs: int = 10
    memory_mb: int = 1024
    processes: int = 32
    file_size_mb: int = 16
    open_files: int = 64
    tmpfs_mb: int = 64
    max_files: int = 1024
    output_cap: int = 65536
    max_program_bytes: int = 1 << 20


@dataclass(frozen=True)
class SandboxResult:
    """How a program ended. ``passed`` is a clean exit (code 0) within the limits."""

    exit_code: int
    timed_out: bool
    stdout: str
    stderr: str
    duration_secs: float
    error: str = ""

    @property
    def passed(self) -> bool:
        return self.exit_code == 0 and not self.timed_out and not self.error


def _world_runnable(path: str) -> bool:
    real = Path(os.path.realpath(path))
    try:
        if not real.is_file() or (real.stat().st_mode & 0o005) != 0o005:
            return False
        return all(p.stat().st_mode & 0o001 for p in real.parents)
    except OSError:
        return False


def default_python() -> str:
    """The interpreter for sandboxed programs.

    As root the programs run under an unprivileged uid, which must be able to
    reach the interpreter: a Python under /root (pyenv) is not, so fall back to
    the system one.
    """
    if os.geteuid() != 0:
        return sys.executable
    for candidate in (sys.executable, "/usr/bin/python3", "/usr/local/bin/python3"):
        if _world_runnable(candidate):
            return candidate
    return sys.executable


def _run_jail_sync(cfg: dict, program: bytes, timeout: float) -> dict:
    proc = subprocess.Popen(
        [sys.executable, "-I", _JAIL, json.dumps(cfg)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={},
        start_new_session=True,
    )
    try:
        out, err = proc.communicate(program, timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        return {"error": "sandbox launcher did not finish"}
    try:
        return json.loads(out.decode().strip().splitlines()[-1])
    except (ValueError, IndexError):
        return {"error": f"sandbox launcher failed: {err.decode(errors='replace')[-300:]}"}


def probe_isolation(python: str | None = None) -> tuple[str, str]:
    """The strongest isolation mode that works here, and a warning ('' when the network is cut).

    A mode works when a program under it runs and cannot create a socket that
    reaches 127.0.0.1.
    """
    program = (
        b"import socket\ns = socket.socket()\ns.settimeout(1)\n"
        b"try:\n    s.connect(('127.0.0.1', 9))\nexcept ConnectionRefusedError:\n    raise SystemExit(3)\n"
        b"except OSError:\n    raise SystemExit(0)\nraise SystemExit(3)\n"
    )
    interpreter = python or default_python()
    for mode in _MODES[:-1]:
        # Only the network is probed here: "cover" with nothing to cover cannot fail on the file system.
        cfg = _config(mode, SandboxLimits(timeout_secs=10), _UID_BASE, interpreter, "cover")
        result = _run_jail_sync(cfg, program, 30)
        if result.get("exit_code") == 0 and not result.get("timed_out"):
            return mode, ""
    cfg = _config("none", SandboxLimits(timeout_secs=10), _UID_BASE, interpreter)
    result = _run_jail_sync(cfg, b"pass\n", 30)
    if result.get("exit_code") != 0:
        # Not even an unisolated program runs: the interpreter is the problem, not the isolation.
        why = (result.get("stderr") or result.get("error") or "").strip()[-200:]
        raise EvaluationError(
            f"sandboxed programs cannot run {interpreter}: {why} "
            "(set sandbox.python to an interpreter that every user may run)"
        )
    return "none", (
        "the code sandbox cannot create a network namespace here (needs root or unprivileged "
        "user namespaces): model-generated code runs WITH network access"
    )


def world_writable_dirs(root: str = "/") -> list[str]:
    """Every directory under ``root`` that any user may write to, as the sandbox's uid would find it.

    Walks each mounted file system (not /proc, /sys and other pseudo file
    systems), without following links, and does not descend where others may
    not enter (an unprivileged uid could not reach what lies below).
    """
    skip = set()
    with open("/proc/self/mountinfo") as f:
        for line in f:
            fields = line.split()
            fstype = fields[fields.index("-") + 1]
            if fstype in _NOT_SCANNED:
                skip.add(fields[4].encode().decode("unicode_escape"))
    found: list[str] = []
    stack = [root]
    while stack:
        path = stack.pop()
        try:
            with os.scandir(path) as entries:
                for entry in entries:
                    if not entry.is_dir(follow_symlinks=False) or entry.path in skip:
                        continue
                    mode = entry.stat(follow_symlinks=False).st_mode
                    if mode & 0o002:
                        found.append(entry.path)
                    if mode & 0o001:
                        stack.append(entry.path)
        except OSError:
            continue
    return sorted(found)


def probe_filesystem(mode: str, python: str | None = None) -> tuple[str, tuple[str, ...]]:
    """How writes are confined under ``mode``: ``readonly`` (the whole tree), ``cover``
    (the world-writable directories, returned too) or ``none``."""
    if mode == "none":
        return "none", ()
    interpreter = python or default_python()
    limits = SandboxLimits(timeout_secs=10)
    result = _run_jail_sync(_config(mode, limits, _UID_BASE, interpreter, "readonly"), b"pass\n", 30)
    if not result.get("setup"):
        return "readonly", ()
    cover = tuple(world_writable_dirs())
    result = _run_jail_sync(_config(mode, limits, _UID_BASE, interpreter, "cover", cover), b"pass\n", 30)
    if result.get("setup"):
        raise EvaluationError(f"the code sandbox cannot confine writes: {result['error']}")
    return "cover", cover


def _config(
    mode: str,
    limits: SandboxLimits,
    uid: int,
    python: str,
    filesystem: str = "readonly",
    cover: tuple[str, ...] = (),
) -> dict:
    return {
        "mode": mode,
        "filesystem": filesystem,
        "cover": list(cover),
        "max_files": limits.max_files,
        "uid": uid,
        "python": python,
        "timeout_secs": limits.timeout_secs,
        "cpu_secs": limits.cpu_secs,
        "memory_mb": limits.memory_mb,
        "processes": limits.processes,
        "file_size_mb": limits.file_size_mb,
        "open_files": limits.open_files,
        "tmpfs_mb": limits.tmpfs_mb,
        "output_cap": limits.output_cap,
        "max_program_bytes": limits.max_program_bytes,
    }


@dataclass
class Sandbox:
    """Runs programs, at most ``concurrency`` at a time, each in its own sandbox.

    ``mode`` is one of ``root``, ``userns``, ``none``; leave it None to probe.
    ``filesystem`` is one of ``readonly``, ``cover`` (then ``cover`` lists the
    directories hidden), ``none``; leave it None to probe.
    """

    limits: SandboxLimits = field(default_factory=SandboxLimits)
    concurrency: int = 2
    mode: str | None = None
    python: str = field(default_factory=default_python)
    warning: str = ""
    filesystem: str | None = None
    cover: tuple[str, ...] = ()
    _uids: asyncio.Queue[int] | None = field(default=None, init=False, repr=False)

    def __post_init__(self) -> None:
        if self.mode is None:
            self.mode, self.warning = probe_isolation(self.python)
        elif self.mode not in _MODES:
            raise EvaluationError(f"unknown sandbox mode {self.mode!r}; known: {', '.join(_MODES)}")
        elif self.mode == "none":
            self.warning = "the code sandbox was configured without network isolation"
        if self.mode == "none":
            self.filesystem = "none"
        elif self.filesystem is None:
            self.filesystem, self.cover = probe_filesystem(self.mode, self.python)
        elif self.filesystem not in _FILESYSTEMS:
            raise EvaluationError(
                f"unknown sandbox filesystem {self.filesystem!r}; known: {', '.join(_FILESYSTEMS)}"
            )
        elif self.filesystem == "cover" and not self.cover:
            self.cover = tuple(world_writable_dirs())
        if self.filesystem == "none":
            self.warning = "; ".join(
                w for w in (self.warning, "the code sandbox cannot confine writes: model-generated "
                            "code may write wherever the server's user may") if w
            )
        if os.geteuid() != 0:
            _protect_this_process()

    def describe(self) -> dict[str, object]:
        """What ``/health`` shows: isolation mode, how writes are confined, and the caps of the writable place."""
        return {
            "mode": self.mode,
            "network_isolated": self.network_isolated,
            "filesystem": self.filesystem,
            "covered": list(self.cover),
            "writable_mb": self.limits.tmpfs_mb if self.filesystem != "none" else None,
            "max_files": self.limits.max_files if self.filesystem != "none" else None,
        }

    @property
    def network_isolated(self) -> bool:
        return self.mode != "none"

    async def run(self, program: str) -> SandboxResult:
        """Run ``program`` (Python source) and report how it ended; never raises for what the program does."""
        if self._uids is None:
            self._uids = asyncio.Queue()
            for i in range(self.concurrency):
                self._uids.put_nowait(_UID_BASE + i)
        uid = await self._uids.get()
        try:
            return await self._run(program.encode("utf-8", "replace"), uid)
        finally:
            self._uids.put_nowait(uid)

    async def _run(self, program: bytes, uid: int) -> SandboxResult:
        cfg = _config(
            self.mode or "none", self.limits, uid, self.python, self.filesystem or "none", self.cover
        )
        proc = await asyncio.create_subprocess_exec(
            sys.executable,
            "-I",
            _JAIL,
            json.dumps(cfg),
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            env={},
            start_new_session=True,
        )
        try:
            # The launcher enforces the program's limit; this one only guards the launcher.
            out, err = await asyncio.wait_for(
                proc.communicate(program), self.limits.timeout_secs + 15
            )
        except (TimeoutError, asyncio.CancelledError):
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            await proc.wait()
            if asyncio.current_task() and asyncio.current_task().cancelling():  # type: ignore[union-attr]
                raise
            return SandboxResult(
                -9, True, "", "", self.limits.timeout_secs, "sandbox launcher hung"
            )
        try:
            data = json.loads(out.decode().strip().splitlines()[-1])
        except (ValueError, IndexError):
            return SandboxResult(
                -1,
                False,
                "",
                "",
                0.0,
                "sandbox launcher failed: " + err.decode(errors="replace")[-300:],
            )
        if "error" in data:
            return SandboxResult(-1, False, "", "", 0.0, data["error"])
        return SandboxResult(
            exit_code=data["exit_code"],
            timed_out=data["timed_out"],
            stdout=data["stdout"],
            stderr=data["stderr"],
            duration_secs=data["duration_secs"],
        )


def sandbox_from_settings(settings: SandboxSettings) -> Sandbox:
    """The sandbox a config's ``sandbox:`` section describes (probing the isolation when ``mode: auto``)."""
    limits = SandboxLimits(
        timeout_secs=settings.timeout_secs,
        cpu_secs=settings.cpu_secs,
        memory_mb=settings.memory_mb,
        processes=settings.processes,
        file_size_mb=settings.file_size_mb,
        open_files=settings.open_files,
        tmpfs_mb=settings.tmpfs_mb,
        max_files=settings.max_files,
        output_cap=settings.output_cap_bytes,
    )
    mode = None if settings.mode == "auto" else settings.mode
    if settings.python:
        return Sandbox(limits, settings.concurrency, mode, python=settings.python)
    return Sandbox(limits, settings.concurrency, mode)


def _protect_this_process() -> None:
    """Make /proc/<this pid>/environ and /mem unreadable to other processes of our uid.

    Without root the programs run under the server's own uid; a non-dumpable
    process's /proc files belong to root, so they cannot read its environment.
    """
    import ctypes

    PR_SET_DUMPABLE = 4
    try:
        ctypes.CDLL(None).prctl(PR_SET_DUMPABLE, 0, 0, 0, 0)
    except (OSError, AttributeError):
        pass
