import numpy as np
import pytest

from benchlab.stats import align, common_grid, summarize

STEPS = np.array([0.0, 10.0, 20.0, 30.0, 40.0])
VALUES = np.array([0.0, 2.0, 3.0, 5.0, 4.0])


def test_final_is_the_mean_of_the_last_k_points():
    assert summarize(STEPS, VALUES, "final") == 4.0
    assert summarize(STEPS, VALUES, "final", k=2) == 4.5


def test_auc_is_the_trapezoid_area_over_the_step_range():
    # Trapezoids of width 10: (0+2)/2 + (2+3)/2 + (3+5)/2 + (5+4)/2 = 12 -> area 120 over 40 steps.
    assert summarize(STEPS, VALUES, "auc") == pytest.approx(3.0)
    # A constant curve's normalised AUC is that constant.
    assert summarize(STEPS, np.full(5, 7.0), "auc") == pytest.approx(7.0)


def test_max_and_slope_over_the_last_fraction():
    assert summarize(STEPS, VALUES, "max") == 5.0
    # Last 50% of [0, 40] is steps 20, 30, 40 with values 3, 5, 4: slope = 0.05 (polyfit).
    expected = np.polyfit([20.0, 30.0, 40.0], [3.0, 5.0, 4.0], 1)[0]
    assert summarize(STEPS, VALUES, "slope", fraction=0.5) == pytest.approx(expected)


def test_unsorted_points_and_nans_are_handled():
    order = np.array([3, 0, 4, 1, 2])
    v = VALUES[order].copy()
    assert summarize(STEPS[order], v, "auc") == pytest.approx(3.0)
    assert summarize(np.append(STEPS, 50.0), np.append(VALUES, np.nan), "final") == 4.0


def test_undefined_summaries_are_none():
    assert summarize(np.array([5.0]), np.array([1.0]), "auc") is None
    assert summarize(np.array([5.0]), np.array([1.0]), "slope") is None
    assert summarize(np.array([]), np.array([]), "final") is None
    with pytest.raises(ValueError):
        summarize(STEPS, VALUES, "median")  # type: ignore[arg-type]


def test_curves_on_different_steps_align_by_linear_interpolation():
    a = (np.array([0.0, 10.0, 20.0]), np.array([0.0, 1.0, 2.0]))
    b = (np.array([5.0, 15.0, 25.0]), np.array([10.0, 20.0, 30.0]))
    assert common_grid([a[0], b[0]]) == pytest.approx([5.0, 10.0, 15.0, 20.0])
    grid, values = align([a, b])
    assert values[0] == pytest.approx([0.5, 1.0, 1.5, 2.0])
    assert values[1] == pytest.approx([10.0, 15.0, 20.0, 25.0])
    _, on_given = align([a], grid=np.array([2.0, 12.0]))
    assert on_given[0] == pytest.approx([0.2, 1.2])
