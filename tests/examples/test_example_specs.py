"""The bundled example specs load, and expand to the number of runs their READMEs promise."""

from __future__ import annotations

from pathlib import Path

import pytest

from benchlab.spec import load_spec

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


@pytest.mark.parametrize(
    ("spec_file", "n_tasks", "n_configs", "n_seeds", "n_runs"),
    [
        # 3 datasets x 3 classifiers x 5 seeds
        ("quickstart/benchlab.yaml", 3, 3, 5, 45),
        # 2 episode caps x 3 agents x 5 seeds
        ("cartpole/benchlab.yaml", 2, 3, 5, 30),
    ],
)
def test_example_spec_expands_to_the_stated_number_of_runs(
    spec_file: str, n_tasks: int, n_configs: int, n_seeds: int, n_runs: int
) -> None:
    spec = load_spec(EXAMPLES / spec_file)
    assert len(spec.tasks) == n_tasks
    assert len(spec.configs) == n_configs
    assert len(spec.seed_list) == n_seeds
    assert len(spec.tasks) * len(spec.configs) * len(spec.seed_list) == n_runs
    assert spec.baseline in {c.name for c in spec.configs}


def test_quickstart_spec_reads_accuracy_and_fit_time_from_benchlab_files() -> None:
    spec = load_spec(EXAMPLES / "quickstart/benchlab.yaml")
    assert (spec.metrics.primary.name, spec.metrics.primary.goal) == ("accuracy", "max")
    assert ("fit_time", "min") in {(m.name, m.goal) for m in spec.metrics.secondary}
    # No `from:` anywhere: train.py writes metrics.json / metrics.jsonl itself.
    assert all(m.source is None for m in spec.metrics.all)
    assert spec.env["OMP_NUM_THREADS"] == "1"
    assert spec.resources.cpus == 1
    assert {t.name: t.target for t in spec.tasks} == {
        "digits": 0.95, "wine": 0.95, "breast_cancer": 0.95}


def test_quickstart_epochs_variable_is_overridable() -> None:
    spec = load_spec(EXAMPLES / "quickstart/benchlab.yaml", overrides=["epochs=3"])
    assert spec.variables["epochs"] == 3
    assert "after 3 epochs" in spec.description  # ${epochs} in the description follows -s
    assert "{epochs}" in (spec.command or "")


def test_cartpole_spec_reads_scores_from_the_log_with_regexes() -> None:
    spec = load_spec(EXAMPLES / "cartpole/benchlab.yaml")
    primary = spec.metrics.primary
    assert (primary.name, primary.goal) == ("total_reward_ma", "max")
    assert primary.source is not None and primary.source.kind == "regex"
    assert primary.source.options.series is True
    fps = next(m for m in spec.metrics.secondary if m.name == "fps")
    assert fps.source is not None and fps.source.kind == "regex"
    assert {t.name: t.target for t in spec.tasks} == {"cartpole-200": 195, "cartpole-500": 475}
