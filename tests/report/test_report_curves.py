"""Learning curves for the report: the results table's curves, aligned by stats, banded."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from report_world import build_store_world
from scipy import stats as sps

from benchlab.plan import Run
from benchlab.results import Curves, info, load, read
from benchlab.stats.curves import MAX_GRID, curve_sets, mean_band
from benchlab.stats.results_analysis import PrimaryFigures


def _ledger(folder: Path, curves: dict[tuple[str, int], tuple[list[float], list[float]]]) -> None:
    from benchlab.ledger import Store

    with Store.create(folder) as store:
        store._set_meta(name="c", primary="score", goals={"score": "max"}, tasks=["t"],
                       configs=sorted({c for c, _ in curves}))
        runs = [Run(run_id=f"{c}{s}", benchmark="c", task="t", config=c, seed=s, params={},
                    command="x") for c, s in curves]
        store.register(runs)
        for run in runs:
            steps, vals = curves[(run.config, run.seed)]
            attempt, _ = store.start_attempt(run.run_id, host="h")
            store.finish_attempt(attempt, run.run_id, status="completed", run_status="completed",
                                 metrics={"score": vals[-1]},
                                 series={"score": (np.array(steps), np.array(vals))})


def test_curves_on_different_steps_are_interpolated_on_the_shared_range(tmp_path: Path):
    # a/0 logs at 0, 10, 20, 30; a/1 at 0, 15, 30, 45; b/0 at 5, 25 (with one step out of order).
    _ledger(tmp_path, {
        ("a", 0): ([0, 10, 20, 30], [0.0, 1.0, 2.0, 3.0]),
        ("a", 1): ([0, 15, 30, 45], [0.0, 3.0, 6.0, 9.0]),
        ("b", 0): ([25, 5], [4.0, 0.0]),
    })
    (cs,) = curve_sets(read(tmp_path).curves)
    assert (cs.metric, cs.task) == ("score", "t")
    # Shared range [5, 25]; grid = every logged step inside it.
    assert cs.grid.tolist() == [5, 10, 15, 20, 25]
    # a/0 is value = step / 10; a/1 is value = step / 5; b/0 is value = (step - 5) / 5.
    np.testing.assert_allclose(cs.values["a"], [[0.5, 1, 1.5, 2, 2.5], [1, 2, 3, 4, 5]])
    np.testing.assert_allclose(cs.values["b"], [[0, 1, 2, 3, 4]])
    assert cs.seeds == {"a": [0, 1], "b": [0]}


def test_a_long_grid_is_thinned_to_steps_of_the_common_grid_for_drawing(tmp_path: Path):
    # a logs the even steps 0..1998, b the odd steps 1..1999: their common grid is every step
    # from 1 to 1998. Both curves are 2 * step, so interpolation is exact at any step.
    even, odd = np.arange(0, 2000, 2.0), np.arange(1, 2000, 2.0)
    _ledger(tmp_path, {("a", 0): (even.tolist(), (2 * even).tolist()),
                       ("b", 0): (odd.tolist(), (2 * odd).tolist())})
    (cs,) = curve_sets(read(tmp_path).curves)
    assert len(cs.grid) <= MAX_GRID
    assert cs.grid[0] == 1 and cs.grid[-1] == 1998
    assert set(cs.grid.tolist()) <= set(range(1, 1999))  # no step the runs did not log
    np.testing.assert_allclose(cs.values["a"][0], 2 * cs.grid)
    np.testing.assert_allclose(cs.values["b"][0], 2 * cs.grid)


def test_the_table_read_holds_its_curves_and_drawing_them_needs_no_ledger(tmp_path: Path):
    # results.read is the one read step: the curves come with the table, so a report drawn
    # later (or in another process) sees the same state, even with the ledger gone.
    _ledger(tmp_path, {("a", 0): ([0, 1, 2], [0.0, 1.0, 4.0]), ("b", 3): ([0, 2], [1.0, 5.0])})
    table = read(tmp_path)
    (tmp_path / "benchlab.db").rename(tmp_path / "moved.db")
    assert isinstance(table.curves, Curves)
    ((key, runs),) = table.curves.groups().items()
    assert key == ("score", "t")
    assert [(r.config, r.seed, r.steps.tolist(), r.values.tolist()) for r in runs] == [
        ("a", 0, [0.0, 1.0, 2.0], [0.0, 1.0, 4.0]), ("b", 3, [0.0, 2.0], [1.0, 5.0])]
    (cs,) = curve_sets(table.curves)
    np.testing.assert_allclose(cs.values["a"], [[0.0, 1.0, 4.0]])  # on the grid 0, 1, 2
    np.testing.assert_allclose(cs.values["b"], [[1.0, 3.0, 5.0]])  # b interpolated at step 1
    with pytest.raises(AttributeError):
        table.curves = Curves()  # type: ignore[misc]  # the table read is immutable


def test_a_table_read_without_curves_holds_none(tmp_path: Path):
    _ledger(tmp_path, {("a", 0): ([0, 1], [0.0, 1.0])})
    assert read(tmp_path, curves=False).curves.groups() == {}
    assert read(tmp_path).curves.groups() != {}


def test_mean_band_is_the_student_t_interval_at_each_step():
    values = np.array([[1.0, 2.0], [2.0, 2.0], [4.0, 5.0]])
    mean, low, high = mean_band(values)
    for j in range(2):
        col = values[:, j]
        lo, hi = sps.t.interval(0.95, 2, loc=col.mean(), scale=sps.sem(col))
        assert (mean[j], low[j], high[j]) == pytest.approx((col.mean(), lo, hi))
    one = mean_band(values[:1])
    assert all(np.array_equal(x, values[0]) for x in one)


def normalised_scores(table, info_):
    """The scores the profile and radar figures draw (stats.figures), as a tuple."""
    norm = PrimaryFigures(info_.primary, info_.primary_goal, table, tuple(info_.tasks), tuple(info_.configs),
                          dict(info_.references)).normalised
    return list(norm.tasks), norm.scores, norm.note


def test_without_references_each_task_is_normalised_by_its_worst_and_best_run(tmp_path: Path):
    values = {("t1", "a"): [1.0, 3.0], ("t1", "b"): [5.0, 5.0],
              ("t2", "a"): [10.0, 20.0], ("t2", "b"): [30.0, 30.0]}
    folder = build_store_world(tmp_path / "r", values)
    table = load(folder, series=False)
    tasks, scores, note = normalised_scores(table, info(folder))
    assert tasks == ["t1", "t2"]
    # t1: (x - 1) / (5 - 1); t2: (x - 10) / (30 - 10)
    assert scores["a"].tolist() == [[0.0, 0.0], [0.5, 0.5]]
    assert scores["b"].tolist() == [[1.0, 1.0], [1.0, 1.0]]
    assert note.startswith("the spec gives no reference scores")


def test_references_normalise_and_goal_min_turns_the_scale(tmp_path: Path):
    values = {("t1", "a"): [2.0, 4.0], ("t1", "b"): [1.0, 1.0]}
    folder = build_store_world(tmp_path / "r", values, goal="min", references={"t1": [5.0, 1.0]})
    table = load(folder, series=False)
    _, scores, note = normalised_scores(table, info(folder))
    # low reference 5 -> 0, high reference 1 -> 1: (x - 5) / (1 - 5)
    assert scores["a"].ravel().tolist() == [0.75, 0.25]
    assert scores["b"].ravel().tolist() == [1.0, 1.0]
    assert "reference scores (low → 0, high → 1)" in note

    no_refs = info(folder)
    no_refs.references = {}
    _, scores, _ = normalised_scores(table, no_refs)
    # goal min without references: the worst run (4) -> 0, the best (1) -> 1.
    assert scores["a"].ravel().tolist() == pytest.approx([2 / 3, 0.0])


def test_a_report_without_figures_computes_none_of_their_numbers(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    import importlib

    from benchlab.report import analyze, gather, write_report
    from benchlab.results import read

    folder = build_store_world(tmp_path / "r", {("t1", "a"): [0.5, 0.6, 0.7], ("t1", "b"): [0.6, 0.7, 0.9]})

    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("a figure's numbers were computed without a figure")

    # (benchlab.stats.aggregate is also the name of a function benchlab.stats exports)
    monkeypatch.setattr(importlib.import_module("benchlab.stats.aggregate"), "performance_profile", refuse)
    monkeypatch.setattr(importlib.import_module("benchlab.stats.seeds"), "cv_of_mean", refuse)
    write_report(folder, plots=False)
    figures = analyze(gather(read(folder))).analysis.figures  # type: ignore[union-attr]
    assert figures is not None and not {"cv", "profiles", "radar"} & set(vars(figures))
