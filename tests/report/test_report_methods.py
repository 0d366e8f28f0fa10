"""The report names its methods: lm-eval's own standard error for one-seed evaluations, the
normalisation of the aggregates, the curve alignment, and why a profile was left out."""

from __future__ import annotations

import json
from pathlib import Path

from report_world import build_store_world

from benchlab.report import write_report
from lm_eval_testkit import LM_EVAL_SCRIPT, LM_EVAL_SPEC


def _row(text: str, config: str) -> list[str]:
    line = next(ln for ln in text.splitlines() if ln.startswith("| ") and f"| {config}" in ln)
    return [c.strip() for c in line.strip("|").split("|")]


def test_one_seed_lm_eval_run_shows_the_harness_standard_error_as_its_interval(make_bench):
    from lm_eval_testkit import results_v049

    bench = make_bench(LM_EVAL_SPEC, script=LM_EVAL_SCRIPT)
    (bench.root / "results.json").write_text(json.dumps(results_v049()))
    bench.cli("run", "bench.yaml", "-r", "out", "--no-report", check=True)
    bench.cli("report", "out", "--no-plots", check=True)
    text = (bench.root / "out" / "BENCHMARK_REPORT.md").read_text()
    # By hand: gsm8k exact_match,strict-match 0.5625 with stderr 0.0137 in the file; the normal
    # 95% interval 0.5625 ± 1.959964 · 0.0137 = [0.53565, 0.58935], at the 3 decimals that two
    # significant digits of the standard error (0.014) give.
    row = _row(text, "step-1000")
    assert row[3] == "0.562 ± 0.014 (s.e.)"
    assert row[4] == "[0.536, 0.589] (lm-eval standard error)"
    page = (bench.root / "out" / "report.html").read_text()
    assert "[0.536, 0.589] (lm-eval standard error)" in page


# Two tasks on scales 100× apart, three seeds each: b beats a on both.
TWO_SCALES = {("t1", "a"): [0.5, 0.6, 0.55], ("t1", "b"): [0.7, 0.8, 0.74],
              ("t2", "a"): [50.0, 60.0, 55.0], ("t2", "b"): [70.0, 80.0, 72.0]}


def _both(folder: Path, out: Path, **kw) -> tuple[str, str]:
    files = write_report(folder, out, **kw)
    return files.markdown.read_text(), (out / "report.html").read_text()


def test_report_says_the_aggregate_is_of_raw_scores_and_each_run_keeps_its_own_final(tmp_path: Path):
    folder = build_store_world(tmp_path / "res", TWO_SCALES, baseline="a")
    text, page = _both(folder, tmp_path / "rep", plots=False)
    methods = text.split("**Methods.**")[1].split("\n")[0]
    assert "Normalisation: none. The aggregate is of raw score, in its own units" in methods
    assert "normalised" not in methods
    assert "Alignment: own. Each run's final score is its own last reported value" in methods
    assert "Across tasks (raw score (no reference scores)" in text
    assert "Normalisation: none." in page and "Alignment: own." in page


def test_report_names_the_reference_scores_each_task_is_normalised_by(tmp_path: Path):
    folder = build_store_world(tmp_path / "res", TWO_SCALES, baseline="a",
                               references={"t1": [0.0, 1.0], "t2": [0.0, 100.0]})
    text, page = _both(folder, tmp_path / "rep", plots=False)
    expected = ("Normalisation: by the spec's reference scores (low → 0, high → 1): "
                "t1 [0, 1], t2 [0, 100].")
    assert expected in text and expected in page
    assert "Across tasks (score normalised by the reference scores" in text


def test_figures_normalised_without_references_say_they_differ_from_the_raw_aggregate(tmp_path: Path):
    folder = build_store_world(tmp_path / "res", TWO_SCALES, baseline="a", curves=True)
    text, _ = _both(folder, tmp_path / "rep")
    methods = text.split("**Methods.**")[1].split("\n")[0]
    assert "the learning-curve figures put every run of a task on the steps all of them cover" in (
        methods.lower())
    assert "each task without reference scores is min–max normalised over the configs shown" in methods


def test_one_seed_profile_without_references_is_left_out_and_the_report_says_why(tmp_path: Path):
    # One checkpoint evaluation per config: min–max over the configs would make a 1 and b 0.
    folder = build_store_world(tmp_path / "res", {("t", "a"): [0.5], ("t", "b"): [0.7]})
    text, page = _both(folder, tmp_path / "rep")
    assert not (tmp_path / "rep" / "plots" / "performance_profile.png").exists()
    reason = ("No performance profile: every config has one run per task and t has no reference "
              "scores, so normalising over the configs would put the best config at 1")
    assert reason in text and reason in page


def test_one_seed_profile_on_reference_scores_is_drawn_without_a_band_and_says_so(tmp_path: Path):
    values = {("t1", "a"): [0.5], ("t1", "b"): [0.7], ("t2", "a"): [30.0], ("t2", "b"): [20.0]}
    folder = build_store_world(tmp_path / "res", values,
                               references={"t1": [0.0, 1.0], "t2": [0.0, 100.0]})
    text, _ = _both(folder, tmp_path / "rep")
    assert (tmp_path / "rep" / "plots" / "performance_profile.png").exists()
    caption = text.split("### Performance profiles")[1].split("###")[0]
    assert "one run per config and task, so no band: resampling a single run has no spread" in caption
    assert "No performance profile" not in text


def test_a_report_of_two_tasks_says_why_it_draws_no_radar_figure(tmp_path: Path):
    folder = build_store_world(tmp_path / "res", TWO_SCALES, baseline="a")
    text, _ = _both(folder, tmp_path / "rep")
    assert not (tmp_path / "rep" / "plots" / "radar.png").exists()
    methods = text.split("**Methods.**")[1].split("\n")[0]
    assert "No radar (radial) figure: with 2 tasks a config's polygon would have fewer than 3 corners" in methods
