"""`benchlab diff`'s verdict is the library's: a deterministic regression fails the gate."""

from __future__ import annotations

import json

import pytest
from scipy import stats as sps

pytestmark = pytest.mark.slow

SPEC = """
name: shift
tasks:
  - name: t
    params: {base: BASE}
configs:
  - name: a
    params: {extra: 1}
seeds: 8
command: python run.py base={base} extra={extra}
metrics:
  primary: {name: score, goal: max}
"""


def test_a_deterministic_regression_on_every_seed_fails_the_gate(make_bench):
    # The run script scores base + seed/100: the second version loses exactly 0.03 on every seed,
    # as a deterministic evaluation (temperature 0) or an integer metric would.
    bench = make_bench(SPEC.replace("BASE", "0.5"))
    bench.cli("run", "bench.yaml", "-r", "before", "--no-report", check=True)
    bench.spec.write_text(SPEC.replace("BASE", "0.47").lstrip())
    bench.cli("run", "bench.yaml", "-r", "after", "--no-report", check=True)
    gate = bench.cli("diff", "before", "after", "-m", "score", "--fail-on-regression", "--json")
    assert gate.returncode == 1, gate.stderr
    (change,) = json.loads(gate.stdout)["changes"]
    assert change["verdict"] == "regression" and change["paired"] is True
    assert change["diff"] == pytest.approx(-0.03)
    # 8 of 8 seeds one way: the sign test's and the exact Wilcoxon signed-rank test's p.
    assert change["p_value"] == pytest.approx(sps.binomtest(8, 8).pvalue)
    assert change["p_value"] == pytest.approx(sps.wilcoxon([-0.03] * 8).pvalue)
    same = bench.cli("diff", "before", "before", "-m", "score", "--fail-on-regression", "--json")
    assert same.returncode == 0, same.stderr
    assert [c["verdict"] for c in json.loads(same.stdout)["changes"]] == ["no detectable change"]
