"""The ``search`` section of a spec: what ``benchlab search`` tunes, on which metric, with which seeds.

A search tunes the params of one config (``base_config``) on a metric that is not the
benchmark's primary one (a validation metric the run reports beside its test metric), over
seeds the benchmark never uses, so that no number of the benchmark table was tuned on::

    search:
      metric: {name: val_accuracy, goal: max}
      base_config: mlp
      space:
        lr: {log_uniform: [1.0e-4, 1.0e-1]}
        depth: {int: [1, 4]}
        act: {choice: [relu, tanh]}
      seeds: [100, 101]
      budget: 12             # default: 4 × the dimensions of the space
      pruner: median         # or {name: asha, min_steps: 10, reduction_factor: 4}

The checks that need the rest of the spec (the metric against the primary one, the seeds
against the benchmark's, names of tasks and configs) are in :func:`search_problems`.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, field_serializer, field_validator, model_validator

from benchlab.json_types import ConfigValues
from benchlab.spec.checks import NAME_RE, Found, check_seeds

SAMPLERS = ("tpe", "random", "grid", "cmaes")
#: Each pruner and its settings (another pruner's are refused with it).
PRUNER_SETTINGS = {"median": ("startup_trials", "warmup_steps"), "asha": ("min_steps", "reduction_factor"),
                   "none": ()}
#: Trials per dimension of the space when no budget is given (3–4 per dimension is the usual advice).
TRIALS_PER_DIMENSION = 4


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)


class ParamSpace(_Model):
    """One param's range: exactly one of ``uniform``, ``log_uniform``, ``int`` or ``choice``."""

    uniform: tuple[float, float] | None = None
    log_uniform: tuple[float, float] | None = None
    int_range: tuple[int, int] | None = Field(default=None, alias="int")
    choice: list[Any] | None = None

    @property
    def kind(self) -> str:
        return next(k for k, v in (("uniform", self.uniform), ("log_uniform", self.log_uniform),
                                   ("int", self.int_range), ("choice", self.choice)) if v is not None)

    @model_validator(mode="after")
    def _one_kind(self) -> ParamSpace:
        kinds = [k for k, v in (("uniform", self.uniform), ("log_uniform", self.log_uniform),
                                ("int", self.int_range), ("choice", self.choice)) if v is not None]
        if len(kinds) != 1:
            raise ValueError("expected exactly one of 'uniform: [a, b]', 'log_uniform: [a, b]', 'int: [a, b]', "
                             "'choice: [...]'" + (f", got {', '.join(kinds)}" if kinds else ""))
        for name, bounds in (("uniform", self.uniform), ("log_uniform", self.log_uniform), ("int", self.int_range)):
            if bounds is not None and not bounds[0] < bounds[1]:
                raise ValueError(f"{name}: expected [low, high] with low < high, got [{bounds[0]:g}, {bounds[1]:g}]")
        if self.log_uniform is not None and self.log_uniform[0] <= 0:
            raise ValueError(f"log_uniform: expected a positive low bound, got {self.log_uniform[0]:g}")
        if self.choice is not None:
            if not self.choice:
                raise ValueError("choice: expected at least one value")
            if any(isinstance(v, dict | list) for v in self.choice):
                raise ValueError("choice: expected single values (numbers, strings, true/false, null)")
            if len({repr(v) for v in self.choice}) != len(self.choice):
                raise ValueError(f"choice: a value is listed twice in {self.choice!r}")
        return self

    def grid_values(self) -> list[Any] | None:
        """The values a grid search tries: the choices or every integer; None for a continuous range."""
        if self.choice is not None:
            return list(self.choice)
        if self.int_range is not None:
            return list(range(self.int_range[0], self.int_range[1] + 1))
        return None


class SearchMetric(_Model):
    """The metric a search optimises and how a run's curve becomes one number."""

    name: str
    goal: Literal["max", "min"] | None = Field(
        default=None, description="max or min [default: the goal the spec's metrics give it, else max]")
    summary: Literal["final", "auc", "max", "slope"] = "final"
    allow_primary: bool = Field(default=False, description="tune on the benchmark's primary metric anyway "
                                                           "(needs 'reason', which is recorded)")
    reason: str | None = None

    @model_validator(mode="after")
    def _reason(self) -> SearchMetric:
        if self.allow_primary and not (self.reason or "").strip():
            raise ValueError("allow_primary: true needs 'reason', which the search records")
        return self


def _metric_from_name(value: Any) -> Any:
    return {"name": value} if isinstance(value, str) else value


PrunerName = Literal["median", "asha", "none"]


class Pruner(_Model):
    """The pruner, and the settings that differ from Optuna's defaults.

    ``median`` is Optuna's ``MedianPruner``, ``asha`` its ``SuccessiveHalvingPruner`` (the
    asynchronous successive halving of Li et al. 2020, as Ray Tune's ``ASHAScheduler``), ``none``
    prunes nothing. Written as a name (``pruner: asha``) or as a mapping with the name and
    settings (``pruner: {name: asha, min_steps: 10, reduction_factor: 4}``).
    """

    name: PrunerName = "median"
    startup_trials: int | None = Field(
        default=None, ge=0, description="median: trials that run to the end before any is pruned "
                                        "[default: 5, a quarter of a budget under 20]")
    warmup_steps: int | None = Field(
        default=None, ge=0, description="median: the steps of a trial before it may be pruned [default: 0]")
    min_steps: int | None = Field(
        default=None, ge=1, description="asha: the first rung, in reported steps (Ray Tune's grace_period) "
                                        "[default: Optuna's, a hundredth of the first completed trial's steps]")
    reduction_factor: int | None = Field(
        default=None, ge=2, description="asha: a rung lets 1 trial in this many go on [default: 4]")

    @model_validator(mode="after")
    def _settings_of_this_pruner(self) -> Pruner:
        wrong = [k for k in ("startup_trials", "warmup_steps", "min_steps", "reduction_factor")
                 if getattr(self, k) is not None and k not in PRUNER_SETTINGS[self.name]]
        if wrong:
            owner = next(n for n, keys in PRUNER_SETTINGS.items() if wrong[0] in keys)
            allowed = ", ".join(PRUNER_SETTINGS[self.name]) or "none"
            raise ValueError(f"{wrong[0]} is a setting of the {owner} pruner; the {self.name} pruner takes: {allowed}")
        return self

    @property
    def settings(self) -> dict[str, int]:
        """The settings given in the spec (the rest are Optuna's defaults)."""
        return {k: v for k in PRUNER_SETTINGS[self.name] if (v := getattr(self, k)) is not None}

    def __str__(self) -> str:
        settings = self.settings
        if not settings:
            return self.name
        return f"{self.name} ({', '.join(f'{k} {v}' for k, v in settings.items())})"


def _pruner_from_name(value: Any) -> Any:
    if isinstance(value, str):
        if value not in PRUNER_SETTINGS:
            raise ValueError(f"expected one of {', '.join(PRUNER_SETTINGS)}, or a mapping with name: and its settings "
                             f"(e.g. {{name: asha, min_steps: 10}}), got {value!r}")
        return {"name": value}
    return value


class Search(_Model):
    """A spec's ``search`` section (see the module's docstring)."""

    name: str = Field(default="search", description="names the study and its folder, results/<spec>/search/<name>")
    metric: SearchMetric
    space: dict[str, ParamSpace] = Field(min_length=1)
    base_config: str | None = Field(default=None, description="the config whose params trials override "
                                                              "[default: the baseline, else the first config]")
    tasks: list[str] | None = Field(default=None, description="the tasks a trial runs on [default: all]")
    seeds: list[int] | int = Field(default=1, description="a list, or a count: that many seeds after the "
                                                          "benchmark's highest")
    budget: int | None = Field(default=None, ge=1, description="completed and pruned trials "
                                                               "[default: 4 × the dimensions of the space]")
    sampler: Literal["tpe", "random", "grid", "cmaes"] = "tpe"
    pruner: Annotated[Pruner, BeforeValidator(_pruner_from_name, json_schema_input_type=PrunerName | Pruner)] = Field(
        default_factory=Pruner)
    sampler_seed: int | None = Field(default=0, description="seeds the sampler, so that a search is repeatable")

    @field_validator("metric", mode="before")
    @classmethod
    def _metric_name(cls, v: Any) -> Any:
        return _metric_from_name(v)

    @field_serializer("pruner")
    def _pruner_as_written(self, pruner: Pruner) -> Any:
        # A pruner without settings is dumped as its name, as specs write it and as the key of a
        # study made before pruners had settings holds it.
        return {"name": pruner.name, **pruner.settings} if pruner.settings else pruner.name

    @field_validator("name")
    @classmethod
    def _name(cls, v: str) -> str:
        if not NAME_RE.match(v):
            raise ValueError(f"expected letters, digits and . _ + - only (it names a folder), got {v!r}")
        return v

    @field_validator("space")
    @classmethod
    def _space_names(cls, v: dict[str, ParamSpace]) -> dict[str, ParamSpace]:
        bad = [k for k in v if not NAME_RE.match(str(k))]
        if bad:
            raise ValueError(f"param {bad[0]!r}: expected letters, digits and . _ + - only")
        return v

    @field_validator("seeds")
    @classmethod
    def _seeds(cls, v: list[int] | int) -> list[int] | int:
        return check_seeds(v)

    @property
    def default_budget(self) -> int:
        return TRIALS_PER_DIMENSION * len(self.space)

    @property
    def trial_budget(self) -> int:
        """The number of completed and pruned trials the search runs to."""
        return self.budget if self.budget is not None else self.default_budget

    def seed_list(self, benchmark_seeds: list[int]) -> list[int]:
        """The search's seeds; a count starts after the benchmark's highest seed."""
        if isinstance(self.seeds, list):
            return list(self.seeds)
        first = max(benchmark_seeds, default=-1) + 1
        return list(range(first, first + self.seeds))


def search_problems(data: ConfigValues) -> list[Found]:
    """What is wrong with a valid-looking ``search`` section given the rest of the spec.

    ``data`` is the spec's YAML document as the user wrote it, before it is a ``Spec`` (these
    checks run beside the schema's, so that every problem comes in one message)."""
    search = data.get("search")
    if not isinstance(search, dict):
        return []
    found: list[Found] = []
    configs = [c.get("name") for c in data.get("configs") or [] if isinstance(c, dict)]
    tasks = [t.get("name") for t in data.get("tasks") or [] if isinstance(t, dict)]
    base = search.get("base_config")
    if isinstance(base, str) and configs and base not in configs:
        found.append(Found(("search", "base_config"),
                      f"names no config: {base!r} (configs: {', '.join(map(str, configs))})"))
    wanted = search.get("tasks")
    if isinstance(wanted, list):
        for i, t in enumerate(wanted):
            if isinstance(t, str) and tasks and t not in tasks:
                found.append(Found(("search", "tasks", i),
                                   f"names no task: {t!r} (tasks: {', '.join(map(str, tasks))})"))
        if not wanted:
            found.append(Found(("search", "tasks"), "must not be empty (leave it out to search on every task)"))
    metric = _metric_from_name(search.get("metric"))
    metrics = data.get("metrics")
    if isinstance(metric, dict) and isinstance(metrics, dict):
        primary = _metric_from_name(metrics.get("primary"))
        primary_name = primary.get("name") if isinstance(primary, dict) else None
        if metric.get("name") == primary_name and primary_name is not None and not metric.get("allow_primary"):
            found.append(Found(("search", "metric", "name"),
                          f"{primary_name!r} is the benchmark's primary metric: tuning on it would put a tuned-on-test "
                          "number in the benchmark table; search on a validation metric the run reports beside it, "
                          "or set allow_primary: true with a reason"))
    seeds = search.get("seeds")
    bench = data.get("seeds", 5)
    bench_list = (list(range(bench)) if isinstance(bench, int) and not isinstance(bench, bool)
                  else bench if isinstance(bench, list) else [])
    if isinstance(seeds, list):
        both = sorted({s for s in seeds if isinstance(s, int)} & {s for s in bench_list if isinstance(s, int)})
        if both:
            found.append(Found(("search", "seeds"),
                          f"search.seeds {seeds} and the benchmark's seeds {_seeds_text(bench)} share "
                          f"{', '.join(map(str, both))}: a config tuned on a seed would be benchmarked on it; "
                          "pick search seeds the benchmark does not use"))
    space = search.get("space")
    if search.get("sampler") == "grid" and isinstance(space, dict):
        for key, value in space.items():
            if isinstance(value, dict) and ("uniform" in value or "log_uniform" in value):
                found.append(Found(("search", "space", key),
                              "the grid sampler needs 'int' or 'choice' params (a continuous range has no grid); "
                              "list the values with choice: [...], or use sampler: tpe"))
    return found


def _seeds_text(seeds: Any) -> str:
    if isinstance(seeds, int):
        return f"{seeds} (0..{seeds - 1})"
    return str(seeds)


def pruning_blind(spec: Any) -> str | None:
    """Why the search's pruner can never act, or None when it can (or is off).

    Pruning reads a trial's curve from its ``metrics.jsonl`` while the runs go (``benchlab.log``);
    a search metric read from another source (a log regex, a JSON or CSV file) reaches the study
    only once a run has ended, too late to stop it."""
    search = spec.search
    if search is None or search.pruner.name == "none":
        return None
    metric = next((m for m in spec.metrics.all if m.name == search.metric.name), None)
    if metric is None or metric.source is None:
        return None
    where = metric.source.described
    return (f"the {search.pruner.name} pruner cannot act: {metric.name} is read from {where} once a run "
            f"has ended, and pruning reads curves from metrics.jsonl (benchlab.log) while runs go; log "
            f"{metric.name} with benchlab.log, or set pruner: none")
