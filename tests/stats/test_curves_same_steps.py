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
