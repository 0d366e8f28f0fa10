"""The Ray backend: each attempt a Ray task on a Ray cluster, with Ray's resource accounting.

A run becomes one task of a module-level remote function, asking Ray for the
run's ``cpus``, ``gpus`` (fractions share a device), ``memory`` (GiB) and
``custom`` resources. On the worker the command runs as a subprocess in its
own process group, with the worker's environment plus the run's variables;
``CUDA_VISIBLE_DEVICES`` is the one Ray set for the task. The timeout is
enforced inside the task (TERM to the group, a grace period, KILL), so it holds
even when the driver is gone.

Files come home in one of two ways. With ``shared_fs=True`` the run writes
straight into the driver's run directory, which every node must see at the
same path (the log is then live for ``benchlab logs -f``). Otherwise the run
writes into a scratch directory on its node; its log's growth is sent every
``flush_s`` seconds to a small sink actor on the driver's node (so the log is
live there, its first half of the cap at most); when it ends, the task returns what the run
wrote (``train.log``; ``metrics.json(l)`` and the other files, smallest first, at most
``files_cap_bytes`` of them), and the driver writes it into the run directory before
reporting the outcome.

The log is capped as on every backend (``log_cap_mb``, ``execute/logcap.py``): on the worker a
:class:`~benchlab.execute.logcap.LogCap` keeps the scratch log within the cap while the run writes,
and :func:`~benchlab.execute.logcap.cut` writes its final form (head, the line counting the bytes
dropped, tail) before it travels; with ``shared_fs`` the sweep keeps the log in the results folder
itself. Either way the log that lands in the run directory is the one a local run would leave.

Faults: tasks are never retried by Ray (``max_retries=0``); a worker or node
that dies surfaces as an outcome of class ``node-died`` that the sweep retries
like any failed attempt. A process that dies with its worker (node removed,
``ray.cancel(force=True)``, driver gone) would leave its group running, so each
worker keeps one small reaper process that kills the groups it was told about
once the worker's end of a pipe closes.

Everything the task runs on a worker uses the standard library only and is
pickled by value: workers need Ray, the run's code and its dependencies, not
benchlab (unless the runs themselves call ``benchlab.log``).
"""

from __future__ import annotations

import logging
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypedDict

from benchlab.errors import BackendUnavailable
from benchlab.execute import logcap
from benchlab.execute.base import (
    Backend,
    BackendOptions,
    Launch,
    Outcome,
    ProcessInfo,
    SweepContext,
    TransferNote,
)
from benchlab.execute.logcap import LogCap, cut
from benchlab.execute.proctree import KILL_GRACE_S
from benchlab.names.failures import NODE_DIED
from benchlab.names.run_files import CONFIG_FILE, LOG_FILE
from benchlab.plan import RUN_DIR_PLACEHOLDER, Run
from benchlab.runlog import CACHE_NAME
from benchlab.spec import Resources, Spec

#: Most bytes of files other than the log one attempt sends home (without a shared file system).
FILES_CAP_BYTES = 64 * 2**20
POLL_S = 0.1  # how often a blocked wait() looks for wake()
FLUSH_S = 2.0  # how often a running attempt's new log output is sent home
# Variables of the driver's machine that must not override the worker's own.
_HOST_ONLY = {"CUDA_VISIBLE_DEVICES", "HOME", "PATH", "PWD", "OLDPWD", "TMPDIR", "HOSTNAME",
              "RAY_ADDRESS", "VIRTUAL_ENV", "CONDA_PREFIX"}


# ---------------------------------------------------------------- on the worker
# Nothing below this line up to the driver section may use benchlab: it is
# pickled by value and runs where benchlab may not be installed. The one exception is
# execute/logcap.py (the standard library only), pickled by value with it, so that a
# worker's log is capped and cut by the very code that caps every other backend's.

# The SIGTERM, grace, SIGKILL sequence of benchlab.execute.proctree is written again twice
# below, in the reaper and in the task: both are pickled by value to workers where benchlab
# may not be installed, so they cannot call proctree.
_REAPER_CODE = r"""
import os, signal, sys, time
if os.fork():
    os._exit(0)  # not a child of the worker: Ray kills those along with it
groups = {}
for line in sys.stdin:
    op, pgid, grace = line.split()
    if op == "+":
        groups[int(pgid)] = float(grace)
    else:
        groups.pop(int(pgid), None)
def alive(g):
    try:
        os.killpg(g, 0)
        return True
    except OSError:
        return False
for g in groups:
    try:
        os.killpg(g, signal.SIGTERM)
    except OSError:
        pass
end = time.monotonic() + max(groups.values(), default=0.0)
while time.monotonic() < end and any(alive(g) for g in groups):
    time.sleep(0.05)
for g in groups:
    try:
        os.killpg(g, signal.SIGKILL)
    except OSError:
        pass
"""

_reaper_state: dict[str, Any] = {}

# The run's shell waits for "go" on its stdin, sent only once its group is registered with
# the reaper: Ray may kill this worker at any moment (force-cancel), and a run must never
# start unguarded. With no "go" (the worker died first) the shell exits without running.
_GATE = 'IFS= read -r go && [ "$go" = go ] || exit 97; exec </dev/null; cmd=$1; shift; eval "$cmd"'


def _reaper_send(line: str) -> None:
    """Tell this worker's reaper about a group; started on first use, one per worker process."""
    for _ in range(2):
        pipe = _reaper_state.get("pipe")
        if pipe is None:
            proc = subprocess.Popen([sys.executable, "-c", _REAPER_CODE], stdin=subprocess.PIPE,
                                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                    start_new_session=True, close_fds=True)
            proc.wait()  # the go-between exits at once; the reaper lives on, reading the pipe
            pipe = _reaper_state["pipe"] = proc.stdin
            assert pipe is not None
        try:
            pipe.write(line.encode())
            pipe.flush()
            return
        except OSError:  # the reaper is gone: start another
            _reaper_state.pop("pipe", None)
    raise OSError("the reaper process could not be started")


def _killpg(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except OSError:
        pass


def _pack_files(folder: str, cap: int, log_cap: int | None) -> tuple[list[tuple[str, bytes]], dict[str, str]]:
    """What the run wrote: its log cut to ``log_cap`` bytes as on every backend (None: whole), and
    the other files, smallest first, at most ``cap`` bytes of them."""
    found = []
    for root, _dirs, names in os.walk(folder):
        for name in names:
            path = os.path.join(root, name)
            try:
                found.append((os.path.getsize(path), os.path.relpath(path, folder), path))
            except OSError:
                continue
    log = next((f for f in found if f[1] == LOG_FILE), None)
    # Smallest first, but the metrics cache last: it is worth nothing without the
    # metrics.jsonl it describes, and must not crowd that out of the cap.
    others = sorted((f for f in found if f[1] not in (LOG_FILE, CONFIG_FILE)),
                    key=lambda f: (f[1] == CACHE_NAME, f[0], f[1]))
    files, used, skipped = [], 0, []
    for size, rel, path in others:
        if used + size > cap:
            skipped.append(rel)
            continue
        with open(path, "rb") as fh:
            files.append((rel, fh.read()))
        used += size
    notes = {"files_cap_bytes": str(cap)}
    if log:
        if log_cap is not None:
            cut(log[2], log_cap)
        with open(log[2], "rb") as fh:
            files.append((LOG_FILE, fh.read()))
    if skipped:
        notes["skipped_files"] = ",".join(skipped)
    return files, notes


def _wait_streaming(proc: subprocess.Popen[bytes], job: dict[str, Any], log_path: str) -> None:
    """Wait for the run (``TimeoutExpired`` at its timeout), sending its log's growth to the sink.

    Each chunk is written at its offset and acknowledged before the next, so the
    driver's copy is a prefix of the log, complete when the task returns.
    """
    sink = job.get("sink")
    timeout = job["timeout"]
    if sink is None:
        proc.wait(timeout=timeout)
        return
    import ray

    end = None if timeout is None else time.monotonic() + timeout
    sent = 0
    while True:
        step = job["flush_s"] if end is None else min(job["flush_s"], end - time.monotonic())
        try:
            proc.wait(timeout=max(0.0, step))
            return
        except subprocess.TimeoutExpired:
            if end is not None and time.monotonic() >= end:
                raise
        # Only the log's head travels while it runs, the part its cut keeps: past it the worker
        # may be freeing the log's middle. The whole cut log comes home at the end.
        most = job["log_cap"] // 2 if job["log_cap"] is not None else None
        if most is not None and sent >= most:
            continue
        try:
            with open(log_path, "rb") as fh:
                fh.seek(sent)
                data = fh.read(4 * 2**20 if most is None else min(most - sent, 4 * 2**20))
        except OSError:
            continue
        if data:
            try:
                ray.get(sink.append.remote(job["run_dir"], sent, data))
            except Exception:  # noqa: BLE001 - the sink is gone: the run goes on, unstreamed
                sent = most if most is not None else 2**62
                continue
            sent += len(data)


def _attempt(job: dict[str, Any]) -> dict[str, Any]:
    """Run one attempt on this worker; returns its exit, its node and (not shared) its files."""
    import shlex
    import shutil
    import tempfile

    import ray

    ctx = ray.get_runtime_context()
    node = f"{ray.util.get_node_ip_address()}/{ctx.get_node_id()[:12]}"
    gpus = [str(g) for g in ray.get_gpu_ids()]
    result: dict[str, Any] = {"node": node, "gpus": gpus, "files": [], "notes": {}}
    driver_dir = job["run_dir"]
    if job["shared_fs"]:
        if not os.path.isdir(driver_dir):
            result["error"] = (f"run directory {driver_dir} is not visible on node {node}: the "
                               "nodes share no filesystem there; run without --shared-fs")
            return result
        here = driver_dir
    else:
        here = tempfile.mkdtemp(prefix=f"benchlab-{job['run_id']}-", dir=job["scratch"])
        with open(os.path.join(here, CONFIG_FILE), "w") as fh:
            fh.write(job["config"])
    env = dict(os.environ)
    for key, value in job["env"].items():
        env[key] = value.replace(driver_dir, here)
    command = job["command"].replace(job["placeholder"], shlex.quote(here))
    _reaper_send("")  # have the reaper running before the group exists
    result["started"] = time.time()
    try:
        with open(os.path.join(here, LOG_FILE), "ab", buffering=0) as log:
            proc = subprocess.Popen(["/bin/sh", "-c", _GATE, "sh", command], cwd=job["cwd"],
                                    env=env, stdin=subprocess.PIPE, stdout=log,
                                    stderr=subprocess.STDOUT, start_new_session=True,
                                    close_fds=True)
    except OSError as exc:
        result["error"] = f"could not start on {node}: {exc.strerror or exc} ({job['cwd']})"
        result["ended"] = time.time()
        if not job["shared_fs"]:
            shutil.rmtree(here, ignore_errors=True)
        return result
    try:
        _reaper_send(f"+ {proc.pid} {job['grace']}\n")
        assert proc.stdin is not None
        proc.stdin.write(b"go\n")
        proc.stdin.close()
    except OSError as exc:
        _killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        result["error"] = f"could not start on {node}: no process reaper ({exc})"
        result["ended"] = time.time()
        if not job["shared_fs"]:
            shutil.rmtree(here, ignore_errors=True)
        return result
    timed_out = False
    # On the worker's own disk the log is kept within its cap as the sweep keeps it at home.
    keeper = LogCap(job["log_cap"]) if job["log_cap"] is not None and not job["shared_fs"] else None
    if keeper is not None:
        keeper.track(os.path.join(here, LOG_FILE))
    try:
        _wait_streaming(proc, job, os.path.join(here, LOG_FILE))
    except subprocess.TimeoutExpired:
        timed_out = True
        _killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=job["grace"])
        except subprocess.TimeoutExpired:
            _killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    finally:
        # Cancelled (KeyboardInterrupt) or done: nothing of the group outlives the attempt.
        if proc.returncode is None:
            _killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=job["grace"])
            except subprocess.TimeoutExpired:
                pass
        _killpg(proc.pid, signal.SIGKILL)
        _reaper_send(f"- {proc.pid} 0\n")
        if keeper is not None:
            keeper.close()
    result["ended"] = time.time()
    code = proc.returncode
    result["exit_code"] = None if code < 0 else code
    result["signal"] = -code if code < 0 else None
    result["timed_out"] = timed_out
    result["pid"] = proc.pid
    if not job["shared_fs"]:
        result["files"], result["notes"] = _pack_files(here, job["cap"], job["log_cap"])
        shutil.rmtree(here, ignore_errors=True)
    return result


# ---------------------------------------------------------------- on the driver


def _import_ray() -> Any:
    from benchlab.names.extras import load

    return load("ray", "the ray backend")


_SINKS: dict[str, Any] = {}


class _LogSink:
    """Writes streamed log chunks into run directories; lives on the driver's node."""

    def append(self, run_dir: str, offset: int, data: bytes) -> None:
        path = os.path.join(run_dir, LOG_FILE)
        with open(path, "r+b" if os.path.exists(path) else "wb") as fh:
            fh.seek(offset)
            fh.write(data)


@dataclass
class _Flight:
    launch: Launch
    submitted: float


@dataclass(frozen=True)
class RayOptions(BackendOptions):
    """The ray backend's options from the command line (see :class:`RayBackend`)."""

    #: ``--ray-address`` (None: ``RAY_ADDRESS``, else a Ray of this machine's own).
    address: str | None = None
    #: ``--shared-fs``: every node sees the results folder at the same path.
    shared_fs: bool = False
    #: ``-j``: tasks submitted at once (None: twice the cluster's CPUs).
    max_inflight: int | None = None
    # For a Python caller; the command line leaves them at the backend's defaults.
    #: Most bytes of files other than the log a worker sends home (the log has its own cap, the
    #: spec's ``log_cap_mb``, on every backend).
    files_cap_bytes: int = FILES_CAP_BYTES
    #: Seconds between SIGTERM and SIGKILL when a run is stopped on its worker.
    grace: float = KILL_GRACE_S
    #: Folder on the workers where runs write (None: their temporary folder).
    scratch: str | None = None
    #: Whether a running attempt's log is sent home as it grows, and how often (seconds).
    stream_logs: bool = True
    flush_s: float = FLUSH_S


class TaskOptions(TypedDict, total=False):
    """The keyword arguments of Ray's ``RemoteFunction.options`` that benchlab sets (Ray names
    them; see Ray's ``ray.remote`` documentation)."""

    num_cpus: float
    num_gpus: float
    #: Bytes.
    memory: int
    #: Custom resources by name, as the cluster declares them.
    resources: dict[str, float]


def task_options(resources: Resources) -> TaskOptions:
    """Ray task options for a run's resources: memory from GiB to bytes, custom ones as they are."""
    opts: TaskOptions = {"num_cpus": resources.cpus, "num_gpus": resources.gpus}
    if resources.memory:
        opts["memory"] = int(resources.memory * 2**30)
    if resources.custom:
        opts["resources"] = dict(resources.custom)
    return opts


class RayBackend(Backend):
    """Runs attempts as tasks on a Ray cluster (``address``), or on a local Ray when none is given.

    ``shared_fs``: every node sees the results folder at the same path, and runs
    write into it directly. ``files_cap_bytes``: most bytes of files other than the log one
    attempt ships home otherwise (the log is cut to the spec's ``log_cap_mb``, as everywhere).
    ``max_inflight``: tasks submitted at once [default: twice the cluster's CPUs]; Ray queues
    those that do not fit yet.
    """

    name = "ray"

    @classmethod
    def for_sweep(cls, context: SweepContext, **options: Any) -> RayBackend:
        return cls(spec=context.spec, results_dir=context.results_dir, **options)

    def __init__(self, spec: Spec | None = None, results_dir: Path | str | None = None, *,
                 address: str | None = None, shared_fs: bool = False,
                 files_cap_bytes: int = FILES_CAP_BYTES,
                 grace: float = KILL_GRACE_S, max_inflight: int | None = None,
                 scratch: str | None = None, stream_logs: bool = True, flush_s: float = FLUSH_S):
        ray = _import_ray()
        self._ray = ray
        self._owns_ray = not ray.is_initialized()
        if self._owns_ray:
            _check_reachable(address)
            kwargs: dict[str, Any] = {"address": address, "ignore_reinit_error": True,
                                      "logging_level": logging.WARNING, "log_to_driver": False}
            if address is None and not os.environ.get("RAY_ADDRESS"):
                kwargs["include_dashboard"] = False  # a private Ray for this sweep only
            try:
                ray.init(**kwargs)
            except ConnectionError as exc:
                raise BackendUnavailable(
                    "ray", f"cannot reach the Ray cluster at {address}: {exc}") from None
        self.shared_fs = shared_fs
        self.files_cap_bytes = files_cap_bytes
        self.log_cap = logcap.cap_bytes(spec.log_cap_mb if spec is not None else None)
        self.grace = grace
        self.scratch = scratch
        cpus = ray.cluster_resources().get("CPU", 1.0)
        self.max_inflight = max_inflight or max(2, int(cpus * 2))
        # The task function travels by value: workers need not have benchlab installed.
        ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])
        ray.cloudpickle.register_pickle_by_value(logcap)
        self._remote = ray.remote(max_retries=0)(_attempt)
        self.flush_s = flush_s
        self._sink = self._start_sink() if stream_logs and not shared_fs else None
        self._options: dict[tuple[Any, ...], Any] = {}
        self._flights: dict[Any, _Flight] = {}
        self._woken = threading.Event()
        self._base_env = dict(os.environ)

    def _start_sink(self) -> Any:
        """The log sink actor, pinned to this node; created in the background, no CPU held."""
        ray = self._ray
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        try:
            ctx = ray.get_runtime_context()
            here = ctx.get_node_id()
            key = f"{ctx.get_job_id()}/{here}"
        except Exception:  # noqa: BLE001 - a client-mode driver has no node: no streaming
            return None
        # One sink per driver connection, kept for later sweeps of this process.
        if key not in _SINKS:
            actor = ray.remote(num_cpus=0, max_restarts=0)(_LogSink)
            _SINKS[key] = actor.options(
                scheduling_strategy=NodeAffinitySchedulingStrategy(here, soft=False)).remote()
        return _SINKS[key]

    # -- capacity -------------------------------------------------------------

    def fits(self, run: Run) -> bool:
        return len(self._flights) < self.max_inflight

    def running(self) -> int:
        return len(self._flights)

    # -- lifecycle ------------------------------------------------------------

    def _remote_for(self, resources: Resources) -> Any:
        key = (resources.cpus, resources.gpus, resources.memory,
               tuple(sorted(resources.custom.items())))
        remote = self._options.get(key)
        if remote is None:
            remote = self._options[key] = self._remote.options(**task_options(resources))
        return remote

    def start(self, launch: Launch) -> ProcessInfo:
        run = launch.run
        # Only what the sweep added travels: the worker keeps its own PATH, HOME, devices.
        env = {k: v for k, v in launch.env.items()
               if k not in _HOST_ONLY and self._base_env.get(k) != v}
        job = {
            "run_id": run.run_id, "run_dir": str(launch.run_dir), "env": env, "cwd": launch.cwd,
            "command": run.command, "placeholder": RUN_DIR_PLACEHOLDER, "timeout": launch.timeout,
            "grace": self.grace, "shared_fs": self.shared_fs, "cap": self.files_cap_bytes,
            "log_cap": self.log_cap,
            "scratch": self.scratch, "sink": self._sink, "flush_s": self.flush_s,
            "config": "" if self.shared_fs else _read_text(launch.run_dir / CONFIG_FILE),
        }
        if self.shared_fs:
            job["command"] = launch.command
        ref = self._remote_for(run.resources).remote(job)
        self._flights[ref] = _Flight(launch, time.time())
        return ProcessInfo(pid=None, pgid=None, proc_start=None, node=None)

    def wake(self) -> None:
        self._woken.set()

    def wait(self, timeout: float | None) -> list[Outcome]:
        ray = self._ray
        end = None if timeout is None else time.monotonic() + timeout
        while self._flights:
            if self._woken.is_set():
                self._woken.clear()
                return []
            step = POLL_S if end is None else min(POLL_S, max(0.0, end - time.monotonic()))
            refs = list(self._flights)
            ready, _ = ray.wait(refs, num_returns=1, timeout=step)
            if ready:
                ready, _ = ray.wait(refs, num_returns=len(refs), timeout=0)
                return [self._outcome(ref) for ref in ready]
            if end is not None and time.monotonic() >= end:
                return []
        return []

    def _outcome(self, ref: Any, stopping: bool = False) -> Outcome:
        ray = self._ray
        flight = self._flights.pop(ref)
        launch = flight.launch
        try:
            result = ray.get(ref)
        except ray.exceptions.RayError as exc:
            now = time.time()
            if stopping or isinstance(exc, ray.exceptions.TaskCancelledError):
                return Outcome(launch=launch, exit_code=None, interrupted=True,
                               started=flight.submitted, ended=now)
            if isinstance(exc, ray.exceptions.RayTaskError):
                # The task itself raised: a fault of the setup, not of the node; not retried.
                cause = exc.as_instanceof_cause()
                return Outcome(launch=launch, exit_code=None, started=flight.submitted, ended=now,
                               error=f"the Ray task failed: {_first_line(cause)}")
            kind = type(exc)
            reason = "ran out of memory" if kind.__name__ == "OutOfMemoryError" else "died"
            error = f"worker node {reason} ({kind.__module__}.{kind.__name__}: {_first_line(exc)})"
            return Outcome(launch=launch, exit_code=None, started=flight.submitted, ended=now,
                           error=error, failure_class=NODE_DIED)
        gpus = [int(g) for g in result.get("gpus") or () if str(g).isdigit()] or None
        notes = result.get("notes") or {}
        if not self.shared_fs:
            _write_home(launch.run_dir, result["files"])
        return Outcome(
            launch=launch, exit_code=result.get("exit_code"), signal=result.get("signal"),
            timed_out=bool(result.get("timed_out")), interrupted=stopping,
            started=result.get("started", flight.submitted), ended=result.get("ended", time.time()),
            node=result["node"], error=result.get("error"), gpus=gpus,
            transfer=TransferNote(int(notes["files_cap_bytes"]), notes.get("skipped_files"))
            if "files_cap_bytes" in notes else None,
        )

    def cancel(self, attempt_id: int) -> bool:
        """Stop one attempt (a pruned search trial): its task is force-cancelled, and the
        worker's reaper kills the run's process group; the outcome comes back through ``wait``."""
        for ref, flight in list(self._flights.items()):
            if flight.launch.attempt_id == attempt_id:
                try:
                    self._ray.cancel(ref, force=True)
                except Exception:  # noqa: BLE001 - already finished or gone
                    return False
                return True
        return False

    def terminate_all(self, grace: float) -> list[Outcome]:
        ray = self._ray
        for ref in list(self._flights):
            try:
                ray.cancel(ref, force=True)
            except Exception:  # noqa: BLE001 - already finished or gone
                pass
        outcomes: list[Outcome] = []
        deadline = time.monotonic() + grace
        while self._flights and time.monotonic() < deadline:
            ready, _ = ray.wait(list(self._flights), num_returns=len(self._flights),
                                timeout=max(0.0, deadline - time.monotonic()))
            outcomes += [self._outcome(ref, stopping=True) for ref in ready]
        now = time.time()
        for ref, flight in list(self._flights.items()):
            del self._flights[ref]
            outcomes.append(Outcome(launch=flight.launch, exit_code=None, interrupted=True,
                                    started=flight.submitted, ended=now))
        return outcomes

    def close(self) -> None:
        if self._flights:
            self.terminate_all(self.grace)
        if self._owns_ray and self._ray.is_initialized():
            self._ray.shutdown()


def _check_reachable(address: str | None, timeout: float = 5.0) -> None:
    """Fail fast on a ``host:port`` nobody answers: Ray itself keeps retrying for minutes."""
    if not address or address == "auto" or "://" in address or ":" not in address:
        return
    host, _, port = address.rpartition(":")
    try:
        socket.create_connection((host, int(port)), timeout=timeout).close()
    except ValueError:
        raise BackendUnavailable("ray", f"--ray-address {address!r}: expected HOST:PORT") from None
    except OSError as exc:
        raise BackendUnavailable(
            "ray", f"nothing answers at {address} ({exc.strerror or exc}); start the cluster's "
            f"head there with `ray start --head --port={port}`, or check the address") from None


def _first_line(exc: BaseException) -> str:
    return (str(exc).strip().splitlines() or [""])[0][:300]


def _read_text(path: Path) -> str:
    try:
        return path.read_text()
    except OSError:
        return ""


def _write_home(run_dir: Path, files: list[tuple[str, bytes]]) -> None:
    """Write what an attempt shipped home into its run directory (config.yaml is already there)."""
    root = run_dir.resolve()
    for rel, data in files:
        target = (run_dir / rel).resolve()
        if root not in target.parents:
            continue  # never outside the run directory
        target.parent.mkdir(parents=True, exist_ok=True)
        # The whole file, replacing any streamed copy of the log (a prefix of it).
        target.write_bytes(data)
