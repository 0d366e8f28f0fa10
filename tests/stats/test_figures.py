"""The numbers of the report's CV-vs-N, profile and radar figures: computed in stats (the analysis'
``figures``), on first use, so that a report without figures never bootstraps a profile."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from benchlab.stats import performance_profile
from benchlab.stats.figures import PROFILE_POINTS, PROFILE_REPS, PrimaryFigures


def _used(values: dict[tuple[str, str], list[float]]) -> pd.DataFrame:
    rows = [(t, c, s, "score", v) for (t, c), vs in values.items() for s, v in enumerate(vs)]
    rows.append(("t1", "a", 0, "other", 9.0))  # another metric: not the figures'
    return pd.DataFrame(rows, columns=["task", "config", "seed", "metric", "value"])


def _figures(values: dict[tuple[str, str], list[float]], **kw: object) -> PrimaryFigures:
    return PrimaryFigures("score", "max", _used(values), ("t1", "t2"), ("b", "a"), seed=3, **kw)  # type: ignore[arg-type]


def test_the_cv_of_the_mean_is_the_closed_form_per_task_with_its_median_and_range_over_tasks():
    figures = _figures({("t1", "a"): [1.0, 3.0, 2.0], ("t2", "a"): [4.0, 8.0, 6.0], ("t1", "b"): [5.0, 5.5, 6.0]})
    cv = figures.cv
    assert cv is not None and cv.ns.tolist() == [1, 2, 3] and cv.n_tasks == 2
    assert [c.config for c in cv.configs] == ["b", "a"]  # the spec's order
    a = cv.configs[1]
    # s / (sqrt(N) |mean|) in percent: t1 s = 1, mean 2; t2 s = 2, mean 6.
    by_hand = np.array([[100 * 1 / (np.sqrt(n) * 2) for n in (1, 2, 3)],
                        [100 * 2 / (np.sqrt(n) * 6) for n in (1, 2, 3)]])
    np.testing.assert_allclose(a.percent, by_hand)
    np.testing.assert_allclose(a.line, np.median(by_hand, axis=0))
    np.testing.assert_allclose(a.low, by_hand.min(axis=0))
    np.testing.assert_allclose(a.high, by_hand.max(axis=0))
    b = cv.configs[0]  # one task: its own row, no range
    assert b.low is None and b.high is None and b.line.tolist() == b.percent[0].tolist()


def test_profiles_are_the_fraction_of_runs_above_each_threshold_with_their_bootstrap_band():
    values = {("t1", "a"): [0.0, 1.0, 2.0], ("t1", "b"): [4.0, 3.0, 2.0],
              ("t2", "a"): [10.0, 30.0, 20.0], ("t2", "b"): [20.0, 20.0, 30.0]}
    figures = _figures(values)
    profiles = figures.profiles
    assert profiles is not None and profiles.banded and profiles.tasks == ("t1", "t2")
    # No references: t1 by its worst (0) and best (4) run, t2 by 10 and 30.
    a = np.array([[0.0, 0.0], [0.25, 1.0], [0.5, 0.5]])
    np.testing.assert_allclose(figures.normalised.scores["a"], a)
    assert profiles.taus.shape == (PROFILE_POINTS,)
    assert (profiles.taus[0], profiles.taus[-1]) == pytest.approx((-0.02, 1.02))
    point, low, high = performance_profile(a, profiles.taus, reps=PROFILE_REPS, seed=3)
    got = {p.config: p for p in profiles.configs}["a"]
    np.testing.assert_array_equal(got.point, point)
    np.testing.assert_array_equal(got.low, low)
    np.testing.assert_array_equal(got.high, high)
    # At τ = 0.4: t1 has 1 of 3 runs above (0.5), t2 has 2 of 3 (1.0, 0.5): the mean of 1/3 and 2/3.
    at = int(np.searchsorted(profiles.taus, 0.4))
    assert got.point[at] == pytest.approx(0.5)


def test_one_run_each_without_references_draws_no_profile_and_says_why():
    figures = _figures({("t1", "a"): [1.0], ("t1", "b"): [2.0]})
    assert figures.profiles is None
    assert figures.profile_omitted is not None and "t1 has no reference scores" in figures.profile_omitted
    referenced = _figures({("t1", "a"): [1.0], ("t1", "b"): [2.0]}, references={"t1": (0.0, 4.0)})
    assert referenced.profiles is not None and not referenced.profiles.banded


def test_the_radar_is_each_configs_mean_normalised_score_per_task():
    values = {(t, c): [float(i + j), float(i + j + 2)] for i, t in enumerate(("t1", "t2", "t3"))
              for j, c in enumerate(("a", "b", "c"))}
    figures = PrimaryFigures("score", "max", _used(values), ("t1", "t2", "t3"), ("a", "b", "c"),
                             references={t: (0.0, 10.0) for t in ("t1", "t2", "t3")})
    radar = figures.radar
    assert radar is not None
    np.testing.assert_allclose(dict(radar.configs)["b"], [(1 + 3) / 2 / 10, (2 + 4) / 2 / 10, (3 + 5) / 2 / 10])
