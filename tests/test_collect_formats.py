"""lm-evaluation-harness results and TensorBoard event files, read as metrics."""

from __future__ import annotations

import json

import pytest

from benchlab.collect import collect_run
from benchlab.spec import Metric, MetricSource


def metric(name: str, **source) -> Metric:
    return Metric(name=name, source=MetricSource.model_validate(source))


def lm_eval_file(folder, model: str, stamp: str, gsm8k: float) -> None:
    """A results file shaped as lm-evaluation-harness writes it (numbers made up for the test)."""
    out = folder / model
    out.mkdir(parents=True, exist_ok=True)
    (out / f"results_{stamp}.json").write_text(json.dumps({
        "results": {
            "gsm8k": {"alias": "gsm8k", "exact_match,strict-match": gsm8k,
                      "exact_match_stderr,strict-match": 0.012,
                      "exact_match,flexible-extract": gsm8k + 0.02,
                      "exact_match_stderr,flexible-extract": "N/A"},
            "humaneval": {"alias": "humaneval", "pass_at_1,none": 0.25, "pass_at_1_stderr,none": "N/A"},
        },
        "versions": {"gsm8k": 3.0, "humaneval": 1.0},
        "n-shot": {"gsm8k": 5, "humaneval": 0},
        "config": {"model": "vllm", "model_args": "pretrained=ckpt"},
    }))


def test_lm_eval_value_is_read_from_the_newest_results_file(tmp_path):
    lm_eval_file(tmp_path, "org__ckpt-100", "2026-01-02T10-00-00.000001", 0.40)
    lm_eval_file(tmp_path, "org__ckpt-100", "2026-01-03T09-00-00.000001", 0.45)
    got = collect_run(tmp_path, [
        metric("gsm8k", lm_eval=".", task="gsm8k", key="exact_match,strict-match"),
        metric("humaneval", lm_eval=".", task="humaneval", key="pass_at_1,none"),
    ])
    assert got.finals["gsm8k"] == 0.45 and got.finals["humaneval"] == 0.25


def test_lm_eval_unknown_metric_names_the_known_ones(tmp_path):
    lm_eval_file(tmp_path, "m", "2026-01-02T10-00-00", 0.4)
    got = collect_run(tmp_path, [metric("x", lm_eval=".", task="gsm8k", key="acc,none")])
    assert got.missing("x") == ("gsm8k has no metric 'acc,none' (metrics: exact_match,flexible-extract, "
                                "exact_match,strict-match)")
    got = collect_run(tmp_path, [metric("x", lm_eval=".", task="mmlu", key="acc,none")])
    assert "task 'mmlu' is not in the results (tasks: gsm8k, humaneval)" == got.missing("x")


def test_lm_eval_without_results_file_says_how_to_write_one(tmp_path):
    got = collect_run(tmp_path, [metric("x", lm_eval=".", task="gsm8k", key="acc,none")])
    assert "--output_path {run_dir}" in got.missing("x")


def test_lm_eval_source_needs_task_and_key_together():
    with pytest.raises(ValueError, match="needs both 'task'"):
        MetricSource.model_validate({"lm_eval": ".", "task": "gsm8k"})
    with pytest.raises(ValueError, match="needs both 'task'"):
        MetricSource.model_validate({"lm_eval": ".", "key": "acc,none"})
    assert MetricSource.model_validate({"lm_eval": "."}).kind == "lm_eval"  # every metric of the file


@pytest.mark.parametrize("writer", ["tensorboard", "tensorboardX"])
def test_tensorboard_scalars_from_the_real_writers(tmp_path, writer):
    logdir = tmp_path / "tb"
    if writer == "tensorboard":
        from tensorboard.summary import Writer

        w = Writer(str(logdir))
        for step in range(5):
            w.add_scalar("eval/reward", 10.0 * step, step)
        w.close()
    else:
        from tensorboardX import SummaryWriter

        w = SummaryWriter(str(logdir))
        for step in range(5):
            w.add_scalar("eval/reward", 10.0 * step, step)
        w.close()
    got = collect_run(tmp_path, [metric("reward", tensorboard="tb", tag="eval/reward", series=True)])
    assert got.finals["reward"] == 40.0
    assert got.series["reward"][0].tolist() == [0, 1, 2, 3, 4]
    assert got.series["reward"][1].tolist() == [0, 10, 20, 30, 40]
    missing = collect_run(tmp_path, [metric("loss", tensorboard="tb", tag="loss")])
    assert missing.missing("loss") == "no scalar 'loss' in the event files (scalars: eval/reward)"


# -- every lm-eval metric, without declaring them -----------------------------------------------


def test_lm_eval_whole_file_reads_every_task_metric_filter_and_group(tmp_path):
    from lm_eval_testkit import write_results_v049

    write_results_v049(tmp_path)
    got = collect_run(tmp_path, [metric("gsm8k/exact_match,strict-match", lm_eval=".")])
    assert got.missing("gsm8k/exact_match,strict-match") is None
    assert got.finals["gsm8k/exact_match,strict-match"] == 0.5625
    # Every (task, metric, filter), the other filter and the group included, none of them declared.
    assert got.finals["gsm8k/exact_match,flexible-extract"] == 0.5875
    assert got.finals["mmlu_stem/acc,none"] == 0.4125
    assert got.finals["mmlu_college_physics/acc,none"] == 0.2549
    # Standard errors are values of their own; "N/A" is kept as null (NaN here) with a note naming it.
    assert got.finals["gsm8k/exact_match_stderr,strict-match"] == 0.0137
    assert got.finals["mmlu_stem/acc_stderr,none"] != got.finals["mmlu_stem/acc_stderr,none"]
    assert any("mmlu_stem/acc_stderr,none" in note and "N/A" in note for note in got.notes)
    assert "alias" not in " ".join(got.finals)


def test_lm_eval_provenance_and_a_limit_flag_partial_tasks(tmp_path):
    from lm_eval_testkit import write_results_v049

    write_results_v049(tmp_path, limit=100)
    got = collect_run(tmp_path, [metric("exact_match,strict-match", lm_eval=".")], {"task": "gsm8k"})
    # The bare metric name is picked for the run's task.
    assert got.finals["exact_match,strict-match"] == 0.5625
    prov = got.lm_eval.provenance
    assert prov["versions"]["gsm8k"] == 3.0 and prov["n-shot"]["gsm8k"] == 5
    assert prov["n-samples"]["gsm8k"] == {"original": 1319, "effective": 100}
    assert prov["model_args"].startswith("pretrained=/ckpt/step-1000")
    assert prov["lm_eval_version"] == "0.4.9" and prov["model_name"] == "/ckpt/step-1000"
    assert prov["partial"] == {"gsm8k": {"effective": 100, "original": 1319}}
    assert got.lm_eval.partial_note() == "partial evaluation (--limit): gsm8k 100 of 1319 samples"


def test_lm_eval_whole_file_without_limit_is_not_partial(tmp_path):
    from lm_eval_testkit import write_results_v049

    write_results_v049(tmp_path)
    got = collect_run(tmp_path, [metric("gsm8k/exact_match,strict-match", lm_eval=".")])
    assert got.lm_eval.partial == {} and got.lm_eval.partial_note() is None


def test_lm_eval_unknown_name_lists_the_runs_task_metrics(tmp_path):
    from lm_eval_testkit import write_results_v049

    write_results_v049(tmp_path)
    got = collect_run(tmp_path, [metric("acc,none", lm_eval=".")], {"task": "gsm8k"})
    assert got.missing("acc,none") == (
        "no lm-evaluation-harness metric 'acc,none' (nor gsm8k/acc,none); the results hold: "
        "gsm8k/exact_match,strict-match, gsm8k/exact_match,flexible-extract"
    )
