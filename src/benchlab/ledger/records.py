"""The typed records the ledger hands out and takes in, and the names of its states.

Everything here is plain data: a module that only reads or passes a record (the report, the
status model, a backend) imports it without opening or knowing the database.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import TYPE_CHECKING, Any, NamedTuple

from benchlab.json_types import ConfigValues, JsonObject
from benchlab.secrets import Fingerprint

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

    def to_json(self) -> JsonObject:
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
    params: ConfigValues
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
    test: str = "t"  # a key of benchlab.history.preregistration.TESTS
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


# ---------------------------------------------------------------------------- records kept in meta
#
# Each record below is kept as one JSON value under its meta key; ``to_json`` writes the layout
# earlier releases wrote (the same keys, in the same order), and ``from_json`` reads a value an
# older release wrote, a key it did not know yet taken as its default.


@dataclass(frozen=True)
class DatasetSum:
    """A dataset's checksum: SHA-256 of a file's bytes, or of a folder's sorted (path, SHA-256) list."""

    name: str
    path: str
    sha256: str
    bytes: int
    files: int

    def to_json(self) -> JsonObject:
        return {"name": self.name, "path": self.path, "sha256": self.sha256, "bytes": self.bytes,
                "files": self.files}

    @classmethod
    def from_json(cls, data: JsonObject) -> DatasetSum:
        return cls(str(data["name"]), str(data.get("path", "")), str(data["sha256"]), int(data.get("bytes", 0)),
                   int(data.get("files", 1)))


@dataclass(frozen=True)
class VersionRecord:
    """A benchmark version as the ledger lists it (``Store.versions()``): what
    ``versions/<id>/version.json`` holds (see :mod:`benchlab.execute.version`), and what changed
    since the version before it that ``--allow-changed`` let through."""

    id: str
    recorded_at: str = ""
    commit: str | None = None
    dirty: bool | None = None
    diff_sha256: str | None = None
    tree_sha256: str | None = None
    interpreter: str = ""
    packages_of: str = ""
    env: dict[str, str | None] = field(default_factory=dict)
    datasets: tuple[DatasetSum, ...] = ()
    spec_sha256: str = ""
    secret_fingerprints: tuple[Fingerprint, ...] = ()
    packages_count: int = 0
    changes: tuple[str, ...] = ()

    def to_json(self) -> JsonObject:
        return {"id": self.id, "recorded_at": self.recorded_at, "commit": self.commit, "dirty": self.dirty,
                "diff_sha256": self.diff_sha256, "tree_sha256": self.tree_sha256, "interpreter": self.interpreter,
                "packages_of": self.packages_of, "env": dict(self.env),
                "datasets": [d.to_json() for d in self.datasets], "spec_sha256": self.spec_sha256,
                "secret_fingerprints": [f.to_json() for f in self.secret_fingerprints],
                "packages_count": self.packages_count, "changes": list(self.changes)}

    @classmethod
    def from_json(cls, data: JsonObject) -> VersionRecord:
        return cls(
            id=str(data["id"]), recorded_at=str(data.get("recorded_at") or ""), commit=data.get("commit"),
            dirty=data.get("dirty"), diff_sha256=data.get("diff_sha256"), tree_sha256=data.get("tree_sha256"),
            interpreter=str(data.get("interpreter") or ""), packages_of=str(data.get("packages_of") or ""),
            env=dict(data.get("env") or {}),
            datasets=tuple(DatasetSum.from_json(d) for d in data.get("datasets") or []),
            spec_sha256=str(data.get("spec_sha256") or ""),
            secret_fingerprints=tuple(Fingerprint.from_json(f) for f in data.get("secret_fingerprints") or []),
            packages_count=int(data.get("packages_count") or 0), changes=tuple(data.get("changes") or ()))


@dataclass(frozen=True)
class HostRecord:
    """What a sweep noted of a host it ran on (``Store.hardware()``): its CPU model, core count and
    GPU models by device index (a string, as ``CUDA_VISIBLE_DEVICES`` names them)."""

    cpu: str | None = None
    cores: int | None = None
    gpus: dict[str, str] = field(default_factory=dict)

    def to_json(self) -> JsonObject:
        return {"cpu": self.cpu, "cores": self.cores, "gpus": dict(self.gpus)}

    @classmethod
    def from_json(cls, data: JsonObject) -> HostRecord:
        return cls(data.get("cpu"), data.get("cores"), {str(k): str(v) for k, v in (data.get("gpus") or {}).items()})


@dataclass(frozen=True)
class SequentialDesignRecord:
    """The group-sequential design of ``run --until-decided`` as recorded: familywise ``alpha``
    shared by ``pairs`` comparisons (each spending ``pair_alpha``), the spending function, the
    equivalence margin, the planned looks (paired seeds) and each look's z boundary (None: infinite)."""

    alpha: float | None = None
    pairs: int | None = None
    pair_alpha: float | None = None
    correction: str | None = None
    spending: str | None = None
    margin: float | None = None
    looks: tuple[int, ...] = ()
    bounds: tuple[float | None, ...] = ()
    #: "betting" (a bounded metric), "normal-theory" or "mixed"; None in a ledger written before.
    method: str | None = None
    #: What the error guarantee rests on, in words.
    guarantee: str | None = None

    def to_json(self) -> JsonObject:
        out: JsonObject = {"alpha": self.alpha, "pairs": self.pairs, "pair_alpha": self.pair_alpha,
                           "correction": self.correction, "spending": self.spending, "margin": self.margin,
                           "looks": list(self.looks), "bounds": list(self.bounds)}
        # A record written before the method was recorded is written back as it was.
        if self.method is not None:
            out.update(method=self.method, guarantee=self.guarantee)
        return out

    @classmethod
    def from_json(cls, data: JsonObject) -> SequentialDesignRecord:
        return cls(data.get("alpha"), data.get("pairs"), data.get("pair_alpha"), data.get("correction"),
                   data.get("spending"), data.get("margin"), tuple(data.get("looks") or ()),
                   tuple(data.get("bounds") or ()), data.get("method"), data.get("guarantee"))


@dataclass(frozen=True)
class SequentialPairRecord:
    """One (task, candidate) comparison with the baseline as of the last look: its paired seeds,
    its status and why, the mean paired difference with its repeated confidence interval, and the
    seeds of that look without a value on either side."""

    task: str
    config: str
    seeds: int
    status: str
    reason: str
    mean_diff: float | None = None
    rci: tuple[float | None, float | None] = (None, None)
    failed: int = 0

    def to_json(self) -> JsonObject:
        return {"task": self.task, "config": self.config, "seeds": self.seeds, "status": self.status,
                "reason": self.reason, "mean_diff": self.mean_diff, "rci": list(self.rci), "failed": self.failed}

    @classmethod
    def from_json(cls, data: JsonObject) -> SequentialPairRecord:
        low, high = (list(data.get("rci") or []) + [None, None])[:2]
        return cls(str(data["task"]), str(data["config"]), int(data.get("seeds") or 0), str(data.get("status", "")),
                   str(data.get("reason", "")), data.get("mean_diff"), (low, high), int(data.get("failed") or 0))


@dataclass(frozen=True)
class SequentialRecord:
    """What ``run --until-decided`` left in the ledger (``Store.sequential()``): its design, the
    baseline and each pair's state at the last look."""

    design: SequentialDesignRecord
    baseline: str | None
    pairs: tuple[SequentialPairRecord, ...] = ()

    def to_json(self) -> JsonObject:
        return {"design": self.design.to_json(), "baseline": self.baseline,
                "pairs": [p.to_json() for p in self.pairs]}

    @classmethod
    def from_json(cls, data: JsonObject) -> SequentialRecord:
        return cls(SequentialDesignRecord.from_json(data.get("design") or {}), data.get("baseline"),
                   tuple(SequentialPairRecord.from_json(p) for p in data.get("pairs") or []))


@dataclass(frozen=True)
class FlaggedPair:
    """A (task, config) whose every run failed (a broken config, not bad luck on one seed): how
    many runs failed, and how many of them ended in each failure class (their last attempt's)."""

    task: str
    config: str
    failures: int
    classes: dict[str, int] = field(default_factory=dict)

    @property
    def name(self) -> str:
        return f"{self.task}/{self.config}"

    def to_json(self) -> JsonObject:
        return {"task": self.task, "config": self.config, "failures": self.failures, "classes": dict(self.classes)}

    @classmethod
    def from_json(cls, data: JsonObject) -> FlaggedPair:
        return cls(str(data["task"]), str(data["config"]), int(data["failures"]),
                   {str(k): int(v) for k, v in (data.get("classes") or {}).items()})


@dataclass(frozen=True)
class SearchRecord:
    """What ``benchlab search`` kept of its study in the study's ledger (``Store.search_record()``)."""

    study: str
    spec_name: str | None = None
    metric: str | None = None
    goal: str | None = None
    summary: str | None = None
    budget: int | None = None
    sampler: str | None = None
    pruner: str | None = None
    base_config: str | None = None
    allow_primary_reason: str | None = None
    pruning_blind: str | None = None  # why pruning cannot see the metric's curve, where it cannot
    spec_path: str | None = None

    def to_json(self) -> JsonObject:
        return {"study": self.study, "spec_name": self.spec_name, "metric": self.metric, "goal": self.goal,
                "summary": self.summary, "budget": self.budget, "sampler": self.sampler, "pruner": self.pruner,
                "base_config": self.base_config, "allow_primary_reason": self.allow_primary_reason,
                "pruning_blind": self.pruning_blind, "spec_path": self.spec_path}

    @classmethod
    def from_json(cls, data: JsonObject) -> SearchRecord:
        known = {f: data[f] for f in cls.__dataclass_fields__ if f in data}
        return cls(**{**known, "study": str(data.get("study", ""))})


@dataclass(frozen=True)
class PlanProgress:
    """A plan a sweep is recording, or began recording and stopped part-way
    (``Store.plan_recording()``): how many runs it names, how many are recorded so far (None when
    that could not be read) and when it started (seconds since the epoch)."""

    runs: int
    recorded: int | None
    started: float | None = None

    def to_json(self) -> JsonObject:
        return {"runs": self.runs, "started": self.started, "recorded": self.recorded}
