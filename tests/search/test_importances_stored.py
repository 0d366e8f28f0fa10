"""The params' importances are fitted once, when a search ends, and kept in the study: reading a
study (the report, the dashboard, results.read) fits no model."""

from __future__ import annotations

from pathlib import Path

import pytest

from benchlab_testing import skip_unless_installed

optuna = pytest.importorskip("optuna")
skip_unless_installed("sklearn")

from benchlab.search.study import journal_storage  # noqa: E402
from benchlab.search.summary import (  # noqa: E402
    IMPORTANCES_ATTR,
    fit_importances,
    store_importances,
    summarize_study,
)


def _study(folder: Path, trials: list[tuple[float, float]]) -> optuna.Study:
    study = optuna.create_study(storage=journal_storage(folder), study_name="b:s", direction="maximize")
    for x, lr in trials:
        study.enqueue_trial({"x": x, "lr": lr})
        trial = study.ask()
        trial.suggest_float("x", 0.0, 1.0)
        trial.suggest_float("lr", 1e-5, 1e-1, log=True)
        study.tell(trial, -(x - 0.5) ** 2)
    return study


TRIALS = [(0.1, 1e-3), (0.4, 1e-2), (0.9, 1e-4), (0.6, 3e-3)]


@pytest.fixture
def no_fitting(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("a model was fitted while reading a study")

    monkeypatch.setattr(optuna.importance, "get_param_importances", refuse)


def test_a_summary_reads_the_importances_kept_at_the_searchs_end_without_fitting(tmp_path: Path,
                                                                                   monkeypatch: pytest.MonkeyPatch):
    study = _study(tmp_path, TRIALS)
    fitted, note = fit_importances(study)
    store_importances(study)
    assert study.user_attrs[IMPORTANCES_ATTR]["completed"] == 4

    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("a model was fitted while reading a study")

    monkeypatch.setattr(optuna.importance, "get_param_importances", refuse)
    summary = summarize_study(tmp_path)
    assert fitted is not None and set(fitted) == {"x", "lr"}
    assert summary.importances == pytest.approx(fitted) and summary.importance_note == note


def test_a_study_whose_search_has_not_ended_has_none_and_says_when_they_come(tmp_path: Path, no_fitting: None):
    _study(tmp_path, TRIALS)
    summary = summarize_study(tmp_path)
    assert summary.importances is None
    assert summary.importance_note is not None and "when the search ends" in summary.importance_note


def test_importances_kept_over_fewer_trials_than_the_study_holds_are_not_shown(tmp_path: Path):
    study = _study(tmp_path, TRIALS)
    store_importances(study)
    study.enqueue_trial({"x": 0.5, "lr": 1e-3})
    trial = study.ask()
    trial.suggest_float("x", 0.0, 1.0)
    trial.suggest_float("lr", 1e-5, 1e-1, log=True)
    study.tell(trial, 0.0)
    summary = summarize_study(tmp_path)
    assert summary.importances is None
    assert "over 4 completed trials, the study now holds 5" in (summary.importance_note or "")
