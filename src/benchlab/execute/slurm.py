"""The Slurm backend: each attempt a Slurm job (or a task of a job array), submitted through submitit.

Launches the sweep starts are gathered and submitted at the next ``wait()``, as one job
array per set of resources, throttled with ``%N`` from ``-j N`` (``jobs``): a sweep of
10,000 runs is a few ``sbatch`` calls, and Slurm itself keeps at most N of an array
running. At most ``array_size`` runs are submitted and not finished at once.

Each job asks for the run's ``cpus`` (rounded up), ``gpus`` as ``--gres=gpu:N`` (a
fraction takes a whole device: Slurm does not share them), ``memory`` (GiB) and a time
limit of the run's ``timeout`` plus a margin, with the partition, account, QOS,
constraint and extra ``sbatch`` options of the spec's ``slurm:`` section. On the node
the command runs in its own process group with the node's environment plus the run's
variables, writing straight into its run directory: Slurm clusters share their
filesystems, and the results folder must be on one that the nodes see at the same path.
The run's timeout is enforced on the node (TERM to the group, a grace period, KILL).

The backend learns of jobs through one ``squeue`` call per poll over all of them
(state, Slurm's reason while queued, node) and of their ends through the result file
submitit writes; a job that left the queue without one is read from ``sacct`` and
classed: cancelled, timeout, preempted, node-died or killed by a signal. The sweep
records what it learns (``placements()``) in the ledger, and after a crash re-attaches
to the jobs the ledger names (``adopt()``) instead of submitting them again.
"""

from __future__ import annotations

import math
import os
import shutil
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, TypedDict

import psutil

from benchlab.errors import BackendUnavailable
from benchlab.execute.base import Backend, BackendOptions, Launch, Outcome, ProcessInfo, SweepContext
from benchlab.execute.proctree import KILL_GRACE_S, end, signal_tree
from benchlab.json_types import JsonObject
from benchlab.ledger import Placement
from benchlab.names.failures import CANCELLED, NODE_DIED, OOM, PREEMPTED
from benchlab.plan import Run
from benchlab.spec import Resources, Slurm, Spec

POLL_S = 0.2  # how often wait() looks for results
QUEUE_EVERY_S = 1.0  # how often squeue is asked
SUBMIT_TIMEOUT_S = 120.0
#: Minutes added to a run's timeout for the job's time limit: the node enforces the timeout
#: itself, Slurm's limit is the backstop.
TIME_MARGIN_MIN = 2
#: Seconds a job may be gone from the queue, with no result file and no sacct record, before it
#: is reported lost (slurmdbd may lag behind slurmctld).
GONE_GRACE_S = 30.0
PLACEMENT_FILE = "slurm.json"
_FINAL = {"COMPLETED", "CANCELLED", "FAILED", "TIMEOUT", "PREEMPTED", "NODE_FAIL", "OUT_OF_MEMORY",
          "BOOT_FAIL", "DEADLINE", "SPECIAL_EXIT", "REVOKED"}
# Variables of the driver's machine that must not override the node's own. BENCHLAB_ATTEMPT_KEY
# marks the local backend's processes, which a later sweep kills as leftovers: a Slurm job outlives
# its driver on purpose (the next sweep re-attaches to it), even where it runs on the same machine.
_HOST_ONLY = {"CUDA_VISIBLE_DEVICES", "HOME", "PATH", "PWD", "OLDPWD", "TMPDIR", "HOSTNAME", "VIRTUAL_ENV",
              "CONDA_PREFIX", "SLURM_CONF", "BENCHLAB_ATTEMPT_KEY"}


# ---------------------------------------------------------------- on the node


@dataclass(frozen=True)
class NodeJob:
    """What the driver sends a job's node (pickled by submitit): how to run one attempt there."""

    run_dir: str
    log: str
    command: str
    cwd: str
    #: The run's variables that differ from the driver's environment (secrets left out).
    env: dict[str, str]
    #: Seconds (None: no limit).
    timeout: float | None
    #: Seconds between TERM and KILL when the command is stopped.
    grace: float

    @classmethod
    def from_json(cls, data: JsonObject) -> NodeJob:
        """A job as a mapping of the same keys: the form jobs submitted by benchlab 0.x before
        this record were pickled in, which a node may still be handed after an upgrade."""
        return cls(run_dir=str(data["run_dir"]), log=str(data["log"]), command=str(data["command"]),
                   cwd=str(data["cwd"]), env=dict(data["env"]), timeout=data["timeout"],
                   grace=float(data["grace"]))


@dataclass(frozen=True)
class NodeResult:
    """What the node sends home when the command ended by itself (submitit pickles it)."""

    exit_code: int | None
    signal: int | None
    timed_out: bool
    started: float
    ended: float
    node: str
    #: ``CUDA_VISIBLE_DEVICES`` as Slurm set it for the job (None: unset).
    gpus: str | None
    job_id: str | None

    @classmethod
    def from_json(cls, data: JsonObject, submitted: float) -> NodeResult:
        """A result as a mapping of the same keys, as results of jobs run before this record were
        pickled (a sweep re-attaching after an upgrade reads them); ``submitted`` stands in for a
        missing start time."""
        return cls(exit_code=data.get("exit_code"), signal=data.get("signal"),
                   timed_out=bool(data.get("timed_out")), started=data.get("started", submitted),
                   ended=data.get("ended", time.time()), node=data.get("node") or "",
                   gpus=data.get("gpus"), job_id=data.get("job_id"))


def run_attempt(job: NodeJob) -> NodeResult:
    """Run one attempt's command on the node Slurm chose; what submitit pickles home.

    SIGTERM (scancel, preemption, the time limit) goes on to the command's group, which is
    killed after the grace period; the process then exits without a result, so that the
    job's end is read from Slurm's accounting (cancelled, timeout, preempted).
    """
    if isinstance(job, Mapping):
        job = NodeJob.from_json(dict(job))  # pickled by a benchlab from before NodeJob
    started = time.time()
    node = socket.gethostname()
    job_id = _job_id_here()
    gpus = os.environ.get("CUDA_VISIBLE_DEVICES")
    run_dir = job.run_dir
    os.makedirs(run_dir, exist_ok=True)
    _write_json(os.path.join(run_dir, PLACEMENT_FILE),
                {"job_id": job_id, "node": node, "gpus": gpus, "started": started})
    env = dict(os.environ)
    env.update(job.env)
    for key in [k for k in env if k.startswith("SUBMITIT_")]:
        env.pop(key)
    grace = job.grace
    with open(job.log, "ab") as log:
        proc = subprocess.Popen(["/bin/sh", "-c", job.command], cwd=job.cwd, env=env, stdout=log,
                                stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True,
                                preexec_fn=_die_with_parent)

    # The command's shell, to wait for: as a child of this process not yet reaped, its pid
    # cannot be taken by another process in the meantime.
    shell = psutil.Process(proc.pid)

    def stop_group(signum: int, frame: Any) -> None:
        end([], grace, group=proc.pid, watch=[shell])
        signal_tree(proc.pid, signal.SIGKILL)
        # Reaped before exiting, so that no zombie is left to the node's init. Not through
        # ``proc``: this handler may have interrupted its wait, which holds a lock.
        try:
            os.waitpid(proc.pid, 0)
        except ChildProcessError:
            pass  # the interrupted wait had reaped it
        os._exit(128 + signum)

    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, stop_group)
    timed_out = False
    try:
        proc.wait(timeout=job.timeout)
    except subprocess.TimeoutExpired:
        timed_out = True
        end([], grace, group=proc.pid, watch=[shell])
        proc.wait()
    signal_tree(proc.pid, signal.SIGKILL)  # what the command left behind in its group
    code = proc.returncode
    stopped = {-signal.SIGTERM, -signal.SIGINT, 128 + signal.SIGTERM, 128 + signal.SIGINT}
    if not timed_out and code in stopped:
        # scancel and preemption signal every process of the job at once: the command (or the
        # shell, which reports it as 128 + N) may die of it before this process's own handler
        # runs, as it often does on a loaded node. Ending here without a result leaves the verdict
        # to Slurm's accounting (CANCELLED, PREEMPTED), as the handler does, rather than a result
        # that reads "killed by a signal".
        os._exit(code if code > 0 else 128 - code)
    return NodeResult(exit_code=code if code >= 0 else None, signal=-code if code < 0 else None,
                      timed_out=timed_out, started=started, ended=time.time(), node=node, gpus=gpus,
                      job_id=job_id)


def _die_with_parent() -> None:
    """In the command's process, before exec: SIGKILL when this job's process dies (killed with
    SIGKILL, the command would otherwise outlive its job in a group of its own)."""
    try:
        import ctypes

        ctypes.CDLL(None).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def _job_id_here() -> str | None:
    array = os.environ.get("SLURM_ARRAY_JOB_ID")
    if array is not None:
        return f"{array}_{os.environ.get('SLURM_ARRAY_TASK_ID')}"
    return os.environ.get("SLURM_JOB_ID")


def _write_json(path: str, data: dict[str, Any]) -> None:
    import json

    tmp = f"{path}.tmp"
    with open(tmp, "w") as fh:
        json.dump(data, fh)
    os.replace(tmp, path)


# ---------------------------------------------------------------- on the driver


@dataclass
class _Flight:
    launch: Launch
    submitted: float
    job_id: str | None = None  # None until its array is submitted
    result_pickle: Path | None = None
    state: str | None = None
    reason: str | None = None
    node: str | None = None
    gone_since: float | None = None
    reported: tuple[str | None, str | None, str | None] = (None, None, None)
    placed: bool = False  # its run directory's slurm.json was read
    gpus: list[int] | None = None  # the devices the job holds, once its slurm.json said


@dataclass(frozen=True)
class SlurmOptions(BackendOptions):
    """The slurm backend's options from the command line (see :class:`SlurmBackend`)."""

    #: ``-j``: most runs of one array that Slurm runs at once (None: the array size).
    jobs: int | None = None
    #: ``--slurm KEY=VALUE`` flags by key, over the spec's ``slurm:`` section (:func:`settings_from`).
    slurm: dict[str, str] = field(default_factory=dict)
    # For a Python caller; the command line leaves them at the backend's defaults.
    #: Where submitit keeps its job files (None: ``.slurm`` in the results folder).
    folder: Path | str | None = None
    #: Seconds between SIGTERM and SIGKILL of a run's command on its node.
    grace: float = KILL_GRACE_S
    #: Seconds between looks at the jobs, and between reads of Slurm's queue.
    poll_s: float = POLL_S
    queue_every_s: float = QUEUE_EVERY_S


@dataclass(frozen=True)
class Accounting:
    """One job's line of Slurm's accounting (``sacct -X -P -o JobID,State,NodeList,ExitCode``)."""

    job_id: str
    #: The job's final (or current) state, such as ``CANCELLED`` or ``TIMEOUT``.
    state: str
    #: What follows the state word: who cancelled it (``by 1000``), else empty.
    by: str
    #: The node list (``None assigned`` while none was).
    node: str
    #: ``code:signal``, as sacct prints it.
    exit_code: str


def parse_sacct(out: str) -> dict[str, Accounting]:
    """Job id -> its accounting, from ``sacct -X -n -P -o JobID,State,NodeList,ExitCode``'s output
    (lines of another shape are skipped)."""
    rows = {}
    for line in out.splitlines():
        parts = line.strip().split("|")
        if len(parts) == 4:
            state, _, by = parts[1].partition(" ")
            rows[parts[0]] = Accounting(parts[0], state, by, parts[2], parts[3])
    return rows


def accounted_outcome(acct: Accounting, base: Outcome) -> Outcome:
    """How a job that ended without a result ended, by its accounting: ``base`` (the attempt's
    launch, times, node and devices, no exit code) with the exit, signal or failure class the
    accounting tells."""
    job = f"Slurm job {base.job_id or acct.job_id}"
    state, where = acct.state, base.node
    if state == "TIMEOUT":
        return replace(base, timed_out=True)
    if state == "CANCELLED":
        who = f" {acct.by}" if acct.by else ""
        return replace(base, error=f"{job} was cancelled{who}", failure_class=CANCELLED)
    if state == "PREEMPTED":
        return replace(base, error=f"{job} was preempted", failure_class=PREEMPTED)
    if state in ("NODE_FAIL", "BOOT_FAIL"):
        return replace(base, error=f"{job}: its node {where or '?'} failed ({state})", failure_class=NODE_DIED)
    if state == "OUT_OF_MEMORY":
        return replace(base, error=f"{job} ran out of its memory limit (OUT_OF_MEMORY)", failure_class=OOM)
    code, _, sig = acct.exit_code.partition(":")
    if sig.isdigit() and int(sig):
        return replace(base, signal=int(sig))
    if code.isdigit() and int(code):
        # The job's process died without a result (killed: 128+N): judged like a local run's end.
        return replace(base, exit_code=int(code))
    return replace(base, exit_code=int(code) if code.isdigit() else None,
                   error=f"{job} ended {state} (exit {acct.exit_code}) without a result",
                   failure_class=NODE_DIED)


@dataclass
class _Settings:
    partition: str | None = None
    account: str | None = None
    qos: str | None = None
    constraint: str | None = None
    sbatch: dict[str, Any] = field(default_factory=dict)
    setup: list[str] = field(default_factory=list)
    array_size: int = 1000


def settings_from(section: Slurm | None, flags: dict[str, str] | None) -> _Settings:
    """The spec's ``slurm:`` section with ``--slurm KEY=VALUE`` flags on top: the four named keys
    go to their fields, any other key is an extra sbatch option."""
    s = _Settings()
    if section is not None:
        s = _Settings(section.partition, section.account, section.qos, section.constraint,
                      dict(section.sbatch), list(section.setup), section.array_size)
    for key, value in (flags or {}).items():
        key = key.strip().lstrip("-").replace("-", "_")
        if key in ("partition", "account", "qos", "constraint"):
            setattr(s, key, value)
        elif key == "array_size":
            s.array_size = int(value)
        else:
            s.sbatch[key] = value
    return s


class SbatchParameters(TypedDict, total=False):
    """The parameters of submitit's ``SlurmExecutor.update_parameters`` that benchlab sets
    (submitit names them and turns them into ``sbatch`` options)."""

    cpus_per_task: int
    use_srun: bool
    stderr_to_stdout: bool
    signal_delay_s: int
    gres: str
    mem: str
    #: Minutes (None: the partition's own limit).
    time: int | None
    partition: str
    account: str
    qos: str
    constraint: str
    setup: list[str]
    #: Further ``sbatch`` long options, underscores for dashes, as the spec's ``slurm.sbatch``
    #: and ``--slurm`` name them.
    additional_parameters: JsonObject


def sbatch_parameters(resources: Resources, timeout: float | None, settings: _Settings) -> SbatchParameters:
    """submitit's ``SlurmExecutor`` parameters for a run's resources and timeout."""
    params: SbatchParameters = {"cpus_per_task": max(1, math.ceil(resources.cpus)), "use_srun": False,
                              "stderr_to_stdout": True, "signal_delay_s": 30}
    if resources.gpus > 0:
        params["gres"] = f"gpu:{math.ceil(resources.gpus)}"
    if resources.memory:
        params["mem"] = f"{max(1, math.ceil(resources.memory * 1024))}M"
    # submitit writes --time=5 unless told: no timeout asks for the partition's own limit.
    params["time"] = None if timeout is None else math.ceil(timeout / 60) + TIME_MARGIN_MIN
    if settings.partition:
        params["partition"] = settings.partition
    if settings.account:
        params["account"] = settings.account
    if settings.qos:
        params["qos"] = settings.qos
    if settings.constraint:
        params["constraint"] = settings.constraint
    if settings.setup:
        params["setup"] = list(settings.setup)
    extra = {k.replace("-", "_"): v for k, v in settings.sbatch.items()}
    if extra:
        params["additional_parameters"] = extra
    return params


def check_available() -> Any:
    """submitit (or ``MissingExtra`` with the install line), and ``sbatch`` on the PATH."""
    from benchlab.names.extras import load

    submitit = load("submitit", "the slurm backend")
    missing = [c for c in ("sbatch", "squeue", "sacct", "scancel", "srun") if shutil.which(c) is None]
    if missing:
        raise BackendUnavailable("slurm", f"{', '.join(missing)} not found on the PATH; run benchlab on a "
                                          "Slurm login node (or load Slurm's module first)")
    return submitit


class SlurmBackend(Backend):
    """Runs attempts as Slurm jobs; see the module's docstring.

    ``jobs``: most runs of one array that Slurm runs at once (``%N``). ``slurm``: the
    ``--slurm KEY=VALUE`` flags, over the spec's ``slurm:`` section. ``folder``: where
    submitit keeps its job files [default: ``.slurm`` in the results folder].
    """

    name = "slurm"

    @classmethod
    def for_sweep(cls, context: SweepContext, **options: Any) -> SlurmBackend:
        # -j only when given (the CLI passes it): the login node's cores say nothing of the cluster.
        return cls(spec=context.spec, results_dir=context.results_dir, **options)

    def __init__(self, spec: Spec | None = None, results_dir: Path | str | None = None, *,
                 jobs: int | None = None, slurm: dict[str, str] | None = None, folder: Path | str | None = None,
                 grace: float = KILL_GRACE_S, poll_s: float = POLL_S, queue_every_s: float = QUEUE_EVERY_S):
        self._submitit = check_available()
        self.settings = settings_from(spec.slurm if spec is not None else None, slurm)
        self.parallel = jobs or self.settings.array_size
        root = Path(results_dir) if results_dir is not None else Path.cwd()
        self.folder = Path(folder) if folder is not None else root / ".slurm"
        self.job_name = f"benchlab-{spec.name}" if spec is not None else "benchlab"
        self.grace = grace
        self.poll_s = poll_s
        self.queue_every_s = queue_every_s
        self._pending: list[Launch] = []
        self._flights: dict[int, _Flight] = {}  # by attempt id
        self._by_job: dict[str, int] = {}
        self._woken = threading.Event()
        self._base_env = dict(os.environ)
        self._queue_at = 0.0
        self._placements: list[Placement] = []
        self._warnings: list[str] = []

    # -- capacity -------------------------------------------------------------

    def fits(self, run: Run) -> bool:
        return len(self._flights) < self.settings.array_size

    def running(self) -> int:
        return len(self._flights)

    # -- lifecycle ------------------------------------------------------------

    def start(self, launch: Launch) -> ProcessInfo:
        """Queue ``launch`` for the next submission (at the next ``wait()``)."""
        self._pending.append(launch)
        self._flights[launch.attempt_id] = _Flight(launch, time.time())
        return ProcessInfo(pid=None, pgid=None, proc_start=None, node=None)

    def adopt(self, launch: Launch, job_id: str) -> bool:
        """Follow a job submitted by an earlier sweep (its driver died); False when Slurm no longer
        knows it and it left no result, so that the run is launched again."""
        result = self._result_path(job_id)
        flight = _Flight(launch, time.time(), job_id=job_id, result_pickle=result, gpus=launch.gpus)
        if not result.exists():
            states = self._squeue([job_id])
            if job_id not in states:
                acct = self._sacct([job_id])
                if job_id not in acct:
                    return False
        self._flights[launch.attempt_id] = flight
        self._by_job[job_id] = launch.attempt_id
        self._placements.append(Placement(launch.attempt_id, job_id, "ADOPTED", None))
        return True

    def _result_path(self, job_id: str) -> Path:
        paths = self._submitit.core.utils.JobPaths(self._folder_pattern(), job_id=job_id, task_id=0)
        return Path(paths.result_pickle)

    def _folder_pattern(self) -> Path:
        return self.folder / "%j"

    def _submit_pending(self) -> None:
        if not self._pending:
            return
        groups: dict[tuple[Any, ...], list[Launch]] = {}
        for launch in self._pending:
            r = launch.run.resources
            key = (r.cpus, r.gpus, r.memory, launch.timeout)
            groups.setdefault(key, []).append(launch)
        self._pending = []
        for launches in groups.values():
            self._submit(launches)

    def _submit(self, launches: list[Launch]) -> None:
        submitit = self._submitit
        first = launches[0]
        params = sbatch_parameters(first.run.resources, first.timeout, self.settings)
        executor = submitit.SlurmExecutor(folder=self._folder_pattern(), max_num_timeout=0)
        executor.update_parameters(job_name=self.job_name, array_parallelism=self.parallel, **params)
        jobs: list[Any] = []
        try:
            with executor.batch():
                for launch in launches:
                    jobs.append(executor.submit(run_attempt, self._job(launch)))
        except Exception as exc:  # noqa: BLE001 - sbatch refused: every run of the array fails to launch
            message = _first_line(exc)
            now = time.time()
            for launch in launches:
                flight = self._flights[launch.attempt_id]
                flight.state = "REFUSED"
                flight.reason = f"sbatch refused the job: {message}"
                flight.gone_since = now
            return
        for launch, job in zip(launches, jobs, strict=True):
            flight = self._flights[launch.attempt_id]
            flight.job_id = str(job.job_id)
            flight.result_pickle = Path(job.paths.result_pickle)
            flight.state = "PENDING"
            self._by_job[flight.job_id] = launch.attempt_id
            self._placements.append(Placement(launch.attempt_id, flight.job_id, "PENDING", None))

    def _job(self, launch: Launch) -> NodeJob:
        from benchlab.secrets import ENV_PREFIX

        env = {}
        for k, v in launch.env.items():
            if k in _HOST_ONLY or self._base_env.get(k) == v:
                continue
            if k.startswith(ENV_PREFIX):
                # A secret variable's value is never pickled into the job's file on disk: sbatch hands
                # the driver's environment on to the job (its default --export=ALL).
                os.environ[k] = v
                continue
            env[k] = v
        return NodeJob(run_dir=str(launch.run_dir), log=str(launch.log_path), command=launch.command,
                       cwd=launch.cwd, env=env, timeout=launch.timeout, grace=self.grace)

    def wake(self) -> None:
        self._woken.set()

    def wait(self, timeout: float | None) -> list[Outcome]:
        self._submit_pending()
        end = None if timeout is None else time.monotonic() + timeout
        while self._flights:
            if self._woken.is_set():
                self._woken.clear()
                return []
            outcomes = self._poll()
            if outcomes or self._placements:  # placements: the sweep records them as they come
                return outcomes
            if end is not None and time.monotonic() >= end:
                return []
            step = self.poll_s if end is None else min(self.poll_s, max(0.0, end - time.monotonic()))
            self._woken.wait(step)
        return []

    def placements(self) -> list[Placement]:
        """What Slurm said of attempts since the last call (job ids, states, reasons, nodes, GPUs)."""
        out, self._placements = self._placements, []
        return out

    def warnings(self) -> list[str]:
        out, self._warnings = self._warnings, []
        return out

    # -- polling --------------------------------------------------------------

    def _poll(self) -> list[Outcome]:
        outcomes: list[Outcome] = []
        for attempt_id, flight in list(self._flights.items()):
            if flight.result_pickle is not None and flight.result_pickle.exists():
                outcome = self._from_result(flight)
                if outcome is not None:
                    outcomes.append(outcome)
                    self._forget(attempt_id)
        now = time.monotonic()
        if now - self._queue_at >= self.queue_every_s:
            self._queue_at = now
            outcomes += self._check_queue()
        return outcomes

    def _forget(self, attempt_id: int) -> None:
        flight = self._flights.pop(attempt_id)
        if flight.job_id is not None:
            self._by_job.pop(flight.job_id, None)

    def _check_queue(self) -> list[Outcome]:
        submitted = {f.job_id: f for f in self._flights.values() if f.job_id is not None}
        states = self._squeue(list(submitted)) if submitted else {}
        now = time.time()
        gone: list[str] = []
        for job_id, flight in submitted.items():
            row = states.get(job_id)
            if row is None or row[0] in _FINAL:
                gone.append(job_id)
                continue
            flight.gone_since = None
            state, reason, node = row
            # squeue says "None" before the scheduler has looked at a job.
            flight.state, flight.reason = state, reason if state == "PENDING" and reason != "None" else None
            flight.node = node or flight.node
            self._report(flight)
        outcomes: list[Outcome] = []
        if gone:
            acct = self._sacct(gone)
            for job_id in gone:
                flight = submitted[job_id]
                if flight.result_pickle is not None and flight.result_pickle.exists():
                    continue  # ended between the two looks: read at the next poll
                info = acct.get(job_id)
                if info is None or info.state not in _FINAL:
                    if flight.gone_since is None:
                        flight.gone_since = now
                    elif now - flight.gone_since > GONE_GRACE_S:
                        outcomes.append(self._lost(flight, "Slurm no longer knows the job and it left no result"))
                    continue
                if info.state == "COMPLETED":
                    # The result file is written before the job ends; give a slow filesystem time.
                    if flight.gone_since is None:
                        flight.gone_since = now
                    elif now - flight.gone_since > GONE_GRACE_S:
                        outcomes.append(self._lost(flight, "the job completed but left no result file "
                                                           f"({flight.result_pickle})"))
                    continue
                outcomes.append(self._from_accounting(flight, info))
        for flight in [f for f in self._flights.values() if f.state == "REFUSED"]:
            outcomes.append(Outcome(launch=flight.launch, exit_code=None, started=flight.submitted,
                                    ended=time.time(), error=flight.reason))
        for outcome in outcomes:
            self._forget(outcome.launch.attempt_id)
        return outcomes

    def _report(self, flight: _Flight) -> None:
        """Queue a placement for the ledger when Slurm's word on the job changed, or when a running
        job's own record (node, GPUs, start) has appeared in its run directory."""
        key = (flight.state, flight.reason, flight.node)
        if flight.job_id is None or (key == flight.reported and (flight.state != "RUNNING" or flight.placed)):
            return
        flight.reported = key
        gpus, started = None, None
        if flight.state == "RUNNING":
            placed = _read_placement(flight.launch.run_dir / PLACEMENT_FILE)
            if placed.get("job_id") == flight.job_id:  # not an earlier attempt's
                flight.placed = True
                gpus = _gpu_list(placed.get("gpus"))
                started = placed.get("started")
                if gpus:
                    flight.gpus = gpus
        self._placements.append(Placement(flight.launch.attempt_id, flight.job_id, flight.state, flight.reason,
                                          node=flight.node if flight.state == "RUNNING" else None, gpus=gpus,
                                          started=started))

    def _from_result(self, flight: _Flight) -> Outcome | None:
        from submitit.core.utils import pickle_load

        if flight.result_pickle is None:
            return None
        try:
            status, value = pickle_load(flight.result_pickle)
        except (EOFError, OSError, ValueError):
            return None  # still being written
        launch = flight.launch
        if status != "success":
            text = str(value).strip().splitlines()
            return Outcome(launch=launch, exit_code=None, started=flight.submitted, ended=time.time(),
                           node=flight.node, error=f"the Slurm job {flight.job_id} failed: "
                                                   f"{text[-1] if text else 'no traceback'}")
        result = value if isinstance(value, NodeResult) else NodeResult.from_json(value, flight.submitted)
        gpus = _gpu_list(result.gpus) if result.gpus else flight.gpus
        node = result.node or None
        self._placements.append(Placement(launch.attempt_id, flight.job_id or "", "COMPLETED", None,
                                          node=node, gpus=gpus, started=result.started))
        return Outcome(launch=launch, exit_code=result.exit_code, signal=result.signal,
                       timed_out=result.timed_out, started=result.started, ended=result.ended, node=node,
                       gpus=gpus, job_id=flight.job_id or "")

    def _from_accounting(self, flight: _Flight, acct: Accounting) -> Outcome:
        """The outcome of a job that ended without a result: Slurm ended it, or its process died."""
        launch = flight.launch
        placed = _read_placement(launch.run_dir / PLACEMENT_FILE)
        started = placed.get("started", flight.submitted) if placed.get("job_id") == flight.job_id else \
            flight.submitted
        where = acct.node if acct.node and acct.node != "None assigned" else flight.node
        self._placements.append(Placement(launch.attempt_id, flight.job_id or "", acct.state, acct.by or None,
                                          node=where))
        return accounted_outcome(acct, Outcome(launch=launch, exit_code=None, started=started, ended=time.time(),
                                               node=where, gpus=flight.gpus, job_id=flight.job_id or "",
                                               job_state=acct.state))

    def _lost(self, flight: _Flight, why: str) -> Outcome:
        return Outcome(launch=flight.launch, exit_code=None, started=flight.submitted, ended=time.time(),
                       node=flight.node, error=f"Slurm job {flight.job_id}: {why}",
                       failure_class=NODE_DIED, gpus=flight.gpus, job_id=flight.job_id or "")

    # -- Slurm's commands -------------------------------------------------------

    def _squeue(self, job_ids: list[str]) -> dict[str, tuple[str, str, str]]:
        """job id -> (state, reason, node) of the jobs Slurm still lists (array tasks one per line)."""
        masters = sorted({j.split("_")[0] for j in job_ids})
        out = _call(["squeue", "-h", "-r", "-t", "all", "-j", ",".join(masters), "-o", "%i|%T|%r|%N"])
        if out is None:
            return {}
        rows = {}
        for line in out.splitlines():
            parts = line.strip().split("|")
            if len(parts) == 4:
                rows[parts[0]] = (parts[1], parts[2], parts[3])
        return rows

    def _sacct(self, job_ids: list[str]) -> dict[str, Accounting]:
        """Job id -> its line of Slurm's accounting."""
        masters = sorted({j.split("_")[0] for j in job_ids})
        out = _call(["sacct", "-X", "-n", "-P", "-j", ",".join(masters), "-o", "JobID,State,NodeList,ExitCode"])
        return parse_sacct(out or "")

    def _scancel(self, job_ids: list[str]) -> None:
        if job_ids:
            _call(["scancel", *sorted(set(job_ids))])

    def cancel(self, attempt_id: int) -> bool:
        """Stop one attempt (a pruned search trial): ``scancel`` of its job, whose handler on the
        node stops the command's group; the outcome comes back through ``wait`` once the queue
        no longer lists the job. False when the job was never submitted (sbatch refused it) or
        ``scancel`` failed (it had already ended): the attempt's own outcome stands."""
        flight = self._flights.get(attempt_id)
        if flight is None or flight.job_id is None:
            return False
        if _call(["scancel", flight.job_id]) is None:
            return False
        self._queue_at = 0.0  # look at the queue at the next poll, not a QUEUE_EVERY_S later
        return True

    def terminate_all(self, grace: float) -> list[Outcome]:
        """Cancel every job of this sweep (``scancel``), queued ones too; report them interrupted."""
        self._pending = []
        ids = [f.job_id for f in self._flights.values() if f.job_id is not None]
        self._scancel(ids)
        deadline = time.monotonic() + grace
        while ids and time.monotonic() < deadline:
            states = self._squeue(ids)
            if not any(states.get(j, ("",))[0] not in _FINAL and j in states for j in ids):
                break
            time.sleep(0.2)
        now = time.time()
        outcomes = [Outcome(launch=f.launch, exit_code=None, interrupted=True, started=f.submitted, ended=now,
                            node=f.node, gpus=f.gpus, job_id=f.job_id or "")
                    for f in self._flights.values()]
        self._flights.clear()
        self._by_job.clear()
        return outcomes

    def close(self) -> None:
        if self._flights:
            self.terminate_all(self.grace)


def _call(argv: list[str]) -> str | None:
    try:
        p = subprocess.run(argv, capture_output=True, text=True, timeout=SUBMIT_TIMEOUT_S)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return p.stdout if p.returncode == 0 else None


def _first_line(exc: BaseException) -> str:
    lines = [ln for ln in str(exc).strip().splitlines() if ln.strip()]
    return (lines[-1] if lines else type(exc).__name__)[:300]


def _read_placement(path: Path) -> dict[str, Any]:
    import json

    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _gpu_list(gpus: Any) -> list[int] | None:
    """``CUDA_VISIBLE_DEVICES`` as indices (None when unset or not indices)."""
    if not gpus:
        return None
    return [int(g) for g in str(gpus).split(",") if g.strip().isdigit()] or None
