"""A search metric read from the log (or any file) after a run ends cannot be pruned on: `validate`
and `search` say so instead of promising pruning, and SEARCH_REPORT.md says why nothing was pruned."""

from __future__ import annotations

import pytest

from benchlab_testing import run_cli

SCRIPT = """
import sys
x = float(sys.argv[1])
for step in range(1, 4):
    print(f"eval step {step} score {-(x - 0.3) ** 2 - (3 - step) / 10:.4f}")
print(f"test score {-(x - 0.3) ** 2:.4f}")
"""

SPEC = r"""
name: logged
tasks: [{name: t}]
configs: [{name: base, params: {x: 0.0}}]
seeds: 1
command: python run.py {x}
metrics:
  primary: {name: test, from: {regex: 'test score (?P<value>[-.\d]+)'}}
  secondary: [{name: val, from: {regex: 'eval step (?P<step>\d+) score (?P<value>[-.\d]+)', series: true}}]
search: {metric: val, space: {x: {uniform: [-1, 1]}}, seeds: [9], budget: 2, pruner: median}
"""

MESSAGE = "the median pruner cannot act: val is read from the run's log by a regex once a run has ended"


def test_validate_does_not_promise_pruning_on_a_metric_read_from_the_log(tmp_path):
    (tmp_path / "run.py").write_text(SCRIPT)
    (tmp_path / "bench.yaml").write_text(SPEC.lstrip())
    shown = run_cli("validate", "bench.yaml", cwd=tmp_path)
    assert shown.returncode == 0, shown.stderr
    assert MESSAGE in shown.stdout.replace("\n", " ")
    # The same metric logged with benchlab.log (no `from:`): pruning reads it as it grows.
    lines = [ln if not ln.startswith("  secondary:") else "  secondary: [val]" for ln in SPEC.splitlines()]
    (tmp_path / "bench.yaml").write_text("\n".join(lines).lstrip() + "\n")
    assert "cannot act" not in run_cli("validate", "bench.yaml", cwd=tmp_path).stdout  # benchlab.log: it can


@pytest.mark.slow
def test_search_report_says_why_pruning_did_not_act(tmp_path):
    (tmp_path / "run.py").write_text(SCRIPT)
    (tmp_path / "bench.yaml").write_text(SPEC.lstrip())
    searched = run_cli("search", "bench.yaml", "-j", "2", cwd=tmp_path, timeout=300)
    assert searched.returncode == 0, searched.stdout + searched.stderr
    assert MESSAGE in searched.stdout.replace("\n", " ")
    report = (tmp_path / "results/logged/search/search/report/SEARCH_REPORT.md").read_text()
    assert f"Pruning did not act: {MESSAGE}" in report.replace("\n", " ")
    assert "no completed trial reported a curve" not in report
