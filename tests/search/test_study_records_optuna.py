"""A study keeps the Optuna version and the sampler settings it ran with: Optuna's defaults change
between releases, and a study resumed under another release says so."""

from __future__ import annotations

import warnings

import optuna
import pytest
from searchkit import write_search_bench

from benchlab.search.study import OPTUNA_ATTR, open_study, read_study, sampler_settings
from benchlab.spec import load_spec


def test_the_sampler_settings_are_the_constructors_own():
    # multivariate is flagged experimental in Optuna 4 (and the suite turns warnings into errors); the setting
    # is what is under test here, not the flag's status.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        sampler = optuna.samplers.TPESampler(seed=3, n_startup_trials=7, multivariate=True)
    settings = sampler_settings(sampler, seed=3)
    assert settings["sampler"] == "TPESampler"
    assert settings["settings"]["n_startup_trials"] == 7
    assert settings["settings"]["multivariate"] is True and settings["settings"]["seed"] == 3


@pytest.mark.parametrize("sampler", ["tpe", "random"])
def test_a_study_records_the_optuna_version_and_its_samplers_settings(tmp_path, sampler):
    spec_path = write_search_bench(tmp_path)
    spec_path.write_text(spec_path.read_text().replace("  pruner: none", f"  pruner: none\n  sampler: {sampler}"))
    spec = load_spec(spec_path)
    folder = tmp_path / "study"
    folder.mkdir()
    open_study(spec, folder, "final")
    open_study(spec, folder, "final")  # opened again under the same release: recorded once
    (entry,) = read_study(folder).user_attrs[OPTUNA_ATTR]
    assert entry["version"] == optuna.__version__
    assert entry["sampler"] == {"tpe": "TPESampler", "random": "RandomSampler"}[sampler]
    assert "seed" in entry["settings"] and None not in (entry["settings"].get("n_startup_trials", 0),)


def test_a_study_resumed_under_another_optuna_release_keeps_both_records(tmp_path, monkeypatch):
    spec = load_spec(write_search_bench(tmp_path))
    folder = tmp_path / "study"
    folder.mkdir()
    open_study(spec, folder, "final")
    monkeypatch.setattr(optuna, "__version__", "4.99.0")
    open_study(spec, folder, "final")
    versions = [e["version"] for e in read_study(folder).user_attrs[OPTUNA_ATTR]]
    assert versions[-1] == "4.99.0" and len(versions) == 2
