"""The benchmark spec: YAML in, a validated ``Spec`` out, every problem reported at once.

A spec names the tasks, the configs, the seeds, the command template of a run,
the metrics and where each is read from, resources, timeout and retries.
Spec ``variables`` (like SLM-Lab's ``${max_frame}``) can be used as ``${name}``
anywhere in the spec and as ``{name}`` in command templates, and are
overridden from the command line with ``-s name=value``.

Errors name the file, the line and the field:
``spec.yaml:14 configs[2].params.lr: expected a number, got 'fast' (variables.lr is 0.01)``.
"""

from __future__ import annotations

import difflib
import gc
import itertools
import re
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PrivateAttr,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from benchlab.errors import OverrideError, Problem, SpecError
from benchlab.failures import LAUNCH, MISSING_METRIC, NODE_DIED, OOM, PREEMPTED, TIMEOUT, USAGE, RetryClass
from benchlab.quoting import WrittenFloat, as_written, shell_words
from benchlab.spec_checks import (
    BUILTIN_PLACEHOLDERS,  # noqa: F401 - part of this module's API since it began
    GRID_VALUE_BAD,
    NAME_RE,
    check_seeds,
    grid_coordinate,
    grid_names,
    placeholders,  # noqa: F401 - part of this module's API since it began
    semantic_problems,
    type_mismatch,
)
from benchlab.spec_search import ParamSpace, Search, SearchMetric, search_problems
from benchlab.spec_yaml import MAX_BYTES, ExponentText, Lines, YamlProblem, read_yaml

_VAR_RE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")
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
    params: dict[str, Any] = Field(default_factory=dict)
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
    params: dict[str, Any] = Field(default_factory=dict)
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


class MetricSource(_Model):
    """Where a metric is read from, when the run does not write benchlab's own files.

    Exactly one of ``regex``, ``json``, ``jsonl``, ``csv``, ``lm_eval``, ``tensorboard`` is set:

    - ``regex``: a pattern over ``file`` (default ``train.log``), ANSI colours stripped;
      the value is the group named ``value`` (or the only group), the step the group
      named ``step`` if present.
    - ``json``: a JSON file; ``key`` is a dotted path (``eval.scores.0``).
    - ``jsonl``: a JSON-lines file; ``key`` per line, ``step_key`` for the step.
    - ``csv``: a CSV file; ``column`` for the value, ``step_column`` for the step.
    - ``lm_eval``: the folder lm-evaluation-harness wrote (its ``--output_path``); ``task``
      and ``key`` (``exact_match,strict-match``) pick the value from the newest
      ``results_*.json`` under it; without them every ``task/metric,filter`` of the file is
      read and the metric's name (``gsm8k/exact_match,strict-match``, or
      ``exact_match,strict-match`` for the run's task) picks its value.
    - ``tensorboard``: a folder of TensorBoard event files; ``tag`` names the scalar.

    ``series: true`` keeps every match/row as a step series; the final value is
    always the last one.
    """

    regex: str | None = None
    json_file: str | None = Field(default=None, alias="json")
    jsonl: str | None = None
    csv: str | None = None
    lm_eval: str | None = None
    tensorboard: str | None = None
    file: str | None = None
    task: str | None = None
    tag: str | None = None
    key: str | None = None
    step_key: str | None = None
    column: str | None = None
    step_column: str | None = None
    series: bool = False

    def _kinds(self) -> list[str]:
        return [k for k, v in (("regex", self.regex), ("json", self.json_file), ("jsonl", self.jsonl),
                               ("csv", self.csv), ("lm_eval", self.lm_eval),
                               ("tensorboard", self.tensorboard)) if v is not None]

    @property
    def kind(self) -> str:
        kinds = self._kinds()
        return kinds[0] if kinds else "none"

    def for_run(self, context: dict[str, str]) -> MetricSource:
        """This source with ``{task}`` and ``{config}`` filled in (regex patterns are left alone)."""
        updates = {}
        for name in ("json_file", "jsonl", "csv", "lm_eval", "tensorboard", "file", "key", "step_key",
                     "column", "step_column", "task", "tag"):
            value = getattr(self, name)
            if isinstance(value, str) and "{" in value:
                for key, fill in context.items():
                    value = value.replace("{" + key + "}", fill)
                updates[name] = value
        return self.model_copy(update=updates) if updates else self

    @model_validator(mode="after")
    def _one_kind(self) -> MetricSource:
        kinds = self._kinds()
        if len(kinds) != 1:
            raise ValueError(
                "expected exactly one of 'regex', 'json', 'jsonl', 'csv', 'lm_eval', 'tensorboard'"
                + (f", got {', '.join(kinds)}" if kinds else "")
            )
        if self.lm_eval is not None and bool(self.task) != bool(self.key):
            raise ValueError("an 'lm_eval' source needs both 'task' (e.g. gsm8k) and 'key' "
                             "(e.g. 'exact_match,strict-match'), or neither: then every metric of the "
                             "results file is read and the metric's name picks its value")
        if self.tensorboard is not None and not self.tag:
            raise ValueError("a 'tensorboard' source needs 'tag', the scalar's name")
        if self.regex is not None:
            try:
                pattern = re.compile(self.regex)
            except re.error as exc:
                raise ValueError(f"invalid regex {self.regex!r}: {exc}") from None
            if "value" not in pattern.groupindex and pattern.groups != 1:
                raise ValueError(
                    f"regex {self.regex!r} must have a group named 'value' or exactly one group"
                )
        if self.json_file is not None and not self.key:
            raise ValueError("a 'json' source needs 'key', the dotted path of the value")
        if self.jsonl is not None and not self.key:
            raise ValueError("a 'jsonl' source needs 'key', the field of the value")
        if self.csv is not None and not self.column:
            raise ValueError("a 'csv' source needs 'column', the column of the value")
        return self


class Metric(_Model):
    """A metric: its name, direction, and optionally where it is read from."""

    name: str
    goal: Literal["max", "min"] = "max"
    source: MetricSource | None = Field(default=None, alias="from")
    # The values the metric can take (an accuracy: [0, 1]); intervals and plots stay inside it.
    range: tuple[float, float] | None = None

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
DEFAULT_RETRY_ON: dict[str, int] = {TIMEOUT: 0, LAUNCH: 0, USAGE: 0, MISSING_METRIC: 0, OOM: 1, NODE_DIED: 2,
                                    PREEMPTED: 20}


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
    variables: dict[str, Any] = Field(default_factory=dict)
    #: Variables whose values are secret (docs/spec.md, Secrets): in ``variables`` they read
    #: ``<secret>``, in a command they are a reference to an environment variable.
    secrets: list[str] = Field(default_factory=list)
    metrics: Metrics
    baseline: str | None = None
    resources: Resources = Field(default_factory=Resources)
    timeout: float | None = None
    retries: int = Field(default=2, ge=0)
    retry_on: dict[RetryClass, Annotated[int, Field(ge=0)]] = Field(default_factory=dict)
    workdir: str | None = None
    env: dict[str, str] = Field(default_factory=dict)
    backend: str = Field(default="local", description="a backend known to the backend registry: local, ray, "
                         "slurm, or one registered by an installed package (docs/architecture.md)")
    slurm: Slurm = Field(default_factory=Slurm)
    datasets: list[Dataset] | None = None
    analysis: Analysis | None = None
    settings: list[str] | None = Field(
        default=None, description="the params and variables each task's Settings line shows in BENCHMARKS.md")
    #: What `benchlab search` tunes (docs/search.md); the benchmark's runs never use it.
    search: Search | None = None
    reasons: dict[Literal["tensor_parallel"], str] = Field(
        default_factory=dict,
        description="why the spec departs from an evaluation rule that validate warns about "
                    "(tensor_parallel: why tensor_parallel_size > 1)")

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
    overrides: dict[str, Any] = Field(default_factory=dict, exclude=True)
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


# --------------------------------------------------------------------------- loading

# Spec attributes that say where a spec came from, not what its YAML holds.
_NOT_IN_YAML = ("path", "overrides", "grids")


def _fmt_loc(loc: tuple[Any, ...]) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else str(part)
    return out


def _model_at(loc: tuple[Any, ...]) -> type[BaseModel] | None:
    """The model class whose fields live at ``loc`` (for 'did you mean' suggestions)."""
    model: Any = Spec
    for part in loc:
        if isinstance(part, int):
            continue
        field = model.model_fields.get(part) if hasattr(model, "model_fields") else None
        if field is None:
            field = next((f for f in model.model_fields.values() if f.alias == part), None)
        if field is None:
            return None
        ann = field.annotation
        found = None
        for cand in (Task, Config, Metrics, Metric, MetricSource, Resources, Reference, Search, SearchMetric,
                     ParamSpace, Origin):
            if cand is ann or cand in getattr(ann, "__args__", ()) or any(
                cand in getattr(a, "__args__", ()) for a in getattr(ann, "__args__", ())
            ):
                found = cand
                break
        if found is None:
            return None
        model = found
    return model


def _field_names(model: type[BaseModel]) -> list[str]:
    return [f.alias or name for name, f in model.model_fields.items()
            if not (model is Spec and name in _NOT_IN_YAML)]


def _describe_type(error: dict[str, Any]) -> str:
    kind = error["type"]
    got = error.get("input")
    got_s = repr(got) if not isinstance(got, dict | list) else type(got).__name__
    expected = {
        "float_parsing": "a number",
        "float_type": "a number",
        "int_parsing": "a whole number",
        "int_type": "a whole number",
        "int_from_float": "a whole number",
        "string_type": "a string",
        "bool_parsing": "true or false",
        "bool_type": "true or false",
        "dict_type": "a mapping",
        "list_type": "a list",
        "model_type": "a mapping",
        "model_attributes_type": "a mapping",
        "literal_error": "one of " + str(error.get("ctx", {}).get("expected", "")),
    }.get(kind)
    if expected:
        return f"expected {expected}, got {got_s}"
    if kind == "missing":
        return "required field is missing"
    if kind == "too_short":
        return "must not be empty"
    if kind in ("greater_than_equal", "greater_than"):
        bound = error.get("ctx", {}).get("ge", error.get("ctx", {}).get("gt"))
        word = "at least" if kind == "greater_than_equal" else "more than"
        return f"expected {word} {bound}, got {got_s}"
    msg = str(error.get("msg", "invalid value"))
    return msg.removeprefix("Value error, ")


def _problems_from_validation(exc: ValidationError, file: str, lines: Lines) -> list[Problem]:
    problems: list[Problem] = []
    seen: set[tuple[Any, ...]] = set()
    for err in exc.errors():
        loc = tuple(err["loc"])
        # Unions (seeds: list|int) report one error per branch; keep the first per place.
        loc = tuple(p for p in loc if not (isinstance(p, str) and p in ("list[int]", "int")))
        if loc in seen:
            continue
        seen.add(loc)
        if err["type"] == "extra_forbidden":
            key = loc[-1]
            parent = _model_at(loc[:-1])
            valid = _field_names(parent) if parent else []
            close = difflib.get_close_matches(str(key), valid, n=1)
            msg = f"unknown field {key!r}"
            if close:
                msg += f"; did you mean {close[0]!r}?"
            if valid:
                msg += f" (valid fields: {', '.join(valid)})"
            problems.append(Problem(file, lines.line_for(loc), _fmt_loc(loc[:-1]) or "spec", msg))
            continue
        message = _describe_type(dict(err))
        if loc == ("seeds",) and err["type"] in ("list_type", "int_type", "int_parsing", "int_from_float"):
            got = err.get("input")
            if isinstance(got, list):
                continue  # a list with a bad item: the item's own error says it
            message = f"expected a count (5 means seeds 0..4) or a list of seeds, got {got!r}"
        problems.append(Problem(file, lines.line_for(loc), _fmt_loc(loc), message))
    return problems


def _parse_override(text: str) -> tuple[str, Any]:
    key, sep, raw = text.partition("=")
    key = key.strip()
    if not sep or not key:
        raise OverrideError(text, "expected key=value")
    try:
        value = yaml.safe_load(raw) if raw.strip() else ""
    except yaml.YAMLError:
        value = raw
    if isinstance(value, str):
        # YAML 1.1 reads 1e7 as a string; on a command line it is a number.
        for cast in (int, float):
            try:
                return key, as_written(cast(value), raw)
            except ValueError:
                continue
    # A number renders in commands as it was typed (1e2 stays 1e2) and compares as a number.
    return key, as_written(value, raw)


def _is_command(loc: tuple[Any, ...]) -> bool:
    return loc == ("command",) or (len(loc) == 3 and loc[0] in ("tasks", "configs") and loc[2] == "command")


def _typed_place(loc: tuple[Any, ...]) -> bool:
    """Whether values at ``loc`` are data handed to runs (params, grid values), where ``1e-3`` is a number."""
    return len(loc) >= 4 and loc[0] in ("tasks", "configs") and loc[2] in ("params", "grid")


def _as_value(node: Any, typed: bool) -> Any:
    if isinstance(node, ExponentText):
        return WrittenFloat(float(node.replace("_", "")), str(node)) if typed else str(node)
    return node


def _passes(value: Any) -> bool:
    """Whether ``value`` is kept as it is: not a container, a variable use, or a number-like text."""
    cls = value.__class__
    return (cls is str and "${" not in value) or cls is int or cls is float or cls is bool or value is None


class _SecretUse:
    """A secret variable as interpolation sees it: usable in a command only, as ``"$ENV"``."""

    def __init__(self, name: str):
        from benchlab.secrets import env_name

        self.env = env_name(name)


def _param_places(data: dict[str, Any]) -> dict[str, str]:
    """Each name a task or config sets per run (a param or a grid param) -> where it is first set.

    A variable of such a name is only a default: its value differs from run to run."""
    places: dict[str, str] = {}
    for kind in ("tasks", "configs"):
        items = data.get(kind)
        for i, item in enumerate(items if isinstance(items, list) else []):
            if not isinstance(item, dict):
                continue
            for field in ("params", "grid"):
                if isinstance(item.get(field), dict):
                    for key in item[field]:
                        if isinstance(key, str):
                            places.setdefault(key, f"{kind}[{i}].{field}.{key}")
    return places


def _interpolate(node: Any, variables: dict[str, Any], loc: tuple[Any, ...],
                 unknown: list[tuple[tuple[Any, ...], str]],
                 per_run: dict[str, str] | None = None,
                 fixed: list[tuple[tuple[Any, ...], str]] | None = None) -> Any:
    """``node`` with every ``${name}`` filled in from ``variables`` (unknown names are noted).

    ``per_run`` names the variables a param or grid sets run by run: in a command such a
    ``${name}`` becomes the placeholder ``{name}``, filled in per run like any param; anywhere
    else it would be filled in once with the default, so the place is noted in ``fixed``."""
    per_run = per_run if per_run is not None else {}
    fixed = fixed if fixed is not None else []
    if isinstance(node, dict):
        # Plain values are the bulk of a big spec: they pass without a location being built.
        return {k: v if _passes(v) else _interpolate(v, variables, (*loc, k), unknown, per_run, fixed)
                for k, v in node.items()}
    if isinstance(node, list):
        return [v if _passes(v) else _interpolate(v, variables, (*loc, i), unknown, per_run, fixed)
                for i, v in enumerate(node)]
    if not isinstance(node, str) or "${" not in node:
        return _as_value(node, _typed_place(loc))
    if _is_command(loc):
        # In a command a variable becomes shell words, quoted exactly as a {param} is; its braces
        # are doubled so that the value is never read as a placeholder.
        def words(m: re.Match[str]) -> str:
            if isinstance(variables.get(m.group(1)), _SecretUse):
                # The value reaches the run through its environment; the command holds the name.
                return f'"${variables[m.group(1)].env}"'
            if m.group(1) in per_run and m.group(1) in variables:
                return "{" + m.group(1) + "}"  # the run's own value, which a param or grid may set
            if m.group(1) in variables:
                return shell_words(variables[m.group(1)]).replace("{", "{{").replace("}", "}}")
            unknown.append((loc, m.group(1)))
            return m.group(0)

        return _VAR_RE.sub(words, node)
    secret = next((m.group(1) for m in _VAR_RE.finditer(node) if isinstance(variables.get(m.group(1)), _SecretUse)),
                  None)
    if secret is not None:
        unknown.append((loc, f"secret:{secret}"))
        return node
    if len(loc) == 2 and loc[0] == "env":
        # The environment takes placeholders too, so it gets the run's own value the same way.
        node = _VAR_RE.sub(lambda m: "{" + m.group(1) + "}" if m.group(1) in per_run and m.group(1) in variables
                           else m.group(0), node)
        if "${" not in node:
            return node
    fixed += [(loc, m.group(1)) for m in _VAR_RE.finditer(node)
              if m.group(1) in per_run and m.group(1) in variables]
    whole = _VAR_RE.fullmatch(node)
    if whole:
        name = whole.group(1)
        if name in variables:
            return variables[name]  # a lone ${x} keeps the variable's type
        unknown.append((loc, name))
        return str(node)

    def sub(m: re.Match[str]) -> str:
        if m.group(1) in variables:
            return str(variables[m.group(1)])
        unknown.append((loc, m.group(1)))
        return m.group(0)

    return _VAR_RE.sub(sub, node)


def load_spec(path: str | Path, overrides: list[str] | dict[str, Any] | None = None) -> Spec:
    """Read, interpolate and validate a spec file.

    ``overrides`` are ``key=value`` strings (from ``-s``) or a mapping; each must
    name a spec variable. Raises ``SpecError`` listing every problem found, or
    ``OverrideError`` for an override that names no variable.
    """
    path = Path(path)
    file = str(path)
    if not path.exists():
        raise SpecError([Problem(file, None, "", "spec file not found")])
    if path.is_dir():
        raise SpecError([Problem(file, None, "", "is a folder; expected a YAML spec file")])
    try:
        size = path.stat().st_size
        if size > MAX_BYTES:
            raise SpecError([Problem(file, None, "", f"is {size / 2**20:.1f} MB; a spec may be at most "
                                                     f"{MAX_BYTES // 2**20} MB (see docs/spec.md, 'Limits')")])
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise SpecError([Problem(file, None, "", f"cannot read: {exc}")]) from None
    return parse_spec(text, file=file, overrides=overrides, path=path)


def parse_spec(text: str, file: str = "<spec>", overrides: list[str] | dict[str, Any] | None = None,
               path: Path | None = None) -> Spec:
    """Validate a spec given as YAML text (see ``load_spec``).

    Every problem is found in one pass: duplicate keys, unknown variables, the schema's
    problems and the semantic ones (names, the baseline, commands and placeholders, params
    typed by the variables they override) come in one ``SpecError``, each once, in line order.
    """
    # A spec builds many small containers and frees none of them while it is read: the cyclic
    # collector would only walk them again and again (a third of the time of a large spec).
    collecting = gc.isenabled()
    gc.disable()
    try:
        return _parse(text, file, overrides, path)
    finally:
        if collecting:
            gc.enable()


def _parse(text: str, file: str, overrides: list[str] | dict[str, Any] | None, path: Path | None) -> Spec:
    try:
        document = read_yaml(text)
    except YamlProblem as exc:
        raise SpecError([Problem(file, exc.line, "", exc.message)]) from None
    data, lines = document.data, document.lines
    if not isinstance(data, dict):
        raise SpecError([Problem(file, 1, "", "expected a mapping with 'name', 'tasks', 'configs', ...")])
    found: list[tuple[tuple[Any, ...], str]] = [
        ((*where, key), f"duplicate key {key!r} (also line {first}); the second would silently win")
        for where, key, _, first in document.duplicates]

    variables = data.get("variables") or {}
    if not isinstance(variables, dict):
        found.append((("variables",), "expected a mapping of names to values"))
        variables = {}
    variables = {k: _as_value(v, True) for k, v in variables.items()}
    applied: dict[str, Any] = {}
    items = overrides.items() if isinstance(overrides, dict) else [
        _parse_override(o) for o in (overrides or [])]
    for key, value in items:
        if key not in variables:
            known = ", ".join(sorted(variables)) or "none defined"
            close = difflib.get_close_matches(key, list(variables), n=1)
            hint = f"did you mean {close[0]!r}? " if close else ""
            raise OverrideError(f"{key}={value}", f"names no variable of {file}; {hint}variables: {known}")
        expected = type_mismatch(variables[key], value)
        if expected is not None:
            hint = ""
            if isinstance(value, str) and "," in value:
                # Hydra's multirun spelling (lr=1e-3,1e-4): say where benchlab's sweeps live.
                hint = (f"; to run several values, give a config a grid: grid: {{{key}: [{value}]}} "
                        "(docs/spec.md, Grids)")
            raise OverrideError(f"{key}={value}", f"expected {expected}, got {value!r} (variables.{key} is "
                                                  f"{variables[key]!r} in {file}){hint}")
        variables[key] = value
        applied[key] = value

    secret_names = _secret_names(data.get("secrets"), variables, found)
    values = {k: "" if variables[k] is None else str(variables[k]) for k in secret_names}
    from benchlab.secrets import MASK

    unknown: list[tuple[tuple[Any, ...], str]] = []
    fixed: list[tuple[tuple[Any, ...], str]] = []
    per_run = _param_places(data)
    body = {k: v for k, v in data.items() if k != "variables"}
    body = _interpolate(body, {**variables, **{k: _SecretUse(k) for k in secret_names}}, (), unknown, per_run,
                        fixed)
    known = ", ".join(sorted(variables)) or "none defined"
    found += [(loc, f"secret variable ${{{name[7:]}}} can be used in a command only, where it reaches the run "
                    "through the environment (docs/spec.md, Secrets)") if name.startswith("secret:")
              else (loc, f"unknown variable ${{{name}}} (variables: {known})") for loc, name in unknown]
    found += _secret_placeholders(body, secret_names)
    unknown = [u for u in unknown if not u[1].startswith("secret:")]
    # Outside a command ${name} is filled in once, before any run exists: a grid or param of that
    # name would silently not reach it, so the spec is refused rather than run with the default.
    found += [(loc, f"${{{name}}} is filled in once with variables.{name}, but {per_run[name]} sets "
                    f"{name} per run, which would not reach here; use {{{name}}} in the command, or "
                    f"give this field its own param") for loc, name in fixed]
    variables = {k: MASK if k in secret_names else v for k, v in variables.items()}
    applied = {k: MASK if k in secret_names else v for k, v in applied.items()}
    body["variables"] = variables
    problems = [Problem(file, lines.line_for(loc), _fmt_loc(loc), message) for loc, message in found]
    spec: Spec | None = None
    try:
        spec = Spec.model_validate(body)
    except ValidationError as exc:
        # A value with an unknown variable has its own message; the schema's would repeat it.
        at_unknown = {_fmt_loc(loc) for loc, _ in unknown}
        problems += [p for p in _problems_from_validation(exc, file, lines) if p.field not in at_unknown]
    problems += [Problem(file, lines.line_for(loc), _fmt_loc(loc), message)
                 for loc, message in [*semantic_problems(body, variables), *search_problems(body)]]
    if problems:
        unique = list(dict.fromkeys(problems))
        unique.sort(key=lambda p: p.line or 0)
        raise SpecError(unique)
    assert spec is not None  # no problems means the schema passed
    spec.path = path
    spec.overrides = applied
    spec._secret_values = values
    return spec


def _secret_names(raw: Any, variables: dict[str, Any], found: list[tuple[tuple[Any, ...], str]]) -> list[str]:
    """The names under ``secrets:``, each a variable of the spec (problems noted in ``found``)."""
    if raw is None:
        return []
    if not isinstance(raw, list) or not all(isinstance(x, str) for x in raw):
        found.append((("secrets",), "expected a list of variable names"))
        return []
    names = []
    for i, name in enumerate(raw):
        if name not in variables:
            known = ", ".join(sorted(variables)) or "none defined"
            found.append((("secrets", i), f"{name!r} names no variable (variables: {known}); give it one, e.g. "
                                          f"variables: {{{name}: null}} and -s {name}=..."))
        else:
            names.append(name)
    return names


def _secret_placeholders(body: dict[str, Any], secret_names: list[str]) -> list[tuple[tuple[Any, ...], str]]:
    """A secret variable written ``{name}`` in a command would be formatted into its text."""
    if not secret_names:
        return []
    out = []
    places: list[tuple[tuple[Any, ...], Any]] = [(("command",), body.get("command"))]
    for kind in ("tasks", "configs"):
        for i, item in enumerate(body.get(kind) or []):
            if isinstance(item, dict):
                places.append(((kind, i, "command"), item.get("command")))
    for loc, command in places:
        if not isinstance(command, str):
            continue
        for name in secret_names:
            if re.search(r"(?<!\{)\{" + re.escape(name) + r"(?:[:!][^}]*)?\}(?!\})", command):
                out.append((loc, f"secret variable {{{name}}} would be written into the command's text; "
                                 f"write ${{{name}}}, which passes it through the environment"))
    return out


def json_schema() -> dict[str, Any]:
    """The JSON Schema of a spec file, for editors and validators."""
    schema = Spec.model_json_schema(by_alias=True)
    for name in _NOT_IN_YAML:
        schema.get("properties", {}).pop(name, None)
    schema["title"] = "benchlab spec"
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    return schema
