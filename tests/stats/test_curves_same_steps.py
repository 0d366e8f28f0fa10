"""Alignment of curves that were all logged at the same steps (the usual case)."""

from __future__ import annotations

import numpy as np

from benchlab.stats import align, common_grid


def test_curves_logged_at_the_same_steps_keep_their_values_exactly():
    steps = np.array([0.0, 10.0, 20.0, 35.0])
    a, b = np.array([0.1, 0.2, 0.7, 0.3]), np.array([1.0, 3.0, 2.0, 0.0])
    grid, values = align([(steps, a), (steps.copy(), b)])
    assert grid.tolist() == [0.0, 10.0, 20.0, 35.0]
    assert values.tolist() == [[0.1, 0.2, 0.7, 0.3], [1.0, 3.0, 2.0, 0.0]]


def test_repeated_steps_are_one_grid_point_even_when_every_curve_repeats_them():
    steps = np.array([0.0, 1.0, 1.0, 2.0])
    assert common_grid([steps, steps]).tolist() == [0.0, 1.0, 2.0]


def test_out_of_order_and_missing_points_are_cleaned_before_aligning():
    # b: steps out of order and one NaN value; sorted, it is 0 -> 0, 10 -> 5, 20 -> 10.
    a = (np.array([0.0, 10.0, 20.0]), np.array([0.0, 1.0, 2.0]))
    b = (np.array([20.0, 0.0, 15.0, 10.0]), np.array([10.0, 0.0, np.nan, 5.0]))
    grid, values = align([a, b])
    assert grid.tolist() == [0.0, 10.0, 20.0]
    assert values.tolist() == [[0.0, 1.0, 2.0], [0.0, 5.0, 10.0]]


def _interpolated(runs: list[tuple[str, int, np.ndarray, np.ndarray]], grid: np.ndarray) -> np.ndarray:
    """Each run's curve interpolated onto ``grid`` one by one, as the general path aligns it."""
    return np.stack([np.interp(grid, s, v) for _, _, s, v in runs])


def test_a_set_logged_at_shared_steps_is_what_interpolating_each_run_gives_bit_for_bit():
    # 1,000 shared steps: thinned to MAX_GRID of them, every one a logged step; a negative zero,
    # which a formula (slope * 0 + value), not the logged value itself, would turn into +0.
    from benchlab.stats.curves import MAX_GRID, curve_set

    rng = np.random.default_rng(3)
    steps = np.cumsum(rng.uniform(0.5, 2.0, size=1000))
    runs = [(f"c{i % 3}", i, steps.copy(), rng.normal(size=1000)) for i in range(9)]
    runs[5][3][-1] = -0.0
    got = curve_set("loss", "t", runs)
    assert got is not None and got.grid.shape[0] == MAX_GRID
    assert set(got.grid.tolist()) <= set(steps.tolist())
    expected = _interpolated(runs, got.grid)
    for config, rows in got.values.items():
        mine = [i for i, r in enumerate(runs) if r[0] == config]
        assert rows.tobytes() == expected[mine].tobytes()
        assert got.seeds[config] == mine
    assert np.signbit(got.values["c2"][1][-1])  # run 5 is c2's second run: -0.0 kept


def test_a_set_with_a_nan_or_other_steps_takes_the_general_path():
    from benchlab.stats.curves import curve_set

    steps = np.array([0.0, 1.0, 2.0])
    other = np.array([0.0, 1.5, 2.0])
    nan = curve_set("m", "t", [("a", 0, steps, np.array([0.0, np.nan, 2.0])), ("a", 1, steps, np.ones(3))])
    assert nan is not None and nan.values["a"].tolist() == [[0.0, 1.0, 2.0], [1.0, 1.0, 1.0]]
    mixed = curve_set("m", "t", [("a", 0, steps, np.array([0.0, 1.0, 2.0])), ("a", 1, other, np.zeros(3))])
    assert mixed is not None and mixed.grid.tolist() == [0.0, 1.0, 1.5, 2.0]
    assert mixed.values["a"][0].tolist() == [0.0, 1.0, 1.5, 2.0]
