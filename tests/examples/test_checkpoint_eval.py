"""examples/checkpoint-eval: checkpoints × benchmarks, evaluated against a live (stub) endpoint."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchlab.collect import collect_run
from benchlab.plan import expand
from benchlab.results import load
from benchlab.spec import load_spec

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "checkpoint-eval"


def test_both_specs_validate_to_checkpoints_times_benchmarks():
    assert len(expand(load_spec(EXAMPLE / "benchlab.yaml"))) == 3 * 3
    assert len(expand(load_spec(EXAMPLE / "lm_eval.yaml", ["ckpt_root=/ck"]))) == 3 * 3


def test_lm_eval_spec_reads_each_tasks_own_metric_key(tmp_path):
    spec = load_spec(EXAMPLE / "lm_eval.yaml")
    run = next(r for r in expand(spec) if r.task == "ifeval")
    out = tmp_path / "org__step-20"
    out.mkdir()
    (out / "results_2026-01-01T00-00-00.json").write_text(json.dumps(
        {"results": {"ifeval": {"prompt_level_strict_acc,none": 0.61, "inst_level_strict_acc,none": 0.7}},
         "versions": {"ifeval": 4.0}, "n-shot": {"ifeval": 0}, "config": {}}))
    assert collect_run(tmp_path, spec.metrics.all, run.context()).finals["score"] == 0.61


@pytest.mark.slow
def test_checkpoints_are_evaluated_and_ranked_by_the_endpoint(shared_checkpoint_eval):
    # The example run once for the session (tests/conftest.py), against the stub endpoint.
    assert "9 runs: 9 completed" in (shared_checkpoint_eval / "run.out").read_text()
    table = load(shared_checkpoint_eval / "results")
    finals = table[table.step.isna() & (table.metric == "pass@1")].set_index(["task", "config"])["value"]
    for task in ("arith", "words", "mcq"):
        # the stub answers right with probability 0.45 / 0.6 / 0.75 per checkpoint
        assert finals[(task, "step-1000")] < finals[(task, "step-3000")]
        assert 0.2 < finals[(task, "step-1000")] < 0.7 and 0.5 < finals[(task, "step-3000")] <= 1.0
    assert (shared_checkpoint_eval / "results" / "BENCHMARK_REPORT.md").exists()
