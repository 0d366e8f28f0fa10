import numpy as np
import pandas as pd
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


def _curve_table(rows: list[tuple]) -> pd.DataFrame:
    return pd.DataFrame(rows, columns=["task", "config", "seed", "metric", "step", "value"])


def test_a_run_logging_a_step_twice_averages_the_step_whatever_the_row_order():
    from benchlab.stats import reduce_runs, validate_table

    # Run A/s0 was resumed after step 2 and logged steps 1 and 2 again; B/s0 is a plain run.
    a = [("t", "A", 0, "m", 0, 0.0), ("t", "A", 0, "m", 1, 1.0), ("t", "A", 0, "m", 2, 1.0),
         ("t", "A", 0, "m", 1, 0.5), ("t", "A", 0, "m", 2, 0.5)]
    b = [("t", "B", 0, "m", 2, 0.2), ("t", "B", 0, "m", 0, 0.0), ("t", "B", 0, "m", 1, 0.1)]
    interleaved = [b[0], a[0], a[1], b[1], a[2], a[3], b[2], a[4]]
    # Rows of one run in another order too (a CSV sorted by value, a merge): "the last written
    # point" would be 1.0 here and 0.5 above.
    shuffled = [a[4], a[3], b[0], a[2], a[1], b[1], a[0], b[2]]
    for rows in (a + b, b + a, interleaved, shuffled):
        final, notes = reduce_runs(validate_table(_curve_table(rows)), "final")
        auc, _ = reduce_runs(validate_table(_curve_table(rows)), "auc")
        value = dict(zip(final["config"], final["value"], strict=True))
        area = dict(zip(auc["config"], auc["value"], strict=True))
        assert value["A"] == 0.75  # the mean of step 2's two points, 1.0 and 0.5
        # Trapezoids over (0, 0), (1, 0.75), (2, 0.75), divided by the 2 steps: (0.375 + 0.75) / 2.
        assert area["A"] == pytest.approx(0.5625)
        assert area["B"] == pytest.approx((0.05 + 0.15) / 2)
        assert any("2 duplicate curve point(s)" in n and "t/A/s0 m" in n and "averaged" in n
                   for n in notes)


def test_a_curve_cut_short_is_named_with_both_choices_under_the_final_summary():
    from benchlab.stats import analyze

    rows = []
    for seed in range(5):
        for config, offset in (("A", 0.0), ("B", 0.1)):
            last = 30 if (config, seed) == ("B", 0) else 100
            rows += [("t", config, seed, "m", step, step / 100 + offset + seed / 100)
                     for step in range(0, last + 1, 10)]
    out = analyze(_curve_table(rows), baseline="A", reps=200)
    (note,) = [w for w in out.warnings if "stopped before step 100" in w]
    assert "B/s0 (last step 30)" in note and "--align own" in note and "--align common" in note
    common = analyze(_curve_table(rows), baseline="A", reps=200, align="common")
    (row,) = common.comparisons
    assert row.mean_diff == pytest.approx(0.1)  # B is +0.1 at every step of every seed
