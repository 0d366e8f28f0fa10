"""The results are the spec's: what a results folder shows after the spec changed under it.

Every test edits a spec between real `benchlab run`s and reads what `status`,
`report`, `compare` and `benchlab.load` show: the runs of the spec as it is now,
with the runs it no longer names kept in the ledger but counted apart.
"""

from __future__ import annotations

import json
import re
import sqlite3
import subprocess
from pathlib import Path

import pandas as pd
import pytest

from benchlab.results import load
from benchlab_testing import BASIC_SPEC, doc_blocks, run_cli

ROOT = Path(__file__).resolve().parents[2]

# Config ``fast`` scores far above the others (base 0.9 on every task), so it is "best" while it is
# in the spec.
WITH_FAST = """
name: versions
tasks:
  - name: t1
    params: {base: 0.5}
    target: 0.55
configs:
  - name: a
    params: {extra: 1}
  - name: b
    params: {extra: 2}
  - name: fast
    params: {extra: 3, base: 0.9}
seeds: 3
command: python run.py base={base} extra={extra}
metrics:
  primary: {name: score, goal: max}
baseline: a
retries: 0
"""
WITHOUT_FAST = WITH_FAST.replace("""  - name: fast
    params: {extra: 3, base: 0.9}
""", "").replace("seeds: 3", "seeds: 2")


def _attempts(results: Path) -> int:
    with sqlite3.connect(results / "benchlab.db") as db:
        return db.execute("SELECT COUNT(*) FROM attempts").fetchone()[0]


def _doc_block(containing: str) -> list[str]:
    """The lines of the console block of docs/spec.md that holds ``containing``."""
    blocks = doc_blocks(ROOT / "docs" / "spec.md", "console")
    return next(b for b in blocks if containing in b).splitlines()


def test_a_removed_config_and_cut_seeds_leave_status_report_compare_and_load(make_bench):
    bench = make_bench(WITH_FAST)
    bench.results = bench.root / "results" / "versions"  # the default folder, beside the spec
    bench.cli("run", "bench.yaml", check=True)
    assert "| fast" in (bench.results / "BENCHMARKS.md").read_text()
    bench.spec.write_text(WITHOUT_FAST)

    again = bench.cli("run", "bench.yaml")
    assert again.returncode == 0, again.stderr
    assert "4 of 4 runs already done" in again.stdout

    # The report is the spec's: no fast in the leaderboard, 2 seeds of a and b in the table.
    assert "fast" not in (bench.results / "BENCHMARKS.md").read_text()
    csv = pd.read_csv(bench.results / "results.csv")
    assert set(csv["config"]) == {"a", "b"} and set(csv["seed"]) == {0, 1}
    report = (bench.results / "BENCHMARK_REPORT.md").read_text()
    assert "**Seeds per config:** 2/2 (seeds 0–1)" in report
    assert "fast" not in report

    # status counts the 4 runs of the spec, and the other 5 apart, as docs/spec.md shows.
    status = bench.cli("status")
    assert status.returncode == 0, status.stderr
    assert "4 runs — 4 completed" in status.stdout
    assert "5 runs not in the spec (5 completed)" in status.stdout
    listing = bench.cli("status", "--all", check=True).stdout
    doc = _doc_block("not in the spec")
    assert doc[0] == "$ benchlab status" and status.stdout.splitlines() == doc[1:3]
    assert doc[3] == "$ benchlab status --all" and doc[-1] in listing.splitlines()
    data = json.loads(bench.cli("status", "--all", "--json", check=True).stdout)
    assert data["total"] == 4 and data["counts"] == {"completed": 4}
    outside = sorted((r["run"], r["reason"]) for r in data["not_in_spec"]["runs"])
    assert outside == [("t1/a/s2", "removed"), ("t1/b/s2", "removed"), ("t1/fast/s0", "removed"),
                       ("t1/fast/s1", "removed"), ("t1/fast/s2", "removed")]
    assert "  t1/fast seeds 0, 1, 2 (3 completed): no longer in the spec" in listing

    # compare will not compare a config from another version of the benchmark.
    cmp = bench.cli("compare", "results/versions", "--candidate", "fast")
    assert cmp.returncode == 2
    assert "config 'fast' is not in the spec as last run; its 3 runs are kept in the ledger" in cmp.stderr
    assert "Traceback" not in cmp.stderr

    # load() is the spec's table; all_runs=True reads everything the ledger keeps.
    table = load(bench.results)
    assert set(table["config"]) == {"a", "b"} and set(table["seed"]) == {0, 1}
    everything = load(bench.results, all_runs=True, series=False)
    scores = everything[everything["metric"] == "score"]
    assert len(scores) == 9
    assert set(scores.loc[~scores["in_spec"], "config"]) == {"a", "b", "fast"}
    assert scores["in_spec"].sum() == 4
    assert _attempts(bench.results) == 9  # every attempt stays on record

    # A ledger rebuilt from the run directories knows the same spec.
    bench.cli("collect", "--rebuild", "results/versions", check=True)
    rebuilt = json.loads(bench.cli("status", "--json", check=True).stdout)
    assert rebuilt["counts"] == {"completed": 4} and rebuilt["not_in_spec"]["total"] == 5


def test_running_the_old_spec_after_an_edit_shows_one_version(make_bench):
    bench = make_bench(BASIC_SPEC)
    bench.cli("run", "bench.yaml", "-r", "out", "--no-report", check=True)
    # The edit: a third seed, and a changed param of task t1 (base 0.5 -> 0.6).
    bench.spec.write_text(BASIC_SPEC.replace("seeds: 2", "seeds: 3").replace("{base: 0.5}", "{base: 0.6}"))
    bench.cli("run", "bench.yaml", "-r", "out", "--no-report", check=True)
    bench.spec.write_text(BASIC_SPEC)  # back to the old spec
    old = bench.cli("run", "bench.yaml", "-r", "out", "--no-report")
    assert old.returncode == 0 and "8 of 8 runs already done" in old.stdout

    table = load(bench.results, series=False)
    scores = table[table["metric"] == "score"]
    assert len(scores) == 8 and set(scores["seed"]) == {0, 1}
    t1 = scores[scores["task"] == "t1"].sort_values(["config", "seed"])["value"].tolist()
    assert t1 == pytest.approx([0.50, 0.51, 0.50, 0.51])  # the old params: base 0.5 + seed / 100
    status = json.loads(bench.cli("status", "out", "--all", "--json", check=True).stdout)
    assert status["total"] == 8 and status["counts"] == {"completed": 8}
    reasons = [r["reason"] for r in status["not_in_spec"]["runs"]]
    # t1's edited runs on seeds 0 and 1 were superseded; the seed-2 runs were removed.
    assert sorted(reasons) == ["removed"] * 4 + ["superseded"] * 4


def test_seeds_line_gives_completed_over_planned_per_config(make_bench):
    bench = make_bench(BASIC_SPEC.replace("{extra: 1}", "{extra: 1, fail_seed: -1}")
                       .replace("{extra: 2}", "{extra: 2, fail_seed: 1}")
                       .replace("extra={extra}", "extra={extra} fail_seed={fail_seed}")
                       .replace("retries: 1", "retries: 0"))
    proc = bench.cli("run", "bench.yaml", "-r", "out")
    assert proc.returncode == 1  # b fails on seed 1
    report = (bench.results / "BENCHMARK_REPORT.md").read_text()
    assert "**Seeds per config:** a 2/2, b 1/2 (seeds 0–1)" in report


def test_default_results_folder_is_beside_the_spec_from_any_directory(make_bench, tmp_path):
    bench = make_bench(BASIC_SPEC)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    first = run_cli("run", str(bench.spec), "--no-report", cwd=elsewhere)
    assert first.returncode == 0, first.stderr
    folder = bench.root / "results" / "basic"
    assert f"results: {folder}" in first.stdout
    assert (folder / "benchlab.db").exists() and not (elsewhere / "results").exists()
    second = bench.cli("run", "bench.yaml", "--no-report")  # from the spec's own folder
    assert second.returncode == 0, second.stderr
    assert "results: results/basic" in second.stdout
    assert "8 of 8 runs already done" in second.stdout


def test_another_spec_file_with_the_same_name_is_refused_unless_results_separates_them(make_bench):
    bench = make_bench(BASIC_SPEC)
    bench.cli("run", "bench.yaml", "--no-report", check=True)
    other = bench.root / "copy.yaml"
    other.write_text(BASIC_SPEC.replace("base={base}", "base={base} copy=1"))
    refused = bench.cli("run", "copy.yaml", "--no-report")
    assert refused.returncode == 2
    assert "Traceback" not in refused.stderr
    assert (f"holds the runs of {bench.spec} ('basic'); {other} ('basic') is another spec file with the "
            "same benchmark name: give it its own folder with --results") in " ".join(refused.stderr.split())
    with sqlite3.connect(bench.root / "results" / "basic" / "benchlab.db") as db:
        assert db.execute("SELECT COUNT(*) FROM runs").fetchone()[0] == 8  # nothing of copy.yaml's
    apart = bench.cli("run", "copy.yaml", "--results", "copy-results", "--no-report")
    assert apart.returncode == 0, apart.stderr
    assert "8 runs: 8 completed" in apart.stdout


def _git(root: Path, *args: str) -> None:
    subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@example.org", *args], cwd=root,
                   check=True, capture_output=True)


def test_changed_code_stops_run_and_allowed_is_told_before_skipping_and_rerun_all_runs_everything(make_bench):
    bench = make_bench(BASIC_SPEC)
    _git(bench.root, "init", "-q")
    _git(bench.root, "add", "run.py", "bench.yaml")
    _git(bench.root, "commit", "-qm", "first")
    bench.cli("run", "bench.yaml", "-r", "out", "--no-report", check=True)
    same = bench.cli("run", "bench.yaml", "-r", "out", "--no-report", check=True)
    assert "code under test changed" not in same.stdout
    # An edit of the spec alone, uncommitted and then committed, is not a change of the code.
    bench.spec.write_text(bench.spec.read_text() + "# a comment\n")
    spec_edit = bench.cli("run", "bench.yaml", "-r", "out", "--no-report", check=True)
    _git(bench.root, "commit", "-qam", "comment")
    spec_commit = bench.cli("run", "bench.yaml", "-r", "out", "--no-report", check=True)
    assert "code under test changed" not in spec_edit.stdout + spec_commit.stdout

    (bench.root / "run.py").write_text((bench.root / "run.py").read_text() + "# changed\n")
    stopped = bench.cli("run", "bench.yaml", "-r", "out", "--no-report")
    assert stopped.returncode == 2 and "Traceback" not in stopped.stderr
    assert "the code's uncommitted diff (no diff -> diff " in stopped.stderr
    assert _attempts(bench.results) == 8  # nothing ran
    changed = bench.cli("run", "bench.yaml", "-r", "out", "--no-report", "--allow-changed", check=True)
    out = " ".join(changed.stdout.split())
    assert "the code under test changed since 8 of the 8 finished runs ran" in out
    assert "it is now commit" in out and "with uncommitted changes" in out
    assert out.index("code under test changed") < out.index("8 of 8 runs already done")
    # docs/spec.md shows this very warning (its hashes and counts aside).
    doc = next(line for line in _doc_block("code under test changed") if line.startswith("warning:"))
    pattern = re.sub(r"\\ ", " ", re.escape(doc))
    pattern = re.sub(r"[0-9a-f]{8,10}", "[0-9a-f]+", pattern).replace("6", "[0-9]+")
    assert re.search(pattern, out), (pattern, out)

    forced = bench.cli("run", "bench.yaml", "-r", "out", "--no-report", "--rerun-all")
    assert forced.returncode == 0, forced.stderr
    assert "8 runs: 8 completed" in forced.stdout
    with sqlite3.connect(bench.results / "benchlab.db") as db:
        per_run = db.execute("SELECT COUNT(*), SUM(status = 'completed') FROM attempts GROUP BY run_id").fetchall()
    assert per_run == [(2, 2)] * 8  # the first attempts stay on record
    quiet = bench.cli("run", "bench.yaml", "-r", "out", "--no-report", check=True)
    assert "code under test changed" not in quiet.stdout
    dry = bench.cli("run", "bench.yaml", "-r", "out", "--force", "--dry-run", check=True)
    assert "8 runs would run" in dry.stdout
