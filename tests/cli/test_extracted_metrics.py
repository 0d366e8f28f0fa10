"""Metrics read by extractors, through the real `benchlab run`: a diverged run's nan is a failure."""

from __future__ import annotations

import json

from lm_eval_testkit import LM_EVAL_SCRIPT, LM_EVAL_SPEC

# An SLM-Lab-like trainer whose last trial_metrics line reads nan (it diverged).
DIVERGING = r'''
import sys
print("trial_metrics: frame:1.00e+05 | total_reward_ma:484.62 | fps:900")
print("trial_metrics: frame:2.00e+05 | total_reward_ma:\x1b[33mnan\x1b[0m | fps:950")
'''

SPEC = r"""
name: slm
tasks: [{name: cartpole}]
configs: [{name: ppo}]
seeds: 1
retries: 0
command: python run.py
metrics:
  primary:
    name: total_reward_ma
    goal: max
    from:
      regex: 'trial_metrics: frame:(?P<step>\S+) \| total_reward_ma:(?P<value>PATTERN)'
      series: true
"""


def test_a_nan_on_the_last_log_line_fails_the_run_as_not_finite(make_bench):
    # The value pattern docs/extractors.md used to show, which cannot match 'nan'.
    bench = make_bench(SPEC.replace("PATTERN", r"[-+.\deE]+"), script=DIVERGING)
    proc = bench.cli("run", "bench.yaml", "--no-report", "-r", "out")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "metric 'total_reward_ma' is not finite (nan)" in proc.stdout
    # The run is failed, not completed with the older line's 484.62.
    status = json.loads(bench.cli("status", "out", "--json", check=True).stdout)
    assert status["counts"] == {"failed": 1}




def test_an_lm_eval_run_reports_every_metric_undeclared_and_is_flagged_partial(make_bench):
    from lm_eval_testkit import results_v049

    bench = make_bench(LM_EVAL_SPEC, script=LM_EVAL_SCRIPT)
    (bench.root / "results.json").write_text(json.dumps(results_v049(limit=100)))
    proc = bench.cli("run", "bench.yaml", "-r", "out")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    status = json.loads(bench.cli("status", "out", "--json", check=True).stdout)
    assert status["counts"] == {"completed": 1}
    assert status["partial"] == [{"run": "gsm8k/step-1000/s0", "run_id": status["partial"][0]["run_id"],
                                  "note": "partial evaluation (--limit): gsm8k 100 of 1319 samples"}]
    assert "partial: gsm8k/step-1000/s0" in bench.cli("status", "out", check=True).stdout
    run_dir = next((bench.root / "out" / "runs").iterdir())
    provenance = json.loads((run_dir / "provenance.json").read_text())["lm_eval"]
    assert provenance["versions"]["gsm8k"] == 3.0 and provenance["n-shot"]["gsm8k"] == 5
    assert provenance["model_args"].startswith("pretrained=/ckpt/step-1000")
    # The run folder's metrics.json holds every metric of the file, in benchlab's own form.
    metrics = json.loads((run_dir / "metrics.json").read_text())
    assert metrics["exact_match,strict-match"] == 0.5625
    assert metrics["gsm8k/exact_match,flexible-extract"] == 0.5875
    assert metrics["mmlu_stem/acc,none"] == 0.4125 and metrics["gsm8k/exact_match_stderr,strict-match"] == 0.0137
    # The report says the score is not the full benchmark's.
    bench.cli("report", "out", check=True)
    report = (bench.root / "out" / "BENCHMARK_REPORT.md").read_text()
    assert "1 run is a partial evaluation" in report
    assert "gsm8k/step-1000/s0: gsm8k 100 of 1319 samples" in report
