"""The best trial a search reports as it goes is the one Optuna's ``best_trial`` names.

The driver keeps the best trial itself (Optuna's ``best_trial`` goes over every trial after each
one); the test tells a real study, kept as a search keeps it (``journal_storage``), the same
values, with ties told out of order, and asks it. (Optuna's in-memory storage breaks ties the
other way, by the first told: the driver follows the storage searches use.)"""

from __future__ import annotations

import optuna
import pytest
from searchkit import write_search_bench

from benchlab.search.driver import SearchDriver, trial_spec
from benchlab.search.study import journal_storage
from benchlab.spec import load_spec


@pytest.mark.parametrize("direction", ["maximize", "minimize"])
def test_the_best_trial_each_tell_reports_is_optunas_best_trial(tmp_path, direction):
    spec = load_spec(write_search_bench(tmp_path))
    study = optuna.create_study(direction=direction, storage=journal_storage(tmp_path / "study"))
    driver = SearchDriver(trial_spec(spec), study, tmp_path, budget=20, summary="final")
    assert driver.best == (None, None)
    values = [0.5, 0.2, 0.5, 0.9, 0.9, 0.1, 0.1]
    trials = [study.ask() for _ in values]
    # trial 4 ties trial 3 and is told first; trial 6 ties trial 5 and is told first
    for i in [1, 0, 4, 2, 3, 6, 5]:
        study.tell(trials[i], values[i])
        driver._note_best(trials[i].number, values[i])
        assert driver.best == (study.best_trial.number, study.best_trial.value)
    assert driver.best == ((3, 0.9) if direction == "maximize" else (5, 0.1))


def test_a_resumed_search_starts_from_the_best_trial_its_study_holds(tmp_path):
    spec = load_spec(write_search_bench(tmp_path))
    study = optuna.create_study(direction="maximize", storage=journal_storage(tmp_path / "study"))
    for value in (0.3, 0.7, 0.1):
        study.tell(study.ask(), value)
    driver = SearchDriver(trial_spec(spec), study, tmp_path, budget=20, summary="final")
    assert driver.best == (1, 0.7)
    driver._note_best(5, 0.6)
    assert driver.best == (1, 0.7)
