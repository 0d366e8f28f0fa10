"""A run whose primary metric came out NaN or infinite is a failure of its own class,
``non-finite-metric``, with a hint about divergence (not the missing-metric hint to name the
metric right), through the real `benchlab run`: in status, the report's failure log and the ledger."""

from __future__ import annotations

import json

import pytest

from benchlab import triage
from benchlab.ledger import Store

# Logs a reward per step with benchlab's own series file; the last steps diverged. json.dumps writes
# Python's nan as the bare token NaN, as a trainer using the json module does.
SERIES_SCRIPT = r'''
import json, os
with open(os.path.join(os.environ["BENCHLAB_RUN_DIR"], "metrics.jsonl"), "w") as f:
    for step, reward in [(0, 10.0), (100, 55.5), (200, float("nan")), (300, float("nan"))]:
        f.write(json.dumps({"step": step, "reward": reward}) + "\n")
'''

# A final scalar written as the bare JSON token NaN.
SCALAR_SCRIPT = r'''
import os
with open(os.path.join(os.environ["BENCHLAB_RUN_DIR"], "metrics.json"), "w") as f:
    f.write('{"reward": NaN}')
'''

# A trainer whose log line a regex reads, and which printed reward=nan.
LOG_SCRIPT = r'''
print("step=100 reward=42.0")
print("step=200 reward=nan")
'''

SPEC = """
name: diverge
tasks: [{name: acrobot}]
configs: [{name: ppo}]
seeds: 1
retries: 0
command: python run.py
metrics:
  primary: {name: reward, goal: max}
"""

REGEX_SPEC = r"""
name: diverge
tasks: [{name: acrobot}]
configs: [{name: ppo}]
seeds: 1
retries: 0
command: python run.py
metrics:
  primary: {name: reward, goal: max, from: {regex: 'step=(?P<step>\d+) reward=(?P<value>\S+)', series: true}}
"""


@pytest.mark.parametrize(("spec", "script", "step"), [(SPEC, SERIES_SCRIPT, "first at step 200 (2 of 4"),
                                                      (SPEC, SCALAR_SCRIPT, None),
                                                      (REGEX_SPEC, LOG_SCRIPT, "first at step 200 (1 of 2")],
                         ids=["jsonl-series", "json-NaN-token", "regex-nan"])
def test_a_nan_reward_is_a_non_finite_metric_failure_with_a_divergence_hint(make_bench, spec, script, step):
    bench = make_bench(spec, script=script)
    proc = bench.cli("run", "bench.yaml", "-r", "out")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    # Not the missing-metric advice: the spec names the metric right.
    assert "names the metric right" not in proc.stdout
    assert "the metric came out NaN or inf on every seed" in proc.stdout

    status = json.loads(bench.cli("status", "out", "--json", check=True).stdout)
    assert list(status["failures"]) == [triage.NON_FINITE_METRIC]
    (failure,) = status["failures"][triage.NON_FINITE_METRIC]
    error = failure["error"]
    assert error.startswith("metric 'reward' is not finite (nan)")
    assert "the training likely diverged" in error and "learning rate" in error
    assert "did you mean" not in error and "was not reported" not in error
    if step is not None:
        assert step in error
    text = bench.cli("status", "out", check=True).stdout
    assert "non-finite-metric" in text and "diverged" in text and "names the metric right" not in text

    with Store.open(bench.root / "out", read_only=True) as store:
        (attempt,) = store.attempts()
    assert attempt.failure_class == triage.NON_FINITE_METRIC and attempt.error == error

    bench.cli("report", "out", "--no-plots", "--no-html", check=True)
    report = (bench.root / "out" / "BENCHMARK_REPORT.md").read_text()
    assert "non-finite-metric" in report and "the training likely diverged" in report


def test_a_non_finite_metric_is_not_retried_by_default():
    from benchlab.spec.models import DEFAULT_RETRY_ON

    # The same seed would most likely diverge again.
    assert DEFAULT_RETRY_ON[triage.NON_FINITE_METRIC] == 0
