"""Running model-generated code: one sandboxed process per sample.

Each program runs in bubblewrap (``bwrap``, Debian's ``bubblewrap``), through
``_jail.py`` (see its docstring for how), with:

- new user, PID, network, IPC, UTS and cgroup namespaces: no signal reaches a
  host process, no socket (TCP, Unix under /run, abstract) reaches the host,
  and every process left when the program ends or times out is killed;
- a root file system of its own, read-only: the interpreter's folders and /usr,
  a minimal /dev, no /proc (no path to any process's memory), and one writable
  place, a tmpfs of ``tmpfs_mb`` MiB and ``max_files`` inodes on /tmp (also at
  /var/tmp and /dev/shm). Nothing else of the host (its state folders, /etc,
  /home, /run) is there;
- a cgroup of its own whose memory limit (``memory_mb``, no swap) counts all the
  program holds: memfds, tmpfs files, shared memory, threads (``find_cgroup``:
  where no cgroup may be written, EvaluationError, and no code is scored);
- one process (a seccomp filter refuses fork, vfork and clone without CLONE_THREAD);
- rlimits on CPU seconds, address space, threads, file size and open files; no capabilities;
- an empty environment; output capped at ``output_cap`` bytes;
- as root, an unprivileged uid of its own per concurrent slot.

``Sandbox.pair`` runs two programs at once, under the same confinement, for a
caller that talks to each while it runs: the program reads the caller's lines on
descriptor 3 and writes its own on 4 (pipes to the server, nothing else), each of
its lines read up to the output cap (1 MiB at least) and refused past it. The two
never reach each other but through the caller.

``probe_sandbox`` runs a test program at start-up: where the sandbox cannot be
set up (bubblewrap missing, user namespaces refused, no cgroup, the interpreter
out of reach), it raises EvaluationError with the reason, and no code is scored. An
interpreter under /tmp (CI's virtualenv) is shown at its own path inside the
program's tmpfs, read-only.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path

from benchlab.errors import EvaluationError
from benchlab.evaluate.config import SandboxSettings
from benchlab.json_types import JsonObject

_JAIL = str(Path(__file__).with_name("_jail.py"))
_MODES = ("bwrap",)
# Unprivileged uids, one per concurrent sandbox when the server runs as root, so that the
# programs own nothing of the host and one sample's threads count only against its own
# RLIMIT_NPROC. Nothing on a normal system owns them.
_UID_BASE = 61000
# A pair of live programs (``Sandbox.pair``) takes one slot: its second program runs under this
# many uids above the slot's.
_PAIR_UIDS = 1000
# The least a live program's reply line may be, whatever the output cap.
LIVE_LINE_MIN = 1 << 20


@dataclass(frozen=True)
class SandboxLimits:
    """Limits of one program. Seconds, MiB, counts; ``output_cap`` in bytes per stream.

    ``memory_mb`` caps all the program holds (its cgroup's limit; its address space too);
    ``processes`` caps its threads (RLIMIT_NPROC counts threads).
    """

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
    memory_peak_mb: float = 0.0
    memory_exceeded: bool = False

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


_VIEW = (
    "import json, os, sys\n"
    "paths = {sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix}\n"
    "paths |= {os.path.dirname(sys.executable), os.path.dirname(os.path.realpath(sys.executable))}\n"
    "print(json.dumps(sorted(paths)))\n"
)
# The sandbox's own places: an interpreter living there cannot be shown. (Under /tmp, /var/tmp
# or /dev/shm, where the program's tmpfs goes, it is shown inside that tmpfs, read-only.)
_PRIVATE = ("/dev", "/proc", "/sandbox")


def interpreter_view(python: str) -> tuple[list[str], list[tuple[str, str]]]:
    """What the sandbox shows of the host: the folders ``python`` needs (its prefixes and /usr,
    read-only) and the links of a merged /usr (/lib -> usr/lib). Raises EvaluationError when
    the interpreter cannot run or lives where the sandbox puts the program's own folders."""
    try:
        proc = subprocess.run([python, "-I", "-c", _VIEW], capture_output=True, text=True,
                              env={}, timeout=60, check=False)
    except OSError as exc:
        raise EvaluationError(
            f"sandboxed programs cannot run {python}: {exc.strerror} "
            "(set sandbox.python to an interpreter that every user may run)"
        ) from None
    if proc.returncode != 0:
        raise EvaluationError(
            f"sandboxed programs cannot run {python}: {proc.stderr.strip()[-200:]} "
            "(set sandbox.python to an interpreter that every user may run)"
        )
    needed = {os.path.realpath(p) for p in json.loads(proc.stdout)} | {"/usr"}
    for path in sorted(needed):
        shm = path == "/dev/shm" or path.startswith("/dev/shm/")
        if path == "/" or (not shm and any(path == d or path.startswith(d + "/") for d in _PRIVATE)):
            raise EvaluationError(
                f"the code sandbox cannot show the interpreter {python}: it lives in {path}, "
                "which the sandbox makes its own (set sandbox.python to an interpreter installed elsewhere)"
            )
    # Outermost folders only: a bind of /usr already shows /usr/lib/python3.
    binds = [p for p in sorted(needed) if not any(p.startswith(q + "/") for q in needed)]
    links: list[tuple[str, str]] = []
    for top in ("/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"):
        if os.path.islink(top):
            links.append((top, os.readlink(top)))
        elif os.path.isdir(top) and top not in binds:
            binds.append(top)
    return binds, links


def find_bwrap() -> str:
    """The bubblewrap executable, or EvaluationError saying how to install it."""
    found = shutil.which("bwrap")
    if found is None:
        raise EvaluationError(
            "the code sandbox needs bubblewrap, which is not installed: install it "
            "(Debian/Ubuntu: apt-get install bubblewrap; Fedora: dnf install bubblewrap) "
            "or run without code benchmarks"
        )
    return found


@dataclass(frozen=True)
class CgroupPlace:
    """Where the programs' cgroups are made: a cgroup (v1 memory hierarchy or v2) we may write."""

    version: int
    parent: str


_CGROUP_FS = "/sys/fs/cgroup"
_DELEGATE_HINT = ("run the server as root, or give it a cgroup of its own it may write (systemd: "
                  "Delegate=yes; or mkdir and chown one) and set sandbox.cgroup to its path")


def _own_cgroup(controller: str) -> str | None:
    """This process's cgroup path in the hierarchy of ``controller`` ("" for the v2 unified one)."""
    try:
        with open("/proc/self/cgroup") as f:
            lines = f.read().splitlines()
    except OSError:
        return None
    for line in lines:
        _, controllers, path = line.split(":", 2)
        if (controller == "" and controllers == "") or controller in controllers.split(","):
            return path
    return None


def find_cgroup(configured: str | None = None) -> CgroupPlace:
    """Where each program gets its memory-capped cgroup; EvaluationError, with what to do, where none can be.

    ``configured`` (``sandbox.cgroup``) is used as given; otherwise the cgroup v2 hierarchy at
    /sys/fs/cgroup when it has the memory controller, else the v1 memory hierarchy, under this
    process's own cgroup. Without a cgroup a program's shared memory (memfds, tmpfs files) and
    its threads' would escape ``memory_mb``: no code is scored then.
    """
    candidates: list[CgroupPlace] = []
    if configured:
        path = os.path.realpath(configured)
        version = 2 if os.path.exists(os.path.join(path, "cgroup.controllers")) else 1
        if version == 1 and not os.path.exists(os.path.join(path, "memory.limit_in_bytes")):
            raise EvaluationError(f"sandbox.cgroup {configured} is not a cgroup of the memory controller")
        candidates.append(CgroupPlace(version, path))
    else:
        unified = os.path.join(_CGROUP_FS, "cgroup.controllers")
        own2 = _own_cgroup("")
        if os.path.exists(unified) and own2 is not None:
            with open(unified) as f:
                if "memory" in f.read().split():
                    candidates.append(CgroupPlace(2, os.path.join(_CGROUP_FS, own2.lstrip("/"))))
        own1 = _own_cgroup("memory")
        if own1 is not None and os.path.isdir(os.path.join(_CGROUP_FS, "memory")):
            candidates.append(CgroupPlace(1, os.path.join(_CGROUP_FS, "memory", own1.lstrip("/"))))
    if not candidates:
        raise EvaluationError("the code sandbox needs a cgroup memory limit, and this machine has no cgroup with "
                              f"the memory controller mounted under {_CGROUP_FS}")
    problems = []
    for place in candidates:
        try:
            _check_cgroup(place)
            return place
        except OSError as exc:
            problems.append(f"{place.parent}: {exc.strerror or exc}")
    raise EvaluationError("the code sandbox cannot limit a program's memory with a cgroup ("
                          + "; ".join(problems) + f"): {_DELEGATE_HINT}")


def _check_cgroup(place: CgroupPlace) -> None:
    """Make, cap and remove a cgroup under ``place``: OSError where this process may not."""
    if place.version == 2:
        control = os.path.join(place.parent, "cgroup.subtree_control")
        with open(control) as f:
            enabled = f.read().split()
        if "memory" not in enabled:
            with open(control, "w") as f:
                f.write("+memory")
    test = os.path.join(place.parent, f"benchlab-probe-{os.getpid()}")
    os.makedirs(test, exist_ok=True)
    try:
        limit = "memory.max" if place.version == 2 else "memory.limit_in_bytes"
        with open(os.path.join(test, limit), "w") as f:
            f.write(str(64 * 2**20))
        with open(os.path.join(test, "cgroup.procs"), "a"):
            pass
    finally:
        os.rmdir(test)


def _config(limits: SandboxLimits, uid: int, python: str, bwrap: str,
            binds: list[str], links: list[tuple[str, str]], cgroup: CgroupPlace) -> dict:
    return {
        "cgroup": {"version": cgroup.version, "parent": cgroup.parent},
        "bwrap": bwrap,
        "binds": binds,
        "links": links,
        "uid": uid,
        "python": python,
        "timeout_secs": limits.timeout_secs,
        "processes": limits.processes,
        "limits": {
            "cpu_secs": limits.cpu_secs,
            "memory_mb": limits.memory_mb,
            "file_size_mb": limits.file_size_mb,
            "open_files": limits.open_files,
        },
        "tmpfs_mb": limits.tmpfs_mb,
        "max_files": limits.max_files,
        "output_cap": limits.output_cap,
        "max_program_bytes": limits.max_program_bytes,
    }


# The probe's program: it must run, and reach nothing of the host: not even a port listening on
# the host's 127.0.0.1 (the sandbox has a loopback of its own, where nothing listens).
_PROBE = (
    "import socket\ns = socket.socket()\ns.settimeout(2)\n"
    "try:\n    s.connect(('127.0.0.1', {port}))\nexcept OSError:\n    raise SystemExit(0)\nraise SystemExit(3)\n"
)


def probe_sandbox(python: str | None = None, cgroup: CgroupPlace | None = None
                  ) -> tuple[list[str], list[tuple[str, str]]]:
    """Check that a program runs in the sandbox with its network cut; what the sandbox shows.

    Raises EvaluationError with the reason (bubblewrap missing or refused, the interpreter
    unreachable): code is never run less isolated.
    """
    interpreter = python or default_python()
    bwrap = find_bwrap()
    place = cgroup or find_cgroup()
    binds, links = interpreter_view(interpreter)
    cfg = _config(SandboxLimits(timeout_secs=20), _UID_BASE, interpreter, bwrap, binds, links, place)
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(1)
        program = _PROBE.format(port=listener.getsockname()[1]).encode()
        result = _run_jail_sync(cfg, program, 60)
    if "error" in result:
        hint = ""
        if "namespace" in result["error"]:
            hint = (" (bubblewrap needs unprivileged user namespaces: sysctl "
                    "kernel.unprivileged_userns_clone=1 or user.max_user_namespaces > 0)")
        raise EvaluationError(f"{result['error']}{hint}")
    if result.get("exit_code") != 0 or result.get("timed_out"):
        why = (result.get("stderr") or "").strip()[-300:] or f"exit code {result.get('exit_code')}"
        if result.get("exit_code") == 3:
            why = "it reached a port on the host's 127.0.0.1"
        raise EvaluationError(f"the code sandbox does not work here: its test program failed: {why}")
    return binds, links


@dataclass
class Sandbox:
    """Runs programs, at most ``concurrency`` at a time (a ``pair`` of live programs counting as one),
    each in its own bubblewrap sandbox.

    ``mode`` is ``bwrap``, the only one offered (None means the same). Building a Sandbox
    probes it: where it cannot be set up, EvaluationError says why and no code is run.
    """

    limits: SandboxLimits = field(default_factory=SandboxLimits)
    concurrency: int = 2
    mode: str | None = None
    python: str = field(default_factory=default_python)
    warning: str = ""
    cgroup: str | None = None  # the cgroup under which each program gets its own; None: found here
    binds: list[str] = field(default_factory=list, init=False)
    links: list[tuple[str, str]] = field(default_factory=list, init=False)
    _bwrap: str = field(default="", init=False, repr=False)
    _cgroup: CgroupPlace = field(default=CgroupPlace(0, ""), init=False, repr=False)
    _uids: asyncio.Queue[int] | None = field(default=None, init=False, repr=False)

    def __post_init__(self) -> None:
        if self.mode is None:
            self.mode = "bwrap"
        if self.mode not in _MODES:
            raise EvaluationError(
                f"unknown sandbox mode {self.mode!r}; known: {', '.join(_MODES)} (modes without a "
                "PID namespace and a private view of the file system are no longer offered)"
            )
        self._bwrap = find_bwrap()
        self._cgroup = find_cgroup(self.cgroup)
        self.binds, self.links = probe_sandbox(self.python, self._cgroup)

    def describe(self) -> JsonObject:
        """What ``/health`` shows: how programs are isolated, what they see, the caps of their one writable place."""
        return {
            "mode": self.mode,
            "network_isolated": True,
            "pid_namespace": True,
            "filesystem": "readonly",
            "visible": self.binds,
            "covered": [],
            "proc": False,
            "memory": (f"cgroup v{self._cgroup.version} memory limit on the whole program (memfds, tmpfs "
                       "files and threads counted), no swap; one process (threads allowed)"),
            "memory_mb": self.limits.memory_mb,
            "writable_mb": self.limits.tmpfs_mb,
            "max_files": self.limits.max_files,
        }

    @property
    def network_isolated(self) -> bool:
        return True

    @property
    def filesystem(self) -> str:
        return "readonly"

    async def run(self, program: str) -> SandboxResult:
        """Run ``program`` (Python source) and report how it ended; never raises for what the program does.

        Raises EvaluationError when the sandbox could not be set up for it (the program did not run).
        """
        if self._uids is None:
            self._uids = asyncio.Queue()
            for i in range(self.concurrency):
                self._uids.put_nowait(_UID_BASE + i)
        uid = await self._uids.get()
        try:
            return await self._run(program.encode("utf-8", "replace"), uid)
        finally:
            self._uids.put_nowait(uid)

    @contextlib.asynccontextmanager
    async def pair(self, answer: str, tests: str) -> AsyncIterator[tuple[Live, Live]]:
        """Run two live programs at once, each in its own sandbox, and talk to both.

        Each program reads requests from descriptor 3 and writes replies to 4, one line each;
        they never reach each other but through the caller. The pair takes one slot: the
        tests' program runs under the slot's second uid. On leaving, the caller's ends are
        closed and both programs are waited for (each within its own time limit).
        """
        if self._uids is None:
            self._uids = asyncio.Queue()
            for i in range(self.concurrency):
                self._uids.put_nowait(_UID_BASE + i)
        uid = await self._uids.get()
        lives: list[Live] = []
        try:
            for program, program_uid in ((answer, uid), (tests, uid + _PAIR_UIDS)):
                lives.append(await Live.start(self, program.encode("utf-8", "replace"), program_uid))
            yield lives[0], lives[1]
        finally:
            for live in lives:
                live.close()
            for live in lives:
                await live.result()
                live.release()
            self._uids.put_nowait(uid)

    async def _run(self, program: bytes, uid: int, channel: tuple[int, int] | None = None) -> SandboxResult:
        cfg = _config(self.limits, uid, self.python, self._bwrap, self.binds, self.links, self._cgroup)
        if channel is not None:
            cfg["channel"] = list(channel)
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
            pass_fds=channel or (),
        )
        if channel is not None:
            for fd in channel:
                os.close(fd)
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
        if data.get("setup"):
            # Not the program's doing: the sample is not scored (never counted as a wrong answer).
            raise EvaluationError(data["error"])
        if "error" in data:
            return SandboxResult(-1, False, "", "", 0.0, data["error"])
        return SandboxResult(
            exit_code=data["exit_code"],
            timed_out=data["timed_out"],
            stdout=data["stdout"],
            stderr=data["stderr"],
            duration_secs=data["duration_secs"],
            memory_peak_mb=data.get("memory_peak_mb", 0.0),
            memory_exceeded=data.get("memory_exceeded", False),
        )


class Live:
    """A program running in the sandbox that the caller talks to: one JSON line each way at a time."""

    def __init__(self, reader: asyncio.StreamReader, reading: asyncio.BaseTransport,
                 writer: asyncio.WriteTransport, task: asyncio.Task[SandboxResult]) -> None:
        self._reader, self._reading, self._writer, self._task = reader, reading, writer, task
        self.closed = False

    @classmethod
    async def start(cls, sandbox: Sandbox, program: bytes, uid: int) -> Live:
        to_program, from_program = os.pipe(), os.pipe()
        loop = asyncio.get_running_loop()
        # One reply may be as large as the program's output cap, and no larger.
        reader = asyncio.StreamReader(limit=max(sandbox.limits.output_cap, LIVE_LINE_MIN))
        reading, _ = await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader),
                                                  os.fdopen(from_program[0], "rb", 0))
        writing, _ = await loop.connect_write_pipe(asyncio.Protocol, os.fdopen(to_program[1], "wb", 0))
        task = asyncio.ensure_future(sandbox._run(program, uid, (to_program[0], from_program[1])))
        return cls(reader, reading, writing, task)  # type: ignore[arg-type]

    def send(self, line: bytes) -> None:
        """Queue one line for the program; a program that has ended drops it."""
        if not self.closed and not self._writer.is_closing():
            self._writer.write(line.rstrip(b"\n") + b"\n")

    async def receive(self, timeout: float) -> bytes | None:
        """The program's next line; None once it ended, wrote a line over the cap, or took longer than ``timeout``."""
        if self.closed:
            return None
        try:
            line = await asyncio.wait_for(self._reader.readline(), max(timeout, 0.0))
        except (TimeoutError, ValueError, asyncio.LimitOverrunError, asyncio.IncompleteReadError):
            self.close()
            return None
        if not line.endswith(b"\n"):
            self.close()
            return None
        return line

    def close(self) -> None:
        """Stop talking: the program reads end of file (and is expected to end)."""
        self.closed = True
        if not self._writer.is_closing():
            self._writer.close()

    def release(self) -> None:
        """Close the caller's reading end, once the program has ended."""
        self._reading.close()

    async def result(self) -> SandboxResult:
        """How the program ended (it ends at the latest at its time limit)."""
        return await asyncio.shield(self._task)


def sandbox_from_settings(settings: SandboxSettings) -> Sandbox:
    """The sandbox a config's ``sandbox:`` section describes (probed: EvaluationError when it cannot be set up)."""
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
    if settings.python:
        return Sandbox(limits, settings.concurrency, "bwrap", python=settings.python, cgroup=settings.cgroup)
    return Sandbox(limits, settings.concurrency, "bwrap", cgroup=settings.cgroup)
