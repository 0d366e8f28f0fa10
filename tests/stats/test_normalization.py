"""Across-task aggregates: raw scores unless told otherwise, stated in the JSON, and equal to
rliable's on the same numbers."""

import inspect
import json
import warnings

import numpy as np
import pandas as pd
import pytest

from benchlab.stats import analyze
from benchlab_testing import run_cli

# Already-normalised scores of two configs on three tasks, five seeds each.
RNG = np.random.default_rng(8)
NORMED = {"a": RNG.uniform(0.2, 0.9, size=(5, 3)), "b": RNG.uniform(0.4, 1.1, size=(5, 3))}
TASKS = ["pong", "breakout", "qbert"]


def _table(scores: dict[str, np.ndarray]) -> pd.DataFrame:
    return pd.DataFrame([{"task": TASKS[t], "config": c, "seed": s, "value": float(m[s, t])}
                         for c, m in scores.items() for s in range(m.shape[0])
                         for t in range(m.shape[1])])


@pytest.fixture
def rliable_metrics():
    pytest.importorskip("rliable")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from arch.bootstrap import IIDBootstrap  # noqa: F401  (rliable imports it)
        from rliable import metrics
    assert "scores" in inspect.signature(metrics.aggregate_iqm).parameters
    return metrics


def test_aggregates_of_already_normalised_scores_equal_rliables(rliable_metrics):
    # The scores are normalised already: declared so by the metric's range [0, 1].
    out = analyze(_table(NORMED), reps=500, ranges={"value": (0.0, 1.0)}).to_dict()
    rows = {r["config"]: r for r in out["aggregate"]}
    for config, scores in NORMED.items():
        assert rows[config]["iqm"] == pytest.approx(rliable_metrics.aggregate_iqm(scores), rel=1e-12)
        assert rows[config]["mean"] == pytest.approx(rliable_metrics.aggregate_mean(scores))
        assert rows[config]["median"] == pytest.approx(rliable_metrics.aggregate_median(scores))
        assert rows[config]["optimality_gap"] == pytest.approx(
            rliable_metrics.aggregate_optimality_gap(scores))
    assert out["normalization"]["method"] == "none"
    assert out["normalization"]["tasks"]["pong"] == {"source": "raw", "low": 0.0, "high": 1.0}


def test_a_configs_aggregate_does_not_change_when_another_config_is_added():
    alone = analyze(_table({"a": NORMED["a"]}), reps=500).to_dict()["aggregate"][0]
    both = analyze(_table(NORMED), reps=500).to_dict()["aggregate"][0]
    assert alone["config"] == both["config"] == "a"
    assert alone["iqm"] == pytest.approx(both["iqm"])


def test_normalize_observed_keeps_the_min_max_normalisation_by_name():
    table = _table(NORMED)
    out = analyze(table, reps=500, normalize="observed").to_dict()
    lo, hi = table.loc[table["task"] == "pong", "value"].agg(["min", "max"])
    assert out["normalization"]["method"] == "observed"
    assert out["normalization"]["tasks"]["pong"] == {"source": "observed", "low": lo, "high": hi}
    b = next(r for r in out["aggregate"] if r["config"] == "b")
    expected = np.mean([(NORMED["b"][:, t] - table.loc[table["task"] == name, "value"].min())
                        / np.ptp(table.loc[table["task"] == name, "value"]) for t, name in
                        enumerate(TASKS)])
    assert b["mean"] == pytest.approx(expected)
    assert any("depends on which others are compared" in w for w in out["warnings"])


def test_raw_scores_on_scales_10x_apart_warn_and_suggest_references():
    scaled = {c: m * np.array([1.0, 1.0, 40.0]) for c, m in NORMED.items()}
    out = analyze(_table(scaled), reps=500).to_dict()
    text = "\n".join(out["warnings"])
    assert "aggregate: raw scores (no reference scores); task scales differ by" in text
    assert "on qbert" in text and "give reference scores" in text
    assert not any("task scales" in w for w in analyze(_table(NORMED), reps=500).to_dict()["warnings"])


def test_references_still_normalise_and_unreferenced_tasks_are_not_mixed_in():
    refs = {"pong": (0.0, 2.0), "breakout": (0.0, 2.0)}
    out = analyze(_table(NORMED), reps=500, references=refs).to_dict()
    assert out["normalization"]["method"] == "references"
    assert set(out["normalization"]["tasks"]) == {"pong", "breakout"}
    a = next(r for r in out["aggregate"] if r["config"] == "a")
    assert a["mean"] == pytest.approx(NORMED["a"][:, :2].mean() / 2)
    assert any("no reference scores for qbert while other tasks have them; left out" in w
               for w in out["warnings"])


def test_raw_scores_have_no_optimality_gap_unless_the_metric_is_declared_in_0_1():
    # Raw returns of 0-500 (CartPole-like): "shortfall below 1" means nothing there.
    returns = {c: 100 + 400 * m for c, m in NORMED.items()}
    out = analyze(_table(returns), reps=500).to_dict()
    assert all(r["optimality_gap"] is None and r["optimality_gap_ci_low"] is None
               for r in out["aggregate"])
    assert all(r["iqm"] is not None for r in out["aggregate"])
    (why,) = [w for w in out["warnings"] if "optimality_gap is null" in w]
    assert "raw scores (no reference scores) without a declared range [0, 1]" in why
    # Another range is no licence either; references are.
    other = analyze(_table(returns), reps=500, ranges={"value": (0.0, 500.0)}).to_dict()
    assert all(r["optimality_gap"] is None for r in other["aggregate"])
    refs = {t: (0.0, 500.0) for t in TASKS}
    normed = analyze(_table(returns), reps=500, references=refs).to_dict()
    a = next(r for r in normed["aggregate"] if r["config"] == "a")
    expected = 1 - np.minimum(returns["a"] / 500.0, 1).mean()
    assert a["optimality_gap"] == pytest.approx(expected)
    assert not any("optimality_gap is null" in w for w in normed["warnings"])


def test_raw_scores_of_a_metric_to_minimise_have_no_optimality_gap():
    out = analyze(_table(NORMED), goal="min", reps=500).to_dict()
    assert all(r["optimality_gap"] is None for r in out["aggregate"])
    assert all(r["iqm"] is not None for r in out["aggregate"])


def test_the_cli_takes_normalize_and_states_it(tmp_path):
    _table(NORMED).to_csv(tmp_path / "scores.csv", index=False)
    res = run_cli("analyze", "scores.csv", "--normalize", "observed", "--reps", "200", "--json",
                  cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout)["normalization"]["method"] == "observed"
    res = run_cli("analyze", "scores.csv", "--reps", "200", cwd=tmp_path)
    assert "Across tasks (raw scores" in res.stdout
    bad = run_cli("analyze", "scores.csv", "--normalize", "zscore", cwd=tmp_path)
    assert bad.returncode == 2
    assert "Invalid value for '--normalize'" in bad.stderr and "'zscore' is not one of" in bad.stderr
