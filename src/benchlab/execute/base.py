"""The Backend protocol: what every executor (local, ray, ...) offers the sweep, and the registry
that finds one by name.

A backend starts launches and reports outcomes; it knows nothing of specs' retries, the ledger
or run directories' contents, which the sweep (``benchlab.execute.sweep``) owns. The split is
submitit's: the sweep is the caller that submits, a backend the executor, an attempt the job.

Adding a backend
----------------
Write ``benchlab/execute/<name>.py`` with a subclass of :class:`Backend`: the seven abstract
methods are what every backend must do; the others have defaults that fit a backend whose runs
happen elsewhere (no GPUs of this machine, no placement limits, nothing to settle). Build it
from the sweep's :class:`SweepContext` in :meth:`Backend.for_sweep` when it needs more than its
own options (declared as a frozen :class:`BackendOptions` subclass whose fields are its
constructor's keywords, as ``RayOptions`` and ``SlurmOptions`` are). Settings that belong in the
spec file go in a section of its own, the top-level key of the backend's name, declared as a
pydantic model in :attr:`Backend.section` (``execute/launcher.py``'s templates): the spec's loader
validates it with file and line, and :meth:`for_sweep` reads it with ``spec.backend_section(name)``.
Then make it known by name, in one of three ways:

- shipped with benchlab: one line in :data:`BUILTIN_BACKENDS` (``"<name>": "module:Class"``);
- in another package: an entry point in the ``benchlab.backends`` group, same syntax;
- in-process (tests, notebooks): ``@register("<name>")`` on the class.

The sweep finds it with :func:`get_backend`; nothing in the sweep changes. What the backend
knows of an ended attempt beyond its exit (a failure class such as a node that died, the devices
it held, the scheduler's job) goes in :class:`Outcome`'s fields, which
:func:`benchlab.execute.record.record_attempt` records. ``execute/debug.py`` is the smallest
complete backend: one attempt at a time, run inside :meth:`Backend.start`. A backend that runs
commands on other machines must bring the run directory's files (``benchlab.names.run_files``) home
before it reports the outcome. ``Spec.backend`` lists the names a spec file may choose.
"""

from __future__ import annotations

import abc
import importlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, fields
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, ClassVar

from pydantic import BaseModel

from benchlab.errors import BackendUnavailable
from benchlab.plan import Run

if TYPE_CHECKING:
    from benchlab.execute.gpu_sampler import GpuSampler
    from benchlab.ledger import Placement
    from benchlab.spec import Resources, Spec


@dataclass
class Launch:
    """One attempt of a run, ready to start."""

    run: Run
    attempt_id: int
    number: int
    run_dir: Path
    command: str
    env: dict[str, str]
    cwd: str
    timeout: float | None
    log_path: Path
    #: Devices the attempt already holds when it is re-attached to (:meth:`Backend.adopt`), as the
    #: ledger recorded them; None for a fresh launch, whose devices the backend chooses at start
    #: (:attr:`ProcessInfo.gpus`) and reports at the end (:attr:`Outcome.gpus`).
    gpus: list[int] | None = None


@dataclass(frozen=True)
class TransferNote:
    """What a backend that brings run files home from another machine left behind, for the run's
    ``provenance.json``: the size cap of the files other than the log, and the files it left
    out (the log is cut to ``log_cap_mb`` as on every backend, and says so itself)."""

    files_cap_bytes: int
    skipped_files: str | None = None

    def to_json(self) -> dict[str, str]:
        """The note as ``provenance.json`` keeps it (strings, absent parts left out)."""
        out = {"files_cap_bytes": str(self.files_cap_bytes)}
        if self.skipped_files is not None:
            out["skipped_files"] = self.skipped_files
        return out


@dataclass
class Outcome:
    """How an attempt ended, as the backend saw it."""

    launch: Launch
    exit_code: int | None
    signal: int | None = None
    timed_out: bool = False
    interrupted: bool = False
    started: float = 0.0
    ended: float = 0.0
    node: str | None = None
    error: str | None = None  # the command could not even start (missing workdir, ...)
    #: The failure class the backend knows better than the exit code (a node that died, a job
    #: Slurm cancelled or preempted); read with ``error`` (None: judged from the exit code and log).
    failure_class: str | None = None
    #: The devices the attempt held, as the backend knows them at its end (None: no GPUs, or
    #: those it reported at start, :attr:`ProcessInfo.gpus`).
    gpus: list[int] | None = None
    #: The cluster scheduler's id of the attempt's job (Slurm), for its provenance.
    job_id: str | None = None
    #: The scheduler's final state of that job (Slurm accounting), for its provenance.
    job_state: str | None = None
    #: What bringing the run's files home left out (Ray without a shared file system).
    transfer: TransferNote | None = None

    def transfer_json(self) -> dict[str, str]:
        """What ``provenance.json`` keeps under ``transfer``: the notes of the file transfer and
        the scheduler's job, as the run's record of how its files came home (empty: nothing)."""
        out = self.transfer.to_json() if self.transfer is not None else {}
        # Named for what they are, whichever scheduler ran the job (releases before wrote them as
        # `slurm_job_id` and `slurm_state`; AttemptProvenance reads both).
        if self.job_id is not None:
            out["job_id"] = self.job_id
        if self.job_state is not None:
            out["job_state"] = self.job_state
        if self.failure_class is not None:
            out["failure_class"] = self.failure_class
        return out


@dataclass(frozen=True)
class ProcessInfo:
    """What the ledger keeps to find (and kill) an attempt's processes after a crash."""

    pid: int | None
    pgid: int | None
    proc_start: float | None
    node: str | None = None
    #: The devices the backend placed the attempt on at start (None: none, or not known yet).
    gpus: tuple[int, ...] | None = None
    #: What the backend knows of the attempt's job at start, recorded in the transaction that records
    #: the attempt (a job it will submit only once that has committed: its name, to find it again by
    #: after a crash); None: nothing yet, its :meth:`Backend.placements` tell.
    placement: Placement | None = None


@dataclass(frozen=True)
class BackendOptions:
    """A backend's own options, as the command line gives them (``--ray-address``, ``--slurm
    KEY=VALUE``, ...): a backend declares a subclass whose fields are keyword arguments of its
    constructor, which :meth:`Backend.for_sweep` receives."""

    def keywords(self) -> dict[str, object]:
        """The options as the keyword arguments of :meth:`Backend.for_sweep`."""
        return {f.name: getattr(self, f.name) for f in fields(self)}


@dataclass(frozen=True)
class SweepContext:
    """What the sweep knows when it builds its backend (:meth:`Backend.for_sweep`)."""

    spec: Spec
    results_dir: Path
    #: Runs at once (``-j``), or the machine's cores over the spec's CPUs per run.
    jobs: int
    #: The runs this sweep will launch, in queue order.
    runs: list[Run]
    #: ``--gpus`` as given (None: not given).
    gpus: str | None = None
    #: Devices that runs of a sweep that died were holding: their memory may still be draining.
    recovered_gpus: tuple[int, ...] = ()
    #: The resource requests of ``runs``, each object once, where the sweep gathered them (a pass
    #: in plan order, cheaper than one in queue order at 100,000 runs); None: go through ``runs``.
    resources: tuple[Resources, ...] | None = None


class Backend(abc.ABC):
    """An executor of launches: :meth:`start` one, :meth:`wait` for outcomes.

    Subclass it: the abstract methods are required, the rest are optional parts with defaults.
    """

    name: str = ""
    #: Launches run as processes of this machine, in the results folder's own file system: the
    #: sweep then writes run directories ahead of launching, checks working directories before
    #: the first launch, and looks for stray processes of its attempts when it ends.
    runs_here: bool = False
    #: How many attempts can run at once (None: no fixed number; :meth:`fits` decides).
    slots: int | None = None
    #: Models of this machine's GPUs by index, for provenance and the report's Hardware line.
    gpu_models: Mapping[int, str] = MappingProxyType({})
    #: The devices runs may be placed on (empty: GPUs are not placed by this backend).
    gpu_devices: tuple[int, ...] | list[int] = ()
    #: The model of this backend's own section of a spec, the top-level key of its name (None: it
    #: has none); the spec's loader validates it with file and line (``Spec.backend_section``).
    section: ClassVar[type[BaseModel] | None] = None

    @classmethod
    def for_sweep(cls, context: SweepContext, **options: Any) -> Backend:
        """The backend for a sweep, built from what the sweep knows and the user's ``options``
        (``backend_options``: a :class:`BackendOptions`' fields, or a mapping of keywords).
        The default passes the options alone."""
        return cls(**options)

    # -- required -------------------------------------------------------------

    @abc.abstractmethod
    def fits(self, run: Run) -> bool:
        """Whether ``run`` can start now."""

    @abc.abstractmethod
    def start(self, launch: Launch) -> ProcessInfo:
        """Start ``launch``; returns at once. Raises ``OSError`` when it cannot start (recorded
        as a failed attempt of class ``launch-error``)."""

    @abc.abstractmethod
    def wait(self, timeout: float | None) -> list[Outcome]:
        """Block until at least one attempt ends, ``wake()`` is called, or ``timeout`` passes."""

    @abc.abstractmethod
    def wake(self) -> None:
        """Make a blocked ``wait`` return now (thread- and signal-safe)."""

    @abc.abstractmethod
    def running(self) -> int:
        """How many attempts are in flight."""

    @abc.abstractmethod
    def terminate_all(self, grace: float) -> list[Outcome]:
        """Stop every attempt in flight (TERM, ``grace`` seconds, KILL) and report them interrupted."""

    @abc.abstractmethod
    def close(self) -> None:
        """Release what the backend holds (threads, cluster connections)."""

    # -- optional -------------------------------------------------------------

    def why_never(self, run: Run) -> str | None:
        """Why ``run`` can never start here (the sweep fails it at once), or None if it may."""
        return None

    def settling(self) -> int:
        """How many ended attempts still hold something back (a device whose memory drains);
        the sweep stays open while this is not zero."""
        return 0

    def warnings(self) -> list[str]:
        """Warnings since the last call (a device taken out of the pool, ...)."""
        return []

    def gpu_sampler(self) -> GpuSampler | None:
        """A sampler of the utilisation of the devices runs hold (None: nothing to sample)."""
        return None

    def placements(self) -> list[Placement]:
        """What a cluster scheduler said of attempts since the last call (job id, state, its reason
        while queued, node and GPUs once running); the sweep records them in the ledger, where
        ``benchlab status`` reads them, and after a crash hands the held ones to :meth:`adopt`."""
        return []

    def adopt(self, launch: Launch, job_id: str) -> bool:
        """Follow job ``job_id``, submitted for ``launch`` by a sweep that died, as if this backend had
        started it; False when it cannot (the attempt is then recorded lost and the run launched again)."""
        return False

    def cancel(self, attempt_id: int) -> bool:
        """Stop one attempt at once, its whole process group (a search prunes a trial with it);
        its outcome still comes back through :meth:`wait`. False: this backend cannot, and the
        attempt runs on."""
        return False


#: The backends shipped with benchlab, by name, as entry points (``module:Class``) imported on
#: first use: ``--backend local`` never loads Ray.
BUILTIN_BACKENDS: Mapping[str, str] = MappingProxyType({
    "local": "benchlab.execute.local:LocalBackend",
    "ray": "benchlab.execute.ray:RayBackend",
    "slurm": "benchlab.execute.slurm:SlurmBackend",
    "debug": "benchlab.execute.debug:DebugBackend",
    "launcher": "benchlab.execute.launcher:LauncherBackend",
})
#: The entry-point group other packages declare their backends in.
ENTRY_POINT_GROUP = "benchlab.backends"
_REGISTRY: dict[str, type[Backend]] = {}


def register(name: str) -> Callable[[type[Backend]], type[Backend]]:
    """Class decorator: make a backend defined in-process available by name."""

    def deco(cls: type[Backend]) -> type[Backend]:
        _REGISTRY[name] = cls
        return cls

    return deco


def _load(target: str) -> type[Backend]:
    module, _, attr = target.partition(":")
    return getattr(importlib.import_module(module), attr)  # type: ignore[no-any-return]


def _entry_points() -> dict[str, str]:
    from importlib.metadata import entry_points

    return {ep.name: ep.value for ep in entry_points(group=ENTRY_POINT_GROUP)}


def known_backends() -> list[str]:
    """Every backend name :func:`get_backend` can find."""
    return sorted({*_REGISTRY, *BUILTIN_BACKENDS, *_entry_points()})


def get_backend(name: str) -> type[Backend]:
    """The backend class known as ``name``: registered in-process, shipped with benchlab, or
    declared by an installed package's entry point (imported on first use)."""
    if name not in _REGISTRY:
        target = BUILTIN_BACKENDS.get(name) or _entry_points().get(name)
        if target is not None:
            _REGISTRY[name] = _load(target)
    try:
        return _REGISTRY[name]
    except KeyError:
        raise BackendUnavailable(name, f"unknown backend; choose one of: {', '.join(known_backends())}") from None
