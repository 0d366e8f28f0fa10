"""Thin or odd results still give a whole report: one seed, equal scores, NaN, missing configs."""

from __future__ import annotations

from pathlib import Path

import pytest
from report_world import build_store_world

from benchlab.report import write_report


@pytest.mark.parametrize(("values", "options", "plots"), [
    # One seed: no CI, no CV curve (needs 2 seeds), no radar (needs 3 tasks), no curves logged,
    # no profile (without reference scores it would be a 0/1 step; the report says so).
    ({("t", "a"): [0.5], ("t", "b"): [0.7]}, {},
     {"scores_score.png"}),
    # Every score equal: nothing to normalise, so no profile.
    ({("t", "a"): [0.5, 0.5], ("t", "b"): [0.5, 0.5]}, {"baseline": "a", "curves": True},
     {"curves_score.png", "scores_score.png", "cv_of_mean_score.png"}),
    # A NaN final value.
    ({("t", "a"): [0.5, float("nan"), 0.6], ("t", "b"): [0.7, 0.8, 0.9]}, {"baseline": "a"},
     {"scores_score.png", "cv_of_mean_score.png", "performance_profile.png"}),
    # Config b ran on t1 only: profiles cover t1 alone (fewer than 3 tasks: no radar).
    ({("t1", "a"): [0.5, 0.6], ("t1", "b"): [0.7, 0.8], ("t2", "a"): [1.0, 2.0],
      ("t3", "a"): [3.0, 4.0]}, {"baseline": "a", "curves": True},
     {"curves_score.png", "scores_score.png", "cv_of_mean_score.png", "performance_profile.png"}),
], ids=["one-seed", "equal-scores", "nan", "missing-config"])
def test_thin_results_still_give_every_text_file(tmp_path: Path, values, options, plots):
    folder = build_store_world(tmp_path / "res", values, **options)
    files = write_report(folder, tmp_path / "rep")
    assert {p.name for p in (tmp_path / "rep" / "plots").glob("*.png")} == plots
    assert files.markdown.exists() and (tmp_path / "rep" / "BENCHMARKS.md").exists()
    page = (tmp_path / "rep" / "report.html").read_text()
    assert page.count("data:image/png;base64,") == len(plots)


def test_profile_caption_names_the_tasks_left_out(tmp_path: Path):
    values = {("t1", "a"): [0.5, 0.6], ("t1", "b"): [0.7, 0.8], ("t2", "a"): [1.0, 2.0]}
    folder = build_store_world(tmp_path / "res", values, baseline="a")
    text = write_report(folder, tmp_path / "rep").markdown.read_text()
    assert "left out: t2 (a config has no run there, or all scores are equal)" in text


def test_report_before_any_run_completed_lists_the_suite_without_scores(tmp_path: Path):
    from benchlab.ledger import Store
    from benchlab.plan import Run

    with Store.create(tmp_path / "res") as store:
        store._set_meta(name="e", primary="score", goals={"score": "max"}, tasks=["t"],
                       configs=["a"], baseline="a", targets={"t": 1.0})
        store.register([Run(run_id="x", benchmark="e", task="t", config="a", seed=0,
                            params={}, command="x")])
    files = write_report(tmp_path / "res", tmp_path / "rep")
    assert list((tmp_path / "rep" / "plots").glob("*.png")) == []
    assert "| t | 1 | — | — |" in (tmp_path / "rep" / "BENCHMARKS.md").read_text()
    text = files.markdown.read_text()
    assert "No run has completed yet, so there is nothing to compare." in text
    assert "no completed run has a value of 'score' yet" in text


def test_cv_caption_says_the_curve_is_the_closed_form_not_a_resampling(tmp_path: Path):
    values = {("t", "a"): [0.5, 0.6, 0.55], ("t", "b"): [0.7, 0.8, 0.75]}
    folder = build_store_world(tmp_path / "res", values, baseline="a")
    text = write_report(folder, tmp_path / "rep").markdown.read_text()
    assert "s / (√N · |mean|)" in text and "resampling each config's runs" not in text
