"""Running a search: Optuna asks for trials, the sweep runs each as ordinary runs, Optuna is told.

A trial is the runs of one config, ``<base_config>[trial=N]`` (the base config's params with the
trial's over them), on each search task and each search seed. The runs go through the same
``Sweep`` as ``benchlab run`` (process groups, GPUs, timeouts, retries, failure triage, the ledger,
the progress bar), which asks ``SearchDriver`` for the next trial whenever a slot is idle. The
trial's value is the mean over its runs of the search metric's summary (``final`` by default).

Pruning: while a trial's runs are in flight their ``metrics.jsonl`` are read as they grow; at each
step every run of the trial has reached, the mean is reported to the study, and when Optuna's
pruner says so, the sweep kills the runs' process groups and records them as ``pruned``.

Everything lives in ``results/<spec>/search/<name>/``: the study (``study.journal``), a ledger of
the trials' runs of its own and their run directories, so that no trial ever reaches the
benchmark's ledger, table or report, even when search and benchmark share a results folder.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchlab.errors import SearchError
from benchlab.execute.base import BackendOptions
from benchlab.execute.events import EventKind, SweepEvent
from benchlab.execute.sweep import Sweep, SweepResult
from benchlab.json_types import ConfigValues
from benchlab.ledger import COMPLETED, FAILED, PRUNED, ResultsLock, SearchRecord, Store
from benchlab.names.results_files import SEARCH_DIR
from benchlab.names.run_files import run_dir_of
from benchlab.plan import Run, expand
from benchlab.search.live import CurveTail
from benchlab.search.study import (
    FAILURE_ATTR,
    RUNS_ATTR,
    STUDY_LOCK,
    counted,
    distributions,
    goal_of,
    grid_size,
    open_study,
    recover,
    study_name,
)
from benchlab.search.summary import store_importances
from benchlab.spec import Metric, Metrics, Spec
from benchlab.spec.search import pruning_blind

#: How often runs flush their curves while a pruner reads them, and how often they are read (s).
#: A pruned run goes on for up to both before it is stopped: in bench/search.py (steps of 5 ms,
#: a loaded machine) a pruned trial reported 17 steps on average at 0.05 s, 11 to 15 at 0.02 s.
#: A read of the curves and the pruner's check cost the search process about a millisecond.
LIVE_FLUSH_S = 0.02
LIVE_POLL_S = 0.02


def search_folder(results_dir: Path | str, spec: Spec) -> Path:
    """Where a spec's search keeps its study, ledger and runs: ``<results>/search/<name>``."""
    name = spec.search.name if spec.search is not None else "search"
    return Path(results_dir) / SEARCH_DIR / name


def base_config_name(spec: Spec) -> str:
    assert spec.search is not None
    return spec.search.base_config or spec.baseline or spec.configs[0].name


def trial_config_name(spec: Spec, number: int) -> str:
    return f"{base_config_name(spec)}[trial={number}]"


def trial_spec(spec: Spec) -> Spec:
    """The spec the trials' runs are expanded from and recorded with: the search's tasks and
    seeds, and the search metric as the primary one (a run that does not report it failed)."""
    search = spec.search
    assert search is not None
    tasks = [spec.task(t) for t in search.tasks] if search.tasks else spec.tasks
    named = next((m for m in spec.metrics.all if m.name == search.metric.name), None)
    primary = (named or Metric(name=search.metric.name)).model_copy(update={"goal": goal_of(spec)})
    metrics = Metrics(primary=primary, secondary=[m for m in spec.metrics.all if m.name != primary.name])
    # The working directory resolved once: each trial's runs are expanded from this spec, on the
    # path from one trial's end to the next one's start.
    return spec.model_copy(update={"tasks": tasks, "seeds": search.seed_list(spec.seed_list), "metrics": metrics,
                                   "env": {**spec.env, "BENCHLAB_FLUSH_S": str(LIVE_FLUSH_S)},
                                   "workdir": str(spec.work_path)})


def trial_runs(spec: Spec, number: int, params: ConfigValues) -> list[Run]:
    """The runs of trial ``number`` (of ``trial_spec(spec)``): the base config with ``params``, the
    values the study drew for the search space's names, laid over its own params."""
    base = spec.config(base_config_name(spec))
    cfg = base.model_copy(update={"name": trial_config_name(spec, number), "params": {**base.params, **params},
                                  "grid": {}})
    return expand(spec.model_copy(update={"configs": [cfg]}))


@dataclass
class TrialEvent:
    """A trial asked for (``ask``) or ended (``tell``: ``state`` is complete, pruned or fail)."""

    kind: str
    number: int
    params: ConfigValues
    state: str = "running"
    value: float | None = None
    reason: str | None = None
    best_number: int | None = None
    best_value: float | None = None
    counted: int = 0  # completed and pruned trials so far
    budget: int = 0


@dataclass
class SearchResult:
    """How a search ended."""

    study: str
    folder: Path
    budget: int
    counted: int
    completed: int
    pruned: int
    failed: int
    recovered: list[int]
    best_number: int | None
    best_value: float | None
    best_params: ConfigValues
    sweep: SweepResult | None
    metric: str
    goal: str
    summary: str
    stopped_on_failures: bool = False

    @property
    def exit_code(self) -> int:
        if self.sweep is not None and self.sweep.stopped:
            return 130
        return 1 if self.failed or (self.sweep is not None and self.sweep.failed) else 0


@dataclass
class _Trial:
    trial: Any  # optuna.trial.Trial
    runs: dict[str, Run]
    params: ConfigValues
    ended: dict[str, str] = field(default_factory=dict)  # run id -> completed / failed / pruned
    errors: list[str] = field(default_factory=list)
    tails: dict[str, CurveTail] = field(default_factory=dict)
    points: dict[str, dict[float, float]] = field(default_factory=dict)
    values: dict[str, float | None] = field(default_factory=dict)  # run id -> its value, once completed
    last_step: float = -math.inf
    pruned: str | None = None
    named: bool = False  # whether the trial's runs are in its user attributes


class SearchDriver:
    """Asks the study for trials as the sweep has room, reads their live curves for the pruner,
    and tells the study each trial's value (the ``Feeder`` of the sweep)."""

    def __init__(self, spec: Spec, study: Any, folder: Path, budget: int, summary: str,
                 on_trial: Callable[[TrialEvent], None] | None = None, prune: bool = True,
                 max_failed: int | None = None):
        assert spec.search is not None
        self.spec = spec
        self.study = study
        self.folder = folder
        self.budget = budget
        self.summary = summary
        self.metric = spec.search.metric.name
        self.on_trial = on_trial or (lambda event: None)
        self.poll_s: float | None = LIVE_POLL_S if prune else None
        # Successive halving records a trial's value at a rung as the value of the step it is
        # checked at: checked once per read, a trial read late would enter a rung with a later
        # step's (higher) value than the others. So asha checks every step (25 us a check with
        # 60 trials); the median rule compares at the checked step itself, and once per read
        # (a check costs it 220 us there).
        self.check_every_step = spec.search.pruner.name == "asha"
        self.max_failed = max_failed if max_failed is not None else max(3, budget // 2)
        self.distributions = distributions(spec.search)
        self.counted = counted(study)
        self.completed = self.pruned = self.failed = 0
        self.maximize = study.direction.name == "MAXIMIZE"
        self.best: tuple[int | None, float | None] = best_of(study)
        self.active: dict[int, _Trial] = {}
        self._trial_of: dict[str, int] = {}
        # Trial events wait until the sweep has started the next trial's runs (its next event) or
        # has none to start: what the CLI prints of a trial is then off the path from one trial's
        # end to the next one's start.
        self._pending: list[TrialEvent] = []

    # -- the sweep's Feeder -----------------------------------------------------

    def more(self, free: int) -> list[Run]:
        if self.counted + len(self.active) >= self.budget or self.failed >= self.max_failed:
            self.notify()
            return []
        trial = self.study.ask(self.distributions)
        params = trial.params  # a copy (Optuna's): taken once
        runs = trial_runs(self.spec, trial.number, params)
        state = _Trial(trial, {r.run_id: r for r in runs}, params)
        for r in runs:
            self._trial_of[r.run_id] = trial.number
            if self.poll_s is not None:
                state.tails[r.run_id] = CurveTail(run_dir_of(self.folder, r.run_id), self.metric)
                state.points[r.run_id] = {}
        self.active[trial.number] = state
        self._pending.append(TrialEvent("ask", trial.number, dict(params), counted=self.counted, budget=self.budget))
        return runs

    def notify(self) -> None:
        """Pass on the trial events held back (see ``_pending``)."""
        pending, self._pending = self._pending, []
        for event in pending:
            self.on_trial(event)

    def to_prune(self) -> dict[str, str]:
        out: dict[str, str] = {}
        for state in self.active.values():
            if state.pruned is not None or not state.tails:
                continue
            for run_id, tail in state.tails.items():
                for step, value in tail.read():
                    state.points[run_id][step] = value
            reached = set.intersection(*(set(p) for p in state.points.values()))
            new = sorted(s for s in reached if s > state.last_step)
            if not new:
                continue
            pruned_at = None
            for step in new:
                mean = sum(p[step] for p in state.points.values()) / len(state.points)
                state.trial.report(mean, int(step))
                state.last_step = step
                if self.check_every_step and state.trial.should_prune():
                    pruned_at = (step, mean)
                    break
            if pruned_at is None and not self.check_every_step and state.trial.should_prune():
                pruned_at = (new[-1], mean)
            if pruned_at is not None:
                step, mean = pruned_at
                state.pruned = (f"pruned at step {step:g}: {self.metric} = {mean:.4g} cannot catch up "
                                f"({self.spec.search.pruner.name if self.spec.search else ''} pruner)")
                out.update({rid: state.pruned for rid in state.runs if rid not in state.ended})
        return out

    # -- run events ---------------------------------------------------------------

    def on_event(self, event: SweepEvent) -> None:
        if event.run is None or event.kind not in (EventKind.START, EventKind.FINISH):
            return
        self.notify()
        number = self._trial_of.get(event.run.run_id)
        state = self.active.get(number) if number is not None else None
        if state is None:
            return
        if not state.named:
            # The trial names its runs once the first has started or ended, off the path from
            # the last trial's end to this one's start (a search killed before has no trial of
            # them: the trial it asked for is failed and asked again).
            state.trial.set_user_attr(RUNS_ATTR, list(state.runs))
            state.named = True
        if event.kind is not EventKind.FINISH or event.status not in (COMPLETED, FAILED, PRUNED):
            return  # an interrupted run leaves its trial running: the next search asks it again
        state.ended[event.run.run_id] = event.status
        if event.status == COMPLETED:
            state.values[event.run.run_id] = self._value(event.run, event.value)
        if event.status == FAILED:
            state.errors.append(f"{event.run.name}: {event.failure_class or 'failed'}: {event.error or ''}".strip())
        if len(state.ended) == len(state.runs):
            self._tell(state)

    def _tell(self, state: _Trial) -> None:
        from optuna.trial import TrialState

        trial = state.trial
        del self.active[trial.number]
        value: float | None = None
        reason: str | None = None
        ended = set(state.ended.values())
        if FAILED in ended:
            reason = "; ".join(state.errors)
        elif PRUNED in ended:
            reason = state.pruned or "pruned"
        else:
            values = [state.values.get(rid) for rid in state.runs]
            missing = [state.runs[rid].name for rid, v in zip(state.runs, values, strict=True) if v is None]
            if missing:
                reason = (f"{self.metric} ({self.summary}) has no value in {', '.join(missing)}: the run must "
                          f"report it, e.g. benchlab.log(step=..., {self.metric}=...)")
            else:
                value = sum(v for v in values if v is not None) / len(values)
        if value is not None:
            self.study.tell(trial, value)
            self._note_best(trial.number, value)
            self.completed += 1
            self.counted += 1
            kind = "complete"
        elif PRUNED in ended and FAILED not in ended:
            self.study.tell(trial, state=TrialState.PRUNED)
            self.pruned += 1
            self.counted += 1
            kind = "pruned"
        else:
            trial.set_user_attr(FAILURE_ATTR, reason)
            self.study.tell(trial, state=TrialState.FAIL)
            self.failed += 1
            kind = "fail"
        best_number, best_value = self.best
        self._pending.append(TrialEvent("tell", trial.number, dict(state.params), kind, value, reason, best_number,
                                        best_value, self.counted, self.budget))

    def _note_best(self, number: int, value: float) -> None:
        """Keep ``best`` as Optuna's ``best_trial`` has it (the lowest number among equal values),
        without the study's pass over every trial after each one."""
        best_number, best_value = self.best
        if best_number is None or best_value is None:
            self.best = (number, value)
            return
        better = value > best_value if self.maximize else value < best_value
        if better or (value == best_value and number < best_number):
            self.best = (number, value)

    def _value(self, run: Run, final: float | None) -> float | None:
        """A completed run's value: the search metric's final value (which the sweep read as the
        trials' primary metric), or the summary of its curve, read from the run's directory."""
        if self.summary == "final" and final is not None:
            return final if math.isfinite(final) else None
        # Imported only here: a first import (pandas, scipy) costs seconds the trials would wait.
        from benchlab.collect import collect_run
        from benchlab.stats.curves import summarize

        collected = collect_run(run_dir_of(self.folder, run.run_id), [], run.context())
        if self.summary == "final":
            value = collected.finals.get(self.metric)
            return float(value) if value is not None and math.isfinite(value) else None
        curve = collected.series.get(self.metric)
        if curve is None:
            return None
        out = summarize(curve[0], curve[1], self.summary)  # type: ignore[arg-type]
        return out if out is not None and math.isfinite(out) else None


def best_of(study: Any) -> tuple[int | None, float | None]:
    """The best completed trial's number and value (None, None before any)."""
    try:
        best = study.best_trial
    except ValueError:
        return None, None
    return best.number, best.value


class SearchRun:
    """One invocation of ``benchlab search``: continues the spec's study up to its budget.

    ``request_stop`` stops it as ``Sweep.request_stop`` stops a sweep; the trials in flight stay
    running in the study and are asked again by the next invocation.
    """

    def __init__(self, spec: Spec, results_dir: Path | str, *, budget: int | None = None, jobs: int | None = None,
                 backend: str = "local", gpus: str | None = None, summary: str | None = None,
                 on_event: Callable[[SweepEvent], None] | None = None,
                 on_trial: Callable[[TrialEvent], None] | None = None,
                 backend_options: BackendOptions | None = None, code: Any = None):
        if spec.search is None:
            where = spec.path or spec.name
            raise SearchError(spec.name, f"{where}: the spec has no `search` section (see docs/search.md)")
        self.spec = spec
        self.search = spec.search
        self.results_dir = Path(results_dir)
        self.folder = search_folder(results_dir, spec).resolve()
        budget = budget if budget is not None else self.search.trial_budget
        size = grid_size(self.search) if self.search.sampler == "grid" else None
        self.budget = min(budget, size) if size is not None else budget
        self.summary = summary or self.search.metric.summary
        self.on_event = on_event or (lambda event: None)
        self.on_trial = on_trial
        self._sweep_args = {"jobs": jobs, "backend": backend, "gpus": gpus,
                            "backend_options": backend_options, "code": code}
        self.sweep: Sweep | None = None
        self._stop = False

    def request_stop(self) -> None:
        self._stop = True
        if self.sweep is not None:
            self.sweep.request_stop()

    def run(self) -> SearchResult:
        with ResultsLock(self.folder, "benchlab search", name=STUDY_LOCK):
            study = open_study(self.spec, self.folder, self.summary)
            recovered = recover(study)
            tspec = trial_spec(self.spec)
            driver = SearchDriver(tspec, study, self.folder, self.budget, self.summary, self.on_trial,
                                  prune=self.search.pruner.name != "none")

            def on_event(event: SweepEvent) -> None:
                self.on_event(event)
                driver.on_event(event)

            self._record(study)
            sweep_result = None
            if driver.counted < self.budget and not self._stop:
                self.sweep = Sweep(tspec, self.folder, on_event=on_event, feeder=driver, **self._sweep_args)
                try:
                    sweep_result = self.sweep.run()
                finally:
                    driver.notify()
            # Fitted once here, at the search's end (a stopped one too), and kept in the study:
            # whatever reads the study later (the report, the dashboard) fits no model.
            store_importances(study)
            best_number, best_value = best_of(study)
            return SearchResult(
                study=study_name(self.spec), folder=self.folder, budget=self.budget, counted=driver.counted,
                completed=driver.completed, pruned=driver.pruned, failed=driver.failed, recovered=recovered,
                best_number=best_number, best_value=best_value,
                best_params=dict(study.best_trial.params) if best_number is not None else {},
                sweep=sweep_result, metric=self.search.metric.name, goal=goal_of(self.spec), summary=self.summary,
                stopped_on_failures=driver.failed >= driver.max_failed,
            )

    def _record(self, study: Any) -> None:
        """What `benchlab.load(..., search=True)` and the search report need, in the study's ledger."""
        search = self.search
        with Store.create(self.folder) as store:
            store.set_search_record(SearchRecord(
                study=study.study_name, spec_name=self.spec.name, metric=search.metric.name,
                goal=goal_of(self.spec), summary=self.summary, budget=self.budget,
                sampler=search.sampler, pruner=str(search.pruner), base_config=base_config_name(self.spec),
                allow_primary_reason=search.metric.reason if search.metric.allow_primary else None,
                pruning_blind=pruning_blind(self.spec),
                spec_path=str(self.spec.path.resolve()) if self.spec.path else None))
