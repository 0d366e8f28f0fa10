"""The typed records the ledger hands out and takes in, and the names of its states.

Everything here is plain data: a module that only reads or passes a record (the report, the
status model, a backend) imports it without opening or knowing the database.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import TYPE_CHECKING, Any, NamedTuple

from benchlab.json_types import JsonObject

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


# ---------------------------------------------------------------- the pre-registered analysis plan
# The layout of its meta row (and of preregistration.json beside the ledger): the JSON keys are the
# ledger's file format, so a registration written by any earlier benchlab reads into these records.


def _names(value: object, what: str) -> tuple[str, ...]:
    if not isinstance(value, list | tuple) or not all(isinstance(x, str) for x in value):
        raise ValueError(f"pre-registration: {what} should be a list of names, got {value!r}")
    return tuple(value)


def _required(data: Mapping[str, Any], key: str, what: str) -> Any:
    if key not in data:
        raise ValueError(f"pre-registration: {what} has no {key!r} (keys: {', '.join(sorted(data)) or 'none'})")
    return data[key]


@dataclass(frozen=True)
class AnalysisPlan:
    """The spec's ``analysis:`` section with its defaults filled in: what the report judges with.

    ``comparisons`` are ``(baseline, candidate)`` pairs; a candidate ``"*"`` stands for every
    config but the baseline."""

    metric: str
    summary: str = "final"  # final, auc, max or slope of the learning curve
    alpha: float = 0.05
    test: str = "t"  # a key of benchlab.preregistration.TESTS
    comparisons: tuple[tuple[str, str], ...] = ()
    min_effect: float | None = None  # the smallest difference that matters, in the metric's units

    def to_json(self) -> JsonObject:
        """The plan's JSON, keys in the order the ledger has always stored them (its hash is
        taken over this, with sorted keys)."""
        return {"metric": self.metric, "summary": self.summary, "alpha": self.alpha, "test": self.test,
                "comparisons": [[b, c] for b, c in self.comparisons], "min_effect": self.min_effect}

    @classmethod
    def from_json(cls, data: JsonObject) -> AnalysisPlan:
        """The plan of :meth:`to_json`'s JSON; ``ValueError`` names a missing or malformed field."""
        if not isinstance(data, Mapping):
            raise ValueError(f"pre-registration: the plan should be an object, got {data!r}")
        pairs = []
        for pair in data.get("comparisons", []):
            names = _names(pair, "a comparison")
            if len(names) != 2:
                raise ValueError(f"pre-registration: a comparison should be [baseline, candidate], got {pair!r}")
            pairs.append((names[0], names[1]))
        return cls(metric=_required(data, "metric", "the plan"), summary=data.get("summary", "final"),
                   alpha=data.get("alpha", 0.05), test=data.get("test", "t"), comparisons=tuple(pairs),
                   min_effect=data.get("min_effect"))


@dataclass(frozen=True)
class Registration:
    """A registered plan: its SHA-256, when the first sweep saw it, and the configs and tasks the
    spec had then (the registered family of comparisons is fixed over them)."""

    hash: str
    registered_at: str  # ISO 8601 in UTC, to the second, as written at registration
    plan: AnalysisPlan
    configs: tuple[str, ...]
    #: None for a registration made before the tasks were recorded: every task is registered.
    tasks: tuple[str, ...] | None = None
    #: The runs already completed when the plan was registered (more than 0: no pre-registration).
    completed_before: int = 0

    def to_json(self) -> JsonObject:
        """The registration's JSON, keys in the order the ledger has always stored them."""
        out: JsonObject = {"hash": self.hash, "registered_at": self.registered_at, "plan": self.plan.to_json(),
                           "configs": list(self.configs)}
        if self.tasks is not None:
            out["tasks"] = list(self.tasks)
        out["completed_before"] = self.completed_before
        return out

    @classmethod
    def from_json(cls, data: JsonObject) -> Registration:
        """The registration of :meth:`to_json`'s JSON (an earlier one without ``tasks`` too);
        ``ValueError`` names a missing or malformed field."""
        if not isinstance(data, Mapping):
            raise ValueError(f"pre-registration: expected an object, got {data!r}")
        tasks = data.get("tasks")
        return cls(hash=_required(data, "hash", "the registration"),
                   registered_at=_required(data, "registered_at", "the registration"),
                   plan=AnalysisPlan.from_json(_required(data, "plan", "the registration")),
                   configs=_names(data.get("configs") or [], "configs"),
                   tasks=None if tasks is None else _names(tasks, "tasks"),
                   completed_before=int(data.get("completed_before", 0)))

