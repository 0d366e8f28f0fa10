"""The typed records the ledger hands out and takes in, and the names of its states.

Everything here is plain data: a module that only reads or passes a record (the report, the
status model, a backend) imports it without opening or knowing the database.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import TYPE_CHECKING, Any, NamedTuple

if TYPE_CHECKING:
    import numpy as np


class Status(StrEnum):
    """The state of a run (``runs.status``) or of an attempt (``attempts.status``; never pending).

    A ``str``: the ledger stores the value, and a status read back compares equal to its member.
    """

    PENDING = "pending"
    #: Seen by a new sweep, it means the benchlab that ran it died.
    RUNNING = "running"
    COMPLETED = "completed"
    FAILED = "failed"
    INTERRUPTED = "interrupted"
    #: A search trial's run stopped early because its curve could not catch up (`benchlab
    #: search`): not a failure, never retried.
    PRUNED = "pruned"


PENDING, RUNNING, COMPLETED, FAILED, INTERRUPTED, PRUNED = (
    Status.PENDING, Status.RUNNING, Status.COMPLETED, Status.FAILED, Status.INTERRUPTED, Status.PRUNED)
TO_RUN_STATES = (PENDING, RUNNING, INTERRUPTED)

#: Meta keys of the plan: the digest of the run ids recorded in ``spec_runs`` (all of them registered
#: and the runs they replace superseded), and the plan a sweep is recording (removed once it is whole).
PLAN_DIGEST, PLAN_RECORDING = "plan_digest", "plan_recording"
#: Meta keys of the records other modules keep in the ledger, each read and written through its
#: own :class:`Store` method (``versions()``, ``hardware()``, ...), never by its string.
VERSIONS_KEY, HARDWARE_KEY, SEQUENTIAL_KEY = "versions", "hardware", "sequential"
FLAGGED_KEY, SEARCH_KEY, REGISTRATION_KEY = "flagged", "search", "preregistration"


@dataclass(frozen=True)
class CodeState:
    """The code under test at a launch: its git commit, whether the work tree had uncommitted
    changes, and a hash of that diff (None where the work dir is not in a git repository)."""

    commit: str | None
    dirty: bool | None = None
    diff_sha256: str | None = None
    tree_sha256: str | None = None  # the tracked files' contents at the commit (spec file left out)

    @property
    def known(self) -> bool:
        return self.commit is not None

    def same_code(self, other: CodeState) -> bool:
        """Whether two states hold the same code: the same contents and uncommitted diff (a new
        commit of the same files is the same code); the same commit and diff where a content
        hash is missing."""
        if self.tree_sha256 and other.tree_sha256:
            return (self.tree_sha256, self.diff_sha256) == (other.tree_sha256, other.diff_sha256)
        return (self.commit, self.diff_sha256) == (other.commit, other.diff_sha256)

    def describe(self) -> str:
        if self.commit is None:
            return "no git repository"
        text = f"commit {self.commit[:10]}"
        if self.dirty:
            text += " with uncommitted changes" + (f" (diff {self.diff_sha256[:8]})" if self.diff_sha256 else "")
        return text


@dataclass(frozen=True)
class GpuUse:
    """What a run did with its GPUs over one attempt: mean and max utilisation (percent) of
    its devices while it ran, and the peak memory (MiB) its own processes held."""

    util_mean: float | None
    util_max: float | None
    mem_peak_mib: int | None

    @property
    def likely_cpu_bound(self) -> bool:
        """Under half the device's time busy on average: the data pipeline or the CPU side is
        what limits it, not the GPU."""
        return self.util_mean is not None and self.util_mean < CPU_BOUND_BELOW_PCT

    @property
    def note(self) -> str:
        """What to tell the user about it: the CPU-bound flag, or nothing."""
        return "likely CPU-bound" if self.likely_cpu_bound else ""

    def to_json(self) -> dict[str, Any]:
        return {"util_mean": self.util_mean, "util_max": self.util_max, "mem_peak_mib": self.mem_peak_mib,
                "likely_cpu_bound": self.likely_cpu_bound}


#: A run whose devices were busy less than this share of the time on average is flagged.
CPU_BOUND_BELOW_PCT = 50.0


@dataclass(frozen=True)
class AttemptRecord:
    """One launch of a run, as the ledger holds it."""

    attempt_id: int
    run_id: str
    number: int
    status: str
    exit_code: int | None
    signal: int | None
    started: float
    ended: float | None
    host: str | None
    node: str | None
    pid: int | None
    pgid: int | None
    proc_start: float | None
    gpus: str | None
    failure_class: str | None
    error: str | None
    log_tail: str | None
    gpu_util_mean: float | None = None
    gpu_util_max: float | None = None
    gpu_mem_peak_mib: int | None = None

    @property
    def duration(self) -> float | None:
        return None if self.ended is None else self.ended - self.started

    @property
    def gpu_use(self) -> GpuUse | None:
        """The attempt's GPU use, None when it was not sampled (no GPU, or an older ledger)."""
        if self.gpu_util_mean is None and self.gpu_mem_peak_mib is None:
            return None
        return GpuUse(self.gpu_util_mean, self.gpu_util_max, self.gpu_mem_peak_mib)


@dataclass(frozen=True)
class Placement:
    """Where a cluster scheduler holds an attempt: its job id (``123`` or array task ``123_4``),
    the job's state (``PENDING``, ``RUNNING``) with the scheduler's reason while it waits
    (``Priority``, ``Resources``), and once it runs, its node and GPUs."""

    attempt_id: int
    job_id: str
    state: str | None = None
    reason: str | None = None
    node: str | None = None
    gpus: list[int] | None = None
    started: float | None = None  # when the job started on its node (the attempt's start from then on)


@dataclass(frozen=True)
class RunRecord:
    run_id: str
    name: str
    task: str
    config: str
    seed: int
    params: dict[str, Any]
    command: str
    status: str
    current: bool
    in_spec: bool = True  # in the plan of the spec as last run (see the module's docstring)



class RunState(NamedTuple):
    """A run's coordinates and state, without its params or command (cheap at 10,000 runs)."""

    run_id: str
    name: str
    task: str
    config: str
    seed: int
    status: str


class OpenRun(NamedTuple):
    """A run still to finish (pending, running, interrupted) and when its latest attempt started."""

    task: str
    config: str
    status: str
    started: float | None


class CurveName(NamedTuple):
    """A (task, metric) some run in the spec logged a step series of."""

    task: str
    metric: str


class AttemptTimes(NamedTuple):
    run_id: str
    started: float
    ended: float | None


class SeedSeries(NamedTuple):
    """One completed run's step series of a metric: steps and values (float64)."""

    config: str
    seed: int
    steps: np.ndarray
    values: np.ndarray


class RunSeries(NamedTuple):
    """One metric's step series of a run."""

    metric: str
    steps: np.ndarray
    values: np.ndarray


class SeedRun(NamedTuple):
    task: str
    config: str
    seed: int
    run_id: str


class PartialAttempt(NamedTuple):
    """A completed run whose completing attempt notes that it evaluated only part of its task."""

    name: str
    note: str
    task: str
    config: str
    seed: int


#: How a completed attempt's error notes a partial evaluation (lm-eval cut short by ``--limit``).
PARTIAL_NOTE_PREFIX = "partial evaluation"
