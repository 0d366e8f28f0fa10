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


def test_the_diff_csv_has_one_typed_row_per_change_and_empty_cells_for_none(make_bench):
    import csv

    from benchlab.history.diff import diff_results, read_side
    from benchlab.history.diff_text import CSV_COLUMNS, csv_rows

    bench = make_bench(SPEC.replace("BASE", "0.5").replace("seeds: 8", "seeds: 3"))
    bench.cli("run", "bench.yaml", "-r", "before", "--no-report", check=True)
    bench.spec.write_text(SPEC.replace("BASE", "0.47").replace("seeds: 8", "seeds: 3").lstrip())
    bench.cli("run", "bench.yaml", "-r", "after", "--no-report", check=True)
    result = diff_results(read_side(bench.root / "before"), read_side(bench.root / "after"), metric="score", reps=0)
    (row,) = csv_rows(result)
    # base + seed/100 for seeds 0, 1, 2: 0.51 before, 0.48 after, the same 0.03 lost on every seed.
    assert (row.task, row.config, row.metric, row.goal, row.paired) == ("t", "a", "score", "max", True)
    assert (row.n_before, row.n_after) == (3, 3)
    assert row.mean_before == pytest.approx(0.51) and row.mean_after == pytest.approx(0.48)
    assert row.diff == pytest.approx(-0.03)
    assert row.ratio == pytest.approx(0.48 / 0.51)
    bench.cli("diff", "before", "after", "-m", "score", "--reps", "0", "--csv", "diff.csv", check=True)
    with open(bench.root / "diff.csv", newline="") as fh:
        written = list(csv.DictReader(fh))
    assert list(written[0]) == list(CSV_COLUMNS) == [
        "task", "config", "metric", "goal", "verdict", "paired", "n_before", "n_after", "mean_before",
        "mean_after", "diff", "ci_low", "ci_high", "ratio", "p_value", "p_holm", "direction", "relative_change"]
    assert float(written[0]["diff"]) == pytest.approx(-0.03) and written[0]["verdict"] == row.verdict
    assert [written[0][k] == "" for k in ("ci_low", "ci_high")] == [row.ci_low is None, row.ci_high is None]
