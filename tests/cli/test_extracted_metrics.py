"""Metrics read by extractors, through the real `benchlab run`: a diverged run's nan is a failure."""

from __future__ import annotations

import json

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
    proc = bench.cli("run", "bench.yaml", "-r", "out")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "metric 'total_reward_ma' is not finite (nan)" in proc.stdout
    # The run is failed, not completed with the older line's 484.62.
    status = json.loads(bench.cli("status", "out", "--json", check=True).stdout)
    assert status["counts"] == {"failed": 1}
