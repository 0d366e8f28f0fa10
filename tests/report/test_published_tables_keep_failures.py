"""The published tables keep every planned seed: results.csv lists failed runs with their class
(so `benchlab analyze results.csv --failed-as worst` reproduces the report), a merged report
keeps each folder's failures, seed counts and hardware, and BENCHMARKS.md marks a partial
lm-eval score."""

from __future__ import annotations

import csv
import json
import shutil
import textwrap
from pathlib import Path

import pytest

from benchlab_testing import SCRIPT, run_cli
from lm_eval_testkit import LM_EVAL_SCRIPT, LM_EVAL_SPEC, results_v049

SPEC = """
name: fails
tasks: [{name: t1}]
configs: [{name: a, params: {base: 0.5, fail: none}}, {name: b, params: {base: 0.6, fail: 2}}]
seeds: 4
retries: 0
command: python run.py base={base} fail_seed={fail}
metrics: {primary: score}
baseline: a
"""


def _folder(root: Path) -> Path:
    root.mkdir(parents=True)
    (root / "run.py").write_text(SCRIPT)
    (root / "bench.yaml").write_text(textwrap.dedent(SPEC).lstrip())
    done = run_cli("run", "bench.yaml", "--no-report", cwd=root)
    assert done.returncode == 1, done.stderr  # b's seed 2 fails
    return root / "results" / "fails"


@pytest.fixture(scope="module")
def fails(tmp_path_factory) -> Path:
    folder = _folder(tmp_path_factory.mktemp("fails") / "one")
    run_cli("report", str(folder), "--no-plots", "--no-html", check=True)
    return folder


def test_results_csv_lists_the_failed_seed_and_analyze_scores_it_as_worst(fails):
    with (fails / "results.csv").open() as f:
        rows = list(csv.DictReader(f))
    failed = [r for r in rows if r["status"] != "completed"]
    assert [(r["config"], r["seed"], r["metric"], r["value"], r["status"], r["failure_class"]) for r in failed] == [
        ("b", "2", "score", "", "failed", "exception")]
    done = run_cli("analyze", str(fails / "results.csv"), "--baseline", "a", "--metric", "score",
                   "--failed-as", "worst", "--json", check=True)
    row = json.loads(done.stdout)["comparisons"][0]
    assert row["candidate_seeds"] == "3/4" and row["baseline_seeds"] == "4/4"
    # SCRIPT scores base + seed/100; b's failed seed 2 takes the worst final score, a's 0.50:
    # differences b - a by seed are 0.10, 0.10, 0.50 - 0.52, 0.10.
    assert row["mean_diff"] == pytest.approx((0.10 + 0.10 - 0.02 + 0.10) / 4, abs=1e-12)
    # The same numbers as the report's own comparison from the ledger.
    run_cli("report", str(fails), "--out", str(fails.parent / "worst"), "--no-plots", "--no-html",
            "--failed-as", "worst", check=True)
    report = (fails.parent / "worst" / "BENCHMARK_REPORT.md").read_text()
    line = next(x for x in report.splitlines() if x.startswith("| t1 | b |"))
    assert line.split("|")[4].strip().startswith("0.07")


def test_a_merged_report_keeps_failures_seed_counts_and_hardware(fails, tmp_path):
    out = tmp_path / "merged"
    other = tmp_path / "other"
    shutil.copytree(fails, other)
    run_cli("report", str(fails), str(other), "--out", str(out), "--no-plots", "--no-html", check=True)
    report = (out / "BENCHMARK_REPORT.md").read_text()
    assert "No failed runs" not in report
    failure_rows = [x for x in report.splitlines() if x.startswith("| t1/") and "exception" in x]
    assert len(failure_rows) == 2 and all("seed is cursed" in x for x in failure_rows)
    seeds = {x.split("|")[2].strip().split(" ")[0]: x.split("|")[3].strip() for x in report.splitlines()
             if x.startswith("| ") and "± " in x and "@" in x.split("|")[2]}
    assert sorted(seeds.values()) == ["3/4 (1 failed)", "3/4 (1 failed)", "4/4", "4/4"]
    hardware = next(x for x in report.splitlines() if x.startswith("**Hardware:**"))
    assert "unknown" not in hardware and "CPU:" in hardware
    board = (out / "BENCHMARKS.md").read_text()
    assert board.count("(3/4 seeds)") >= 2


def test_benchmarks_md_marks_a_partial_lm_eval_score(tmp_path):
    root = tmp_path / "eval"
    root.mkdir()
    (root / "run.py").write_text(LM_EVAL_SCRIPT)
    (root / "results.json").write_text(json.dumps(results_v049(100)))
    (root / "bench.yaml").write_text(textwrap.dedent(LM_EVAL_SPEC).lstrip())
    run_cli("run", "bench.yaml", cwd=root, check=True)
    board = (root / "results" / "ckpt-eval" / "BENCHMARKS.md").read_text()
    row = next(x for x in board.splitlines() if x.startswith("| gsm8k |"))
    assert "(partial†)" in row
    assert "evaluated on part of their task's samples" in board
