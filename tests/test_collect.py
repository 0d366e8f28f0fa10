"""Extractors: metrics read from logs, JSON, JSON lines and CSV files of a run directory."""

from __future__ import annotations

import pytest

from benchlab.collect import collect_run
from benchlab.collect.extractors import strip_ansi
from benchlab.spec import Metric, MetricSource

SLM_LOG = (
    "\x1b[32m[2026-01-05 10:00:00 INFO]\x1b[0m session start\n"
    "trial_metrics: frame:1.00e+05 | total_reward_ma:12.50 | fps:900\n"
    "some other line total_reward_ma:999 without the prefix\n"
    "\x1b[1mtrial_metrics:\x1b[0m frame:\x1b[33m2.00e+05\x1b[0m | total_reward_ma:\x1b[33m300.25\x1b[0m | fps:950\n"
    "trial_metrics: frame:1.00e+07 | total_reward_ma:816.18 | fps:1000\n"
)
SLM_RE = r"trial_metrics: frame:(?P<step>\S+) \| total_reward_ma:(?P<value>[-+.\deE]+)"


def metric(name: str, **source) -> Metric:
    return Metric(name=name, source=MetricSource.model_validate(source) if source else None)


def test_strip_ansi_removes_colour_codes():
    assert strip_ansi("\x1b[1;31mred\x1b[0m and \x1b]0;title\x07plain") == "red and plain"


def test_regex_last_match_reads_slm_lab_trial_metrics(tmp_path):
    (tmp_path / "train.log").write_text(SLM_LOG)
    got = collect_run(tmp_path, [metric("total_reward_ma", regex=SLM_RE)])
    assert got.finals["total_reward_ma"] == 816.18
    assert "total_reward_ma" not in got.series


def test_regex_every_match_is_a_series_with_steps_despite_colours(tmp_path):
    (tmp_path / "train.log").write_text(SLM_LOG)
    got = collect_run(tmp_path, [metric("total_reward_ma", regex=SLM_RE, series=True)])
    steps, vals = got.series["total_reward_ma"]
    assert steps.tolist() == [1e5, 2e5, 1e7]
    assert vals.tolist() == [12.5, 300.25, 816.18]


def test_regex_with_one_group_and_other_file(tmp_path):
    (tmp_path / "eval.txt").write_text("fps: 10\nfps: 20\n")
    got = collect_run(tmp_path, [metric("fps", regex=r"fps: (\d+)", file="eval.txt")])
    assert got.finals["fps"] == 20.0


def test_regex_without_match_is_a_reported_problem(tmp_path):
    (tmp_path / "train.log").write_text("nothing here\n")
    got = collect_run(tmp_path, [metric("r", regex=r"reward=(\S+)")])
    assert "no line of train.log matches" in got.missing("r")


def test_json_key_path(tmp_path):
    (tmp_path / "results.json").write_text('{"eval": {"scores": [0.1, 0.7]}, "acc": "n/a"}')
    got = collect_run(tmp_path, [metric("s", json="results.json", key="eval.scores.1"),
                                 metric("t", json="results.json", key="eval.nope"),
                                 metric("a", json="results.json", key="acc")])
    assert got.finals["s"] == 0.7
    assert "no key 'nope'" in got.missing("t") and "(found: scores)" in got.missing("t")
    assert "expected a number, got 'n/a'" in got.missing("a")


def test_csv_column_as_series_with_step_column(tmp_path):
    (tmp_path / "progress.csv").write_text("epoch,reward\n1,0.5\n2,\n3,0.9\n")
    got = collect_run(tmp_path, [metric("reward", csv="progress.csv", column="reward",
                                        step_column="epoch", series=True)])
    assert got.finals["reward"] == 0.9
    assert got.series["reward"][0].tolist() == [1.0, 3.0]


def test_csv_missing_column_names_the_columns(tmp_path):
    (tmp_path / "progress.csv").write_text("epoch,reward\n1,0.5\n")
    got = collect_run(tmp_path, [metric("x", csv="progress.csv", column="rew")])
    assert got.missing("x") == "progress.csv has no column 'rew' (columns: epoch, reward)"


def test_missing_file_lists_what_is_there(tmp_path):
    (tmp_path / "train.log").write_text("")
    got = collect_run(tmp_path, [metric("x", csv="progress.csv", column="r")])
    assert "could not find progress.csv" in got.missing("x") and "train.log" in got.missing("x")


def test_jsonl_source_skips_torn_last_line(tmp_path):
    (tmp_path / "log.jsonl").write_text('{"it": 1, "loss": 2.0}\n{"it": 2, "loss": 1.0}\n{"it": 3, "lo')
    got = collect_run(tmp_path, [metric("loss", jsonl="log.jsonl", key="loss", step_key="it", series=True)])
    assert got.series["loss"][0].tolist() == [1.0, 2.0] and got.finals["loss"] == 1.0


def test_benchlab_files_give_finals_and_series(tmp_path):
    (tmp_path / "metrics.json").write_text('{"acc": 0.9, "eval": {"f1": 0.8}}')
    (tmp_path / "metrics.jsonl").write_text('{"step": 0, "loss": 2}\n{"step": 5, "loss": 1, "lr": 0.1}\n')
    got = collect_run(tmp_path, [metric("acc")])
    assert got.finals == {"acc": 0.9, "eval/f1": 0.8, "loss": 1.0, "lr": 0.1}
    assert got.series["loss"][0].tolist() == [0.0, 5.0]
    assert got.series["lr"][0].tolist() == [5.0]


def test_final_scalar_wins_over_series_last_point(tmp_path):
    (tmp_path / "metrics.json").write_text('{"loss": 0.5}')
    (tmp_path / "metrics.jsonl").write_text('{"step": 0, "loss": 2}\n')
    assert collect_run(tmp_path, []).finals["loss"] == 0.5


@pytest.mark.parametrize("content,reason", [
    ('{"acc": NaN}', "not finite"),
    ('{"acc": Infinity}', "not finite"),
    ('{"other": 1}', "was not reported"),
    ('{"acc": "high"}', "is not a number"),
])
def test_primary_missing_or_not_finite_is_named(tmp_path, content, reason):
    (tmp_path / "metrics.json").write_text(content)
    got = collect_run(tmp_path, [metric("acc")])
    assert reason in got.missing("acc")


def test_source_needs_exactly_one_kind():
    with pytest.raises(ValueError, match="exactly one of"):
        MetricSource.model_validate({"regex": "(x)", "csv": "a.csv", "column": "c"})
    with pytest.raises(ValueError, match="group named 'value'"):
        MetricSource.model_validate({"regex": "(a)(b)"})


def test_source_names_can_depend_on_the_runs_task(tmp_path):
    (tmp_path / "metrics.json").write_text('{"arith/pass@1/accuracy": 0.75, "mcq/pass@1/accuracy": 0.5}')
    m = metric("pass@1", json="metrics.json", key="{task}/pass@1/accuracy")
    assert collect_run(tmp_path, [m], {"task": "mcq", "config": "c"}).finals["pass@1"] == 0.5
    assert collect_run(tmp_path, [m], {"task": "arith", "config": "c"}).finals["pass@1"] == 0.75


# -- nan is never hidden ------------------------------------------------------------------------

# The pattern docs/extractors.md documented before it read nan, still in users' specs.
OLD_SLM_RE = SLM_RE
# The one it documents now.
NEW_SLM_RE = r"trial_metrics: frame:(?P<step>\S+) \| total_reward_ma:(?P<value>[-+]?(?:nan|inf|[.\deE+-]+))"
DIVERGED = (
    "trial_metrics: frame:1.00e+05 | total_reward_ma:484.62 | fps:900\n"
    "trial_metrics: frame:2.00e+05 | total_reward_ma:{last} | fps:950\n"
)


@pytest.mark.parametrize("pattern", [OLD_SLM_RE, NEW_SLM_RE], ids=["old-pattern", "documented-pattern"])
@pytest.mark.parametrize("last,shown", [
    ("nan", "nan"), ("NaN", "nan"), ("inf", "inf"), ("-inf", "-inf"), ("+Infinity", "inf"),
    ("\x1b[33mnan\x1b[0m", "nan"), ("-\x1b[1minf\x1b[0m", "-inf"), ("n\x1b[31ma\x1b[0mn", "nan"),
])
def test_a_non_finite_last_line_is_read_and_fails_the_metric(tmp_path, pattern, last, shown):
    (tmp_path / "train.log").write_text(DIVERGED.format(last=last))
    got = collect_run(tmp_path, [metric("total_reward_ma", regex=pattern)])
    # Not the older line's 484.62: the run diverged, and its metric says so.
    # Its own class: the run reported the metric, so the hint is about divergence, not naming.
    assert got.missing("total_reward_ma").startswith(f"metric 'total_reward_ma' is not finite ({shown})")
    assert got.failure("total_reward_ma")[0] == "non-finite-metric"


@pytest.mark.parametrize("pattern", [OLD_SLM_RE, NEW_SLM_RE], ids=["old-pattern", "documented-pattern"])
def test_a_series_keeps_its_nan_points_in_order(tmp_path, pattern):
    log = DIVERGED.format(last="nan") + "trial_metrics: frame:3.00e+05 | total_reward_ma:12.5 | fps:1\n"
    (tmp_path / "train.log").write_text(log)
    got = collect_run(tmp_path, [metric("total_reward_ma", regex=pattern, series=True)])
    steps, vals = got.series["total_reward_ma"]
    assert steps.tolist() == [1e5, 2e5, 3e5]
    assert vals[0] == 484.62 and vals[1] != vals[1] and vals[2] == 12.5
    assert got.missing("total_reward_ma") is None  # the last value is finite again


def test_ansi_codes_inside_a_finite_number_are_stripped(tmp_path):
    (tmp_path / "train.log").write_text("trial_metrics: frame:1e5 | total_reward_ma:8\x1b[1m16.\x1b[0m18\n")
    got = collect_run(tmp_path, [metric("total_reward_ma", regex=NEW_SLM_RE)])
    assert got.finals["total_reward_ma"] == 816.18


def test_an_unnamed_group_also_reads_nan(tmp_path):
    (tmp_path / "train.log").write_text("fps:900\nfps:nan\n")
    got = collect_run(tmp_path, [metric("fps", regex=r"fps:(\d+)")])
    assert got.missing("fps").startswith("metric 'fps' is not finite (nan)")


def test_words_starting_like_nan_are_not_numbers(tmp_path):
    (tmp_path / "train.log").write_text("loss:0.5\nloss:nanoseconds\nloss:information\n")
    got = collect_run(tmp_path, [metric("loss", regex=r"loss:(?P<value>[\d.]+)")])
    assert got.finals["loss"] == 0.5
