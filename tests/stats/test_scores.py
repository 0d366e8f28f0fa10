import numpy as np
import pandas as pd
import pytest

from benchlab.stats import performance_profile, score_matrices

RUNS = pd.DataFrame(
    [
        # task, config, seed, value: error rates (lower is better), seeds listed out of order
        ("mnist", "a", 2, 0.10), ("mnist", "a", 1, 0.20), ("mnist", "b", 1, 0.05),
        ("mnist", "b", 2, 0.15), ("cifar", "a", 1, 0.40), ("cifar", "a", 2, 0.30),
        ("cifar", "b", 1, 0.35), ("cifar", "b", 2, np.nan), ("svhn", "a", 1, 0.3),
    ],
    columns=["task", "config", "seed", "value"],
)


def test_rows_follow_seeds_and_references_orient_a_min_goal():
    m = score_matrices(RUNS, goal="min", references={"mnist": (1.0, 0.0), "cifar": (1.0, 0.0)})
    assert m.tasks == ["mnist", "cifar"]  # svhn lacks config b
    # error e -> (e - 1) / (0 - 1) = 1 - e; row 0 is seed 1.
    assert m.scores["a"] == pytest.approx(np.array([[0.8, 0.6], [0.9, 0.7]]))
    assert m.scores["b"][:, 0] == pytest.approx([0.95, 0.85])
    assert m.scores["b"][0, 1] == pytest.approx(0.65) and np.isnan(m.scores["b"][1, 1])
    assert any("svhn lack some config" in w for w in m.warnings)
    assert not any("no reference" in w for w in m.warnings)


def test_normalize_observed_maps_the_worst_to_zero_and_the_best_to_one():
    m = score_matrices(RUNS[RUNS["task"] == "mnist"], goal="min", normalize="observed")
    # worst 0.20 -> 0, best 0.05 -> 1
    assert m.scores["a"][:, 0] == pytest.approx([0.0, (0.20 - 0.10) / 0.15])
    assert m.scores["b"][:, 0] == pytest.approx([1.0, (0.20 - 0.15) / 0.15])
    assert any("no reference scores for mnist" in w for w in m.warnings)
    profile, _, _ = performance_profile(m.scores["b"], np.array([0.5]), reps=100)
    assert profile == pytest.approx([0.5])
