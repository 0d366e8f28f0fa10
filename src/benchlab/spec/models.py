"""The spec's typed models: what a validated ``benchlab.yaml`` holds, field by field.

``Spec`` and the models it is made of (``Task``, ``Config``, ``Metrics`` and ``Metric`` with
their ``MetricSource``, ``Resources``, ``Slurm``, ...), with the checks pydantic runs on each
field. Reading a file into them (variables, overrides, the checks across fields, messages with
file and line) is :mod:`benchlab.spec.load`'s.
"""

from __future__ import annotations

import itertools
import re
from pathlib import Path
from typing import Annotated, Any, ClassVar, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    GetJsonSchemaHandler,
    PrivateAttr,
    SerializationInfo,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_serializer,
    model_validator,
)

from benchlab.json_types import ConfigValues, JsonObject
from benchlab.names.failures import (
    LAUNCH,
    MISSING_METRIC,
    NODE_DIED,
    NON_FINITE_METRIC,
    OOM,
    PREEMPTED,
    TIMEOUT,
    USAGE,
    RetryClass,
)
from benchlab.spec.checks import GRID_VALUE_BAD, NAME_RE, check_seeds, grid_coordinate, grid_names
from benchlab.spec.search import Search

_DURATION_RE = re.compile(r"(\d+(?:\.\d*)?|\.\d+)\s*(ms|s|m|h|d)?", re.I)
_UNIT_S = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0, None: 1.0}


def parse_duration(value: str | int | float) -> float:
    """Seconds in a duration such as ``30s``, ``6h``, ``1h30m``, ``2.5m`` or a bare number of seconds."""
    if isinstance(value, bool):
        raise ValueError(f"expected a duration like '30s' or '6h', got {value!r}")
    if isinstance(value, int | float):
        if value <= 0:
            raise ValueError(f"expected a positive duration, got {value!r}")
        return float(value)
    text = str(value).strip().replace(" ", "")
    pos, total = 0, 0.0
    for m in _DURATION_RE.finditer(text):
        if m.start() != pos:
            break
        total += float(m.group(1)) * _UNIT_S[m.group(2).lower() if m.group(2) else None]
        pos = m.end()
    if not text or pos != len(text) or total <= 0:
        raise ValueError(f"expected a duration like '30s', '90m', '6h' or '1h30m', got {value!r}")
    return total


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)


class Reference(_Model):
    """Per-task reference scores for normalisation: (score - low) / (high - low)."""

    low: float
    high: float


class Task(_Model):
    """One task of the suite (an environment, a dataset, an eval task)."""

    name: str
    params: ConfigValues = Field(default_factory=dict)
    # This task's runs use it unless their config has its own (config over task over spec).
    command: str | None = None
    target: float | None = None
    reference: Reference | None = None
    description: str | None = None
    #: The values a metric can take on this task, where they differ from the metric's own ``range``
    #: (an RL return bounded by each environment's episode length): every interval of the task is
    #: cut there, the aggregates' included.
    range: dict[str, tuple[float, float]] | None = None

    @field_validator("range")
    @classmethod
    def _ranges_order(cls, v: dict[str, tuple[float, float]] | None) -> dict[str, tuple[float, float]] | None:
        for metric, (low, high) in (v or {}).items():
            if not low < high:
                raise ValueError(f"{metric}: expected [low, high] with low < high, got [{low:g}, {high:g}]")
        return v


class Resources(_Model):
    """What one run needs: CPU cores, GPUs (a fraction shares a device), GPU memory in GiB."""

    cpus: float = Field(default=1.0, ge=0)
    gpus: float = Field(default=0.0, ge=0)
    gpu_memory: float | None = Field(default=None, gt=0)
    memory: float | None = Field(default=None, gt=0, description="host memory in GiB (Ray and Slurm backends)")
    custom: dict[str, float] = Field(default_factory=dict)

    @field_validator("gpus")
    @classmethod
    def _gpus_shape(cls, v: float) -> float:
        if v > 1 and v != int(v):
            raise ValueError(f"expected a fraction up to 1 or a whole number of GPUs, got {v}")
        return v


class Origin(_Model):
    """Where a promoted config's params come from: a trial of a search (`benchlab search --promote`)."""

    spec: str = Field(description="the spec file the search ran from, relative to this one")
    study: str
    trial: int
    metric: str
    value: float
    goal: Literal["max", "min"] = "max"
    summary: str = "final"
    seeds: list[int] = Field(default_factory=list, description="the search seeds the value was measured on")


class Slurm(_Model):
    """Where and how the ``slurm`` backend submits runs (every field may also come from ``--slurm``)."""

    partition: str | None = None
    account: str | None = None
    qos: str | None = None
    constraint: str | None = None
    sbatch: dict[str, str | int | float | bool] = Field(
        default_factory=dict, description="other sbatch options, without the dashes: {exclude: node3, nice: 10}")
    setup: list[str] = Field(default_factory=list,
                             description="shell lines run before each job (module load, conda activate)")
    array_size: int = Field(default=1000, ge=1, description="most runs submitted and not finished at once, "
                                                            "in job arrays of at most this size")


class Config(_Model):
    """One configuration under test (an algorithm, hyperparameters, a checkpoint).

    A config with a ``grid`` stands for one config per combination of its values, named by
    its coordinates (``mlp[lr=0.001,batch=32]``); ``Spec.configs`` holds the expanded ones.
    """

    name: str
    params: ConfigValues = Field(default_factory=dict)
    grid: dict[str, list[Any]] = Field(
        default_factory=dict,
        description="param name -> the values to try; one config per combination, named name[k=v,...]")
    command: str | None = None
    description: str | None = None
    # Overrides the spec-level resources for this config's runs (e.g. one config needs a whole GPU).
    resources: Resources | None = None
    #: Set on a config promoted from a search: the study, trial and metric its params come from.
    origin: Origin | None = None

    @field_validator("grid")
    @classmethod
    def _grid_values(cls, grid: dict[str, list[Any]], info: ValidationInfo) -> dict[str, list[Any]]:
        both = sorted(set(grid) & set(info.data.get("params") or {}))
        if both:
            raise ValueError(f"{', '.join(map(repr, both))} set both in params and in grid; keep one")
        for key, values in grid.items():
            if not NAME_RE.match(str(key)):
                raise ValueError(f"grid param {key!r}: expected letters, digits and . _ + - only")
            if not values:
                raise ValueError(f"grid param {key!r} lists no values")
            seen: set[str] = set()
            for value in values:
                if isinstance(value, dict | list):
                    raise ValueError(f"grid param {key!r}: expected single values (numbers, strings, true/false, "
                                     f"null), got {value!r}; write such a config out in full")
                coordinate = grid_coordinate(value)
                if isinstance(value, str) and (not value or GRID_VALUE_BAD.search(value)):
                    raise ValueError(f"grid param {key!r}: {value!r} cannot name a config (no spaces, '/', "
                                     "',', '=', '[' or ']'); write such a config out in full")
                if coordinate in seen:
                    raise ValueError(f"grid param {key!r} lists {coordinate} twice")
                seen.add(coordinate)
        return grid

    def expand_grid(self) -> list[Config]:
        """One config per combination of the grid's values, the last param varying fastest;
        this config itself when it has no grid."""
        if not self.grid:
            return [self]
        keys = list(self.grid)
        combos = itertools.product(*(self.grid[k] for k in keys))
        return [self.model_copy(update={"name": name, "grid": {},
                                        "params": {**self.params, **dict(zip(keys, combo, strict=True))}})
                for name, combo in zip(grid_names(self.name, self.grid), combos, strict=True)]


class SourceOptions(_Model):
    """The options of a metric's source, as its extractor declares them: a subclass per extractor
    (:mod:`benchlab.collect.extractors`), with a field named as the extractor (or aliased to its
    name, as ``json``) holding what the spec writes after it, and the extractor's own options.
    Every text field gets ``{task}`` and ``{config}`` filled in per run, but those named in
    ``literal`` (a regex's pattern)."""

    #: Keep every match or row as a step series; the final value is always the last one.
    series: bool = False
    #: Fields used as written, never filled in per run.
    literal: ClassVar[tuple[str, ...]] = ()
    #: What the source reads, in words ("a CSV file"), for messages.
    described: ClassVar[str] = ""


class MetricSource(_Model):
    """Where a metric is read from, when the run does not write benchlab's own files:
    ``from: {<kind>: <what>, <option>: ...}``, where exactly one key names an extractor of the
    registry (:func:`benchlab.collect.extractors.known_extractors`: ``regex``, ``json``,
    ``jsonl``, ``csv``, ``lm_eval``, ``tensorboard``, or one registered since), whose own model
    (``options``, a :class:`SourceOptions`) validates the whole mapping. Each extractor's module
    documents its options; docs/extractors.md shows them all. Dumped, it is the mapping as written.
    """

    kind: str
    options: SourceOptions

    @model_validator(mode="before")
    @classmethod
    def _named_extractor(cls, data: Any) -> Any:
        if not isinstance(data, dict) or isinstance(data.get("options"), SourceOptions):
            return data  # not a mapping (pydantic says so), or built already
        # The registry is the one list of extractors; imported here because collect reads the spec.
        from benchlab.collect.extractors import get_extractor, known_extractors

        names = known_extractors()
        kinds = [k for k in names if k in data]
        if len(kinds) == 1:
            return {"kind": kinds[0], "options": get_extractor(kinds[0]).options.model_validate(data)}
        unknown = [k for k in data if k not in cls.yaml_fields()]
        if unknown and not kinds:  # a misspelt kind (regx:) is an unknown field, as any other
            raise ValidationError.from_exception_data(cls.__name__, [
                {"type": "extra_forbidden", "loc": (k,), "input": data[k]} for k in unknown])
        raise ValueError(f"expected exactly one of {', '.join(map(repr, names))}"
                         + (f", got {', '.join(kinds)}" if kinds else ""))

    @classmethod
    def yaml_fields(cls) -> list[str]:
        """The keys a ``from:`` mapping may hold: each extractor's name, then their options."""
        from benchlab.collect.extractors import get_extractor, known_extractors

        names = known_extractors()
        options: dict[str, None] = {}
        for name in names:
            model = get_extractor(name).options
            options.update((f.alias or n, None) for n, f in model.model_fields.items())
        rest = [k for k in options if k not in names and k != "series"]
        return [*names, *rest, "series"]

    @property
    def described(self) -> str:
        """What the source reads, in words ("a CSV file"; the extractor's name if it says nothing)."""
        return self.options.described or self.kind

    def for_run(self, context: dict[str, str]) -> MetricSource:
        """This source with ``{task}`` and ``{config}`` filled in, in every text option but those
        the extractor keeps as written (a regex's pattern)."""
        updates = {}
        for name in type(self.options).model_fields:
            value = getattr(self.options, name)
            if name not in self.options.literal and isinstance(value, str) and "{" in value:
                for key, fill in context.items():
                    value = value.replace("{" + key + "}", fill)
                updates[name] = value
        return self.model_copy(update={"options": self.options.model_copy(update=updates)}) if updates else self

    @model_serializer(mode="plain")
    def _as_written(self, info: SerializationInfo) -> JsonObject:
        dump = self.options.model_dump(mode=info.mode, by_alias=bool(info.by_alias),
                                       exclude_none=info.exclude_none, exclude_defaults=info.exclude_defaults)
        # The extractor's key first and `series` last, as the mapping has always been written.
        first = [k for k in dump if k == self.kind]
        last = [k for k in dump if k == "series"]
        return {k: dump[k] for k in [*first, *(k for k in dump if k not in (*first, *last)), *last]}

    @classmethod
    def __get_pydantic_json_schema__(cls, core_schema: Any, handler: GetJsonSchemaHandler) -> JsonObject:
        from benchlab.collect.extractors import get_extractor, known_extractors

        return {"description": "where the metric is read from: exactly one extractor's key and its options",
                "anyOf": [handler(get_extractor(n).options.__pydantic_core_schema__)
                          for n in known_extractors()]}


class Metric(_Model):
    """A metric: its name, direction, and optionally where it is read from."""

    name: str
    goal: Literal["max", "min"] = "max"
    source: MetricSource | None = Field(default=None, alias="from")
    # The values the metric can take (an accuracy: [0, 1]); intervals and plots stay inside it.
    range: tuple[float, float] | None = None
    # Without a range, a significant t verdict is withheld unless normality is assumed here
    # (benchlab.stats.verdict): the assumption is then named beside each verdict.
    assume: Literal["normal"] | None = None

    @field_validator("name")
    @classmethod
    def _no_placeholder(cls, v: str) -> str:
        # A metric is one column of every run's table: a per-run name would be a different
        # metric per task. Placeholders belong in the source, which is filled per run.
        found = re.search(r"\{[A-Za-z_][A-Za-z0-9_]*\}", v)
        if found:
            raise ValueError(
                f"a metric's name cannot hold a placeholder ({found.group(0)}): name it once (e.g. score) "
                f"and put the placeholder in its source, e.g. from: {{lm_eval: ., task: \"{{task}}\", "
                f"key: \"{found.group(0)}\"}}"
            )
        return v

    @field_validator("range")
    @classmethod
    def _range_order(cls, v: tuple[float, float] | None) -> tuple[float, float] | None:
        if v is not None and not v[0] < v[1]:
            raise ValueError(f"expected [low, high] with low < high, got [{v[0]:g}, {v[1]:g}]")
        return v


def _metric_from_name(value: Any) -> Any:
    return {"name": value} if isinstance(value, str) else value


class Metrics(_Model):
    """The primary metric (ranks configs) and the secondary ones (reported)."""

    primary: Metric
    secondary: list[Metric] = Field(default_factory=list)

    @field_validator("primary", mode="before")
    @classmethod
    def _primary_name(cls, v: Any) -> Any:
        return _metric_from_name(v)

    @field_validator("secondary", mode="before")
    @classmethod
    def _secondary_names(cls, v: Any) -> Any:
        return [_metric_from_name(x) for x in v] if isinstance(v, list) else v

    @property
    def all(self) -> list[Metric]:
        return [self.primary, *self.secondary]


#: Retry budgets that apply unless ``retry_on`` says otherwise: a timeout would most likely time
#: out again, a command that cannot start will not start the second time (nor one that rejected
#: its arguments: argparse's usage error), a run that finished without its metric would train
#: again only to miss it again (`benchlab collect --failed` reads it after the spec is fixed),
#: and an out-of-memory run gets one more try, alone on its device; a run whose cluster node
#: died was not at fault and gets two more, on other nodes.
#: A preempted Slurm job was not at fault either: its own budget of 20 leaves `retries` untouched.
#: A run whose metric came out NaN (diverged) would most likely diverge again with the same seed.
DEFAULT_RETRY_ON: dict[str, int] = {TIMEOUT: 0, LAUNCH: 0, USAGE: 0, MISSING_METRIC: 0, NON_FINITE_METRIC: 0,
                                    OOM: 1, NODE_DIED: 2, PREEMPTED: 20}


class Dataset(_Model):
    """A dataset the benchmark reads: a file or a folder, checksummed once per benchmark version."""

    name: str
    path: str = Field(description="a file or a folder; relative paths are taken from the spec's folder")


class PlannedComparison(_Model):
    """A comparison of interest named by the analysis plan: ``candidate`` against ``baseline``."""

    baseline: str
    candidate: str


class Analysis(_Model):
    """The analysis plan, decided before the results are seen and hashed into the ledger at the
    first run: the report says whether the analysis it shows is the one registered."""

    metric: str | None = Field(default=None, description="the primary metric (default: metrics.primary)")
    summary: Literal["final", "auc", "max", "slope"] = "final"
    alpha: float = Field(default=0.05, gt=0, lt=1)
    test: Literal["t", "wilcoxon", "welch", "mannwhitney"] = "t"
    comparisons: list[PlannedComparison] = Field(default_factory=list)
    min_effect: float | None = Field(
        default=None, ge=0, description="the smallest difference that matters, in the metric's units")

    @field_validator("comparisons", mode="before")
    @classmethod
    def _pairs(cls, v: Any) -> Any:
        # `- [baseline, candidate]` is the short form of `- {baseline: .., candidate: ..}`.
        if isinstance(v, list):
            return [{"baseline": x[0], "candidate": x[1]} if isinstance(x, list | tuple) and len(x) == 2 else x
                    for x in v]
        return v


class Spec(_Model):
    """A validated benchmark spec."""

    name: str
    description: str = ""
    tasks: Annotated[list[Task], Field(min_length=1)]
    configs: Annotated[list[Config], Field(min_length=1)]
    seeds: list[int] | int = 5
    command: str | None = None
    variables: ConfigValues = Field(default_factory=dict)
    #: Variables whose values are secret (docs/spec.md, Secrets): in ``variables`` they read
    #: ``<secret>``, in a command they are a reference to an environment variable.
    secrets: list[str] = Field(default_factory=list)
    metrics: Metrics
    baseline: str | None = None
    resources: Resources = Field(default_factory=Resources)
    timeout: float | None = None
    retries: int = Field(default=2, ge=0)
    retry_on: dict[RetryClass, Annotated[int, Field(ge=0)]] = Field(default_factory=dict)
    #: The most a run's train.log takes on disk, in MiB (None: 64; 0: no cap): past it the log keeps
    #: its first and last halves and says how many bytes were dropped between (execute/logcap.py).
    log_cap_mb: float | None = Field(
        default=None, ge=0, description="most MiB a run's log takes on disk (default 64; 0: no cap); past it "
        "the log keeps its first and last halves and says how many bytes it dropped")
    workdir: str | None = None
    env: dict[str, str] = Field(default_factory=dict)
    backend: str = Field(default="local", description="a backend known to the backend registry: local, ray, "
                         "slurm, launcher, debug, or one registered by an installed package (docs/architecture.md)")
    slurm: Slurm = Field(default_factory=Slurm)
    #: The sections of backends that declare one (:attr:`benchlab.execute.base.Backend.section`), by
    #: backend name, each validated by the backend's own model: a spec's ``launcher:`` key, say. Set
    #: by :func:`benchlab.spec.load.parse_spec`, which checks them with file and line.
    backend_sections: dict[str, BaseModel] = Field(default_factory=dict, exclude=True)
    datasets: list[Dataset] | None = None
    analysis: Analysis | None = None
    settings: list[str] | None = Field(
        default=None, description="the params and variables each task's Settings line shows in BENCHMARKS.md")
    #: What `benchlab search` tunes (docs/search.md); the benchmark's runs never use it.
    search: Search | None = None
    reasons: dict[Literal["tensor_parallel", "seed", "temperature"], str] = Field(
        default_factory=dict,
        description="why the spec departs from an evaluation rule that validate and run warn about "
                    "(tensor_parallel: why tensor_parallel_size > 1; seed: why an lm_eval/vLLM call names "
                    "no --seed, repeats one while sampling, or configs compare at different seeds; "
                    "temperature: why configs of a task compare at different temperatures)")

    @field_validator("backend")
    @classmethod
    def _known_backend(cls, value: str) -> str:
        # The registry is the one list of backends (entry points included); imported here because
        # it imports the plan, which imports this module.
        from benchlab.execute.base import known_backends

        names = known_backends()
        if value not in names:
            raise ValueError(f"expected one of {', '.join(map(repr, names))}, got {value!r}")
        return value

    # Where the spec came from; not part of the YAML.
    path: Path | None = Field(default=None, exclude=True)
    overrides: ConfigValues = Field(default_factory=dict, exclude=True)
    # A grid config's name -> the names of the configs it expanded to.
    grids: dict[str, list[str]] = Field(default_factory=dict, exclude=True)
    # The values of the secret variables, by name: never dumped, never in repr.
    _secret_values: dict[str, str] = PrivateAttr(default_factory=dict)

    @field_validator("seeds")
    @classmethod
    def _seeds(cls, v: list[int] | int) -> list[int] | int:
        return check_seeds(v)

    @field_validator("timeout", mode="before")
    @classmethod
    def _timeout(cls, v: Any) -> Any:
        return None if v is None else parse_duration(v)

    @field_validator("env", mode="before")
    @classmethod
    def _env_strings(cls, v: Any) -> Any:
        if isinstance(v, dict):
            return {k: ("" if x is None else str(x)) for k, x in v.items()}
        return v

    @model_validator(mode="after")
    def _expand_grids(self) -> Spec:
        # However a spec is made (a file, or Spec(...) in code), its configs are the expanded ones.
        if any(c.grid for c in self.configs):
            self.grids = {**self.grids, **{c.name: [g.name for g in c.expand_grid()] for c in self.configs if c.grid}}
            self.configs = [g for c in self.configs for g in c.expand_grid()]
        return self

    @property
    def retry_budget(self) -> dict[str, int]:
        """Retries allowed per failure class: ``retry_on`` over the defaults; other classes get
        ``retries``."""
        return {**DEFAULT_RETRY_ON, **{str(k): v for k, v in self.retry_on.items()}}

    @property
    def seed_list(self) -> list[int]:
        return list(range(self.seeds)) if isinstance(self.seeds, int) else list(self.seeds)

    @property
    def base_dir(self) -> Path:
        """The folder the spec's relative paths are taken from."""
        return self.path.parent.resolve() if self.path else Path.cwd()

    @property
    def work_path(self) -> Path:
        wd = Path(self.workdir) if self.workdir else Path(".")
        return wd if wd.is_absolute() else (self.base_dir / wd).resolve()

    def backend_section(self, name: str) -> BaseModel | None:
        """The validated section of backend ``name`` (None: the spec has none)."""
        return self.backend_sections.get(name)

    def task(self, name: str) -> Task:
        return next(t for t in self.tasks if t.name == name)

    def secret_env(self) -> dict[str, str]:
        """The environment a run needs for the spec's secret variables (name -> value)."""
        from benchlab.secrets import env_name

        return {env_name(k): v for k, v in self._secret_values.items()}

    def secret_values(self) -> dict[str, str]:
        """The secret variables' values, by variable name (for fingerprints, never to be written)."""
        return dict(self._secret_values)

    def config(self, name: str) -> Config:
        return next(c for c in self.configs if c.name == name)
