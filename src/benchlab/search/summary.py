"""What a study holds, in typed records: its trials, the best one, importances, what pruning saved.

Read from the study (``study.journal``) and the study's ledger, both in its folder, while a search
may still be running; the search report and ``benchlab search`` print from it. Reading fits no
model: the params' importances (a fANOVA forest) are fitted once, when a search ends
(:func:`store_importances`), and kept in the study; a summary reads them back. The results table
(:func:`benchlab.results.read`) carries the summaries of a results folder's studies
(:func:`summarize_studies`), so that the benchmark's report renders them without opening a ledger
or importing Optuna.
"""

from __future__ import annotations

import math
import statistics
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchlab.json_types import ConfigValues
from benchlab.ledger import COMPLETED, DB_NAME, PRUNED, SearchRecord, Store
from benchlab.search.study import FAILURE_ATTR, RETRY_OF_ATTR, RUNS_ATTR, read_study


@dataclass(frozen=True)
class TrialRow:
    """One trial: its state (complete, pruned, fail, running, waiting), value, params and runs."""

    number: int
    state: str
    value: float | None
    params: ConfigValues
    runs: tuple[str, ...] = ()  # the runs' names, task/config/seed
    reason: str | None = None
    retry_of: int | None = None
    #: step -> the mean over the trial's runs reported to the pruner at that step
    intermediate: dict[int, float] = field(default_factory=dict)
    seconds: float | None = None  # the runs' run time, summed over their attempts


@dataclass(frozen=True)
class StudySummary:
    """A search study as the report shows it."""

    study: str
    folder: Path
    metric: str
    goal: str
    summary: str
    budget: int | None
    sampler: str | None
    pruner: str | None
    trials: tuple[TrialRow, ...]
    best: TrialRow | None
    importances: dict[str, float] | None
    importance_note: str | None
    #: Steps the pruned trials did not run, as a share of all steps the trials would have run
    #: without pruning (a pruned trial would have run as long as the longest completed one).
    saved_step_share: float | None
    saved_steps: float
    #: Run time pruning saved: for each pruned run, the median completed run's time minus its own.
    saved_seconds: float | None
    allow_primary_reason: str | None = None
    pruning_blind: str | None = None  # why the pruner could never act (search.driver.pruning_blind)

    def count(self, state: str) -> int:
        return sum(1 for t in self.trials if t.state == state)


def summarize_study(folder: Path | str) -> StudySummary:
    """The summary of the study kept in ``folder`` (``<results>/search/<name>``)."""
    folder = Path(folder)
    study = read_study(folder)
    meta = SearchRecord(study="")  # a study folder without its ledger: nothing recorded
    names: dict[str, str] = {}
    seconds: dict[str, float] = {}
    finished: dict[str, str] = {}
    if (folder / DB_NAME).exists():
        with Store.open(folder) as store:
            meta = store.search_record() or meta
            for r in store.runs(current_only=False):
                names[r.run_id] = r.name
                finished[r.run_id] = r.status
            for a in store.attempts():
                if a.duration is not None:
                    seconds[a.run_id] = seconds.get(a.run_id, 0.0) + a.duration
    rows = []
    for t in study.get_trials(deepcopy=False):
        run_ids = list(t.user_attrs.get(RUNS_ATTR) or [])
        spent = [seconds[r] for r in run_ids if r in seconds]
        rows.append(TrialRow(
            number=t.number, state=t.state.name.lower(), value=t.value, params=dict(t.params),
            runs=tuple(names.get(r, r) for r in run_ids), reason=t.user_attrs.get(FAILURE_ATTR),
            retry_of=t.user_attrs.get(RETRY_OF_ATTR), intermediate={int(k): float(v) for k, v in
                                                                     t.intermediate_values.items()},
            seconds=sum(spent) if spent else None))
    best = None
    try:
        number = study.best_trial.number
        best = next(r for r in rows if r.number == number)
    except ValueError:
        pass
    importances, note = stored_importances(study)
    share, saved, saved_s = _savings(rows, study, seconds, finished)
    goal = "max" if study.direction.name == "MAXIMIZE" else "min"
    return StudySummary(
        study=study.study_name, folder=folder, metric=meta.metric or "value", goal=goal,
        summary=str(study.user_attrs.get("benchlab_summary", meta.summary or "final")),
        budget=meta.budget, sampler=meta.sampler, pruner=meta.pruner, trials=tuple(rows),
        best=best,
        importances=importances, importance_note=note, saved_step_share=share, saved_steps=saved,
        saved_seconds=saved_s, allow_primary_reason=meta.allow_primary_reason,
        pruning_blind=meta.pruning_blind)


@dataclass(frozen=True)
class StudySection:
    """A study kept under ``<results>/search/``: its summary, or why it could not be read (a
    search that has not written its study yet, Optuna not installed)."""

    name: str  # the study folder's name
    summary: StudySummary | None
    problem: str | None = None


def summarize_studies(results: Path | str) -> tuple[StudySection, ...]:
    """The studies kept under ``<results>/search/``, by folder name; () when there is none."""
    from benchlab.errors import MissingExtra, SearchError
    from benchlab.names.results_files import SEARCH_DIR
    from benchlab.results import search_folders

    if not (Path(results) / SEARCH_DIR).is_dir():
        return ()
    sections = []
    for folder in search_folders(results):
        try:
            sections.append(StudySection(folder.name, summarize_study(folder)))
        except (SearchError, MissingExtra) as exc:
            # The benchmark's report stands without it and says why the section is empty.
            sections.append(StudySection(folder.name, None, str(exc)))
    return tuple(sections)


#: The study's user attribute that keeps the importances fitted at the search's end.
IMPORTANCES_ATTR = "benchlab_importances"


def store_importances(study: Any) -> None:
    """Fit the params' importances over the study's completed trials and keep them in the study
    (what :func:`stored_importances` reads back): called when a search ends, so that reading a
    study (a report, the dashboard, ``results.read``) never fits a model."""
    from optuna.trial import TrialState

    importances, note = fit_importances(study)
    completed = len(study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,)))
    study.set_user_attr(IMPORTANCES_ATTR, {"importances": importances, "note": note, "completed": completed})


def stored_importances(study: Any) -> tuple[dict[str, float] | None, str | None]:
    """The importances the search's end kept (None and why, when it kept none, or kept them
    over fewer completed trials than the study now holds)."""
    from optuna.trial import TrialState

    completed = len(study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,)))
    kept = study.user_attrs.get(IMPORTANCES_ATTR)
    if not isinstance(kept, dict):
        return None, ("computed when the search ends (the study holds none yet; `benchlab search` "
                      "run again on an ended search computes them)")
    if kept.get("completed") != completed:
        return None, (f"computed when the search ends: those kept were over {kept.get('completed')} completed "
                      f"trials, the study now holds {completed}")
    values = kept.get("importances")
    return ({str(k): float(v) for k, v in values.items()} if isinstance(values, dict) else None,
            str(kept.get("note")) if kept.get("note") is not None else None)


def fit_importances(study: Any) -> tuple[dict[str, float] | None, str | None]:
    """Optuna's fANOVA importances of the params for the completed trials (None and why, when
    there are too few trials or a single param)."""
    from optuna.importance import FanovaImportanceEvaluator, get_param_importances
    from optuna.trial import TrialState

    done = study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,))
    varying = {k for t in done for k in t.params if len({repr(u.params.get(k)) for u in done}) > 1}
    if len(done) < 3 or not varying:
        return None, f"needs at least 3 completed trials with varying params (has {len(done)})"
    try:
        with warnings.catch_warnings():
            # Optuna warns when a param was sampled from several distributions; the values stand.
            warnings.simplefilter("ignore")
            found = get_param_importances(study, evaluator=FanovaImportanceEvaluator(seed=0))
    except (ValueError, RuntimeError) as exc:
        return None, f"Optuna could not compute them: {exc}"
    except ImportError:  # Optuna's fANOVA fits scikit-learn's forests, which the search extra leaves out
        return None, "Optuna's fANOVA needs scikit-learn, which is not installed"
    return {k: float(v) for k, v in found.items()}, "fANOVA (Optuna's FanovaImportanceEvaluator), seed 0"


def _savings(rows: list[TrialRow], study: Any, seconds: dict[str, float],
             finished: dict[str, str]) -> tuple[float | None, float, float | None]:
    complete = [r for r in rows if r.state == "complete" and r.intermediate]
    pruned = [r for r in rows if r.state == "pruned"]
    if not complete:
        return None, 0.0, None
    full = max(max(r.intermediate) for r in complete) + 1  # steps from 0: the number of steps
    runs_of = {r.number: max(1, len(r.runs)) for r in rows}
    saved = sum((full - (max(r.intermediate) + 1 if r.intermediate else 0)) * runs_of[r.number] for r in pruned)
    total = sum(full * runs_of[r.number] for r in complete + pruned)
    share = saved / total if total else None
    by_trial = {t.number: list(t.user_attrs.get(RUNS_ATTR) or []) for t in study.get_trials(deepcopy=False)}
    done_s = [seconds[rid] for r in complete for rid in by_trial.get(r.number, [])
              if rid in seconds and finished.get(rid) == COMPLETED]
    if not done_s:
        return share, float(saved), None
    typical = statistics.median(done_s)
    saved_s = sum(max(0.0, typical - seconds[rid]) for r in pruned for rid in by_trial.get(r.number, [])
                  if rid in seconds and finished.get(rid) == PRUNED)
    return share, float(saved), saved_s if math.isfinite(saved_s) else None
