"""Claims that count every seed: completed/planned everywhere, losses beside verdicts,
``--failed-as exclude|worst``, and a config that failed on every seed keeps its row."""

from __future__ import annotations

import json
import statistics
import textwrap
from pathlib import Path

import pandas as pd
import pytest
from scipy import stats as sps

from benchlab_testing import linked_run, run_cli, unlink_score

SEEDS = 6
# base: 0.90 + 0.004·seed; flaky: 0.95 + 0.002·seed on even seeds, NaN on odd ones (the
# ledger records those runs as failed); broken: exits 1 on every seed.
SCRIPT = """
import json, os, sys
cfg = sys.argv[1]
seed = int(os.environ["BENCHLAB_SEED"])
if cfg == "broken":
    sys.exit("boom")
value = 0.90 + 0.004 * seed if cfg == "base" else 0.95 + 0.002 * seed
if cfg == "flaky" and seed % 2:
    value = float("nan")
with open(os.path.join(os.environ["BENCHLAB_RUN_DIR"], "metrics.json"), "w") as f:
    json.dump({"acc": value}, f)
"""

SPEC = f"""
name: lossy
tasks:
  - name: mmlu
configs:
  - name: base
    params: {{cfg: base}}
  - name: flaky
    params: {{cfg: flaky}}
  - name: broken
    params: {{cfg: broken}}
seeds: {SEEDS}
retries: 0
command: python run.py {{cfg}}
metrics:
  primary: {{name: acc, goal: max, range: [0, 1]}}
baseline: base
"""

BASE = [0.90 + 0.004 * s for s in range(SEEDS)]
FLAKY_DONE = [0.95 + 0.002 * s for s in range(0, SEEDS, 2)]


@pytest.fixture(scope="module")
def results(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("lossy")
    (root / "run.py").write_text(SCRIPT)
    (root / "bench.yaml").write_text(textwrap.dedent(SPEC).lstrip())
    done = run_cli("run", "bench.yaml", "--results", "out", "-j", "2", "--no-report", cwd=root,
                   timeout=300)
    assert done.returncode == 1, done.stdout + done.stderr  # some runs failed
    return root / "out"


@pytest.fixture(scope="module")
def excluded(results: Path) -> Path:
    out = results.parent / "rep-exclude"
    done = run_cli("report", str(results), "--out", str(out), "--no-plots", timeout=300)
    assert done.returncode == 0, done.stderr
    return out


def _row(text: str, first: str) -> list[str]:
    (line,) = [ln for ln in text.splitlines() if ln.startswith(f"| {first} |")]
    return [c.strip() for c in line.strip("|").split("|")]


def _section(text: str, heading: str) -> str:
    start = text.index(f"\n{heading}\n")
    end = text.find("\n## ", start + len(heading) + 2)
    return text[start: end if end > 0 else None]


def test_benchmarks_md_marks_lost_seeds_and_keeps_a_config_that_always_failed(excluded: Path):
    text = (excluded / "BENCHMARKS.md").read_text()
    row = _row(text, "mmlu")
    assert row[0:2] == ["mmlu", "—"]
    flaky_mean, flaky_std = statistics.mean(FLAKY_DONE), statistics.stdev(FLAKY_DONE)
    # std 0.0040 to 2 significant digits: 4 decimals, the mean to the same.
    shown, href = unlink_score(row[3])
    assert shown == f"{flaky_mean:.4f} ± {flaky_std:.4f} (3/6 seeds)"
    # The score links to its median completed seed: 0.95, 0.954, 0.958 from seeds 0, 2, 4.
    run = linked_run(excluded, href)
    assert (run["task"], run["config"], run["seed"]) == ("mmlu", "flaky", 2)
    assert row[4] == "✗ failed (0/6 seeds)"
    assert row[5] == "flaky (3/6 seeds)"
    assert "(6/6 seeds)" not in row[2]  # a config that lost nothing carries no mark


def test_results_table_shows_completed_over_planned_and_the_failed_row(excluded: Path):
    text = (excluded / "BENCHMARK_REPORT.md").read_text()
    table = _section(text, "### mmlu")
    rows = {r[1].replace(" ⚠", ""): r for r in ([c.strip() for c in ln.strip("|").split("|")]
                                                 for ln in table.splitlines() if ln.startswith("| "))}
    assert rows["base (baseline)"][2] == "6/6"
    assert rows["flaky"][2] == "3/6 (3 failed)"
    assert rows["broken ✗ failed"][2] == "0/6 (6 failed)"
    assert rows["broken ✗ failed"][3] == "no completed seed"


def test_verdict_says_beside_it_that_a_side_lost_seeds(excluded: Path):
    text = (excluded / "BENCHMARK_REPORT.md").read_text()
    comp = _section(text, "## Statistical comparisons")
    flaky = next(r for r in ([c.strip() for c in ln.strip("|").split("|")]
                             for ln in comp.splitlines() if ln.startswith("| mmlu |"))
                 if r[1] == "flaky")
    # Significant by Welch's t-test (6 + 3 runs, unpaired), but acc lies in [0, 1] and no test valid for
    # every distribution there can call a gain of 0.044 significant from so few seeds (it needs 70): no verdict.
    assert flaky[2] == ("— undetermined<br>⚠ flaky: 3 of 6 seeds failed (1, 3, 5), "
                        "excluded")
    assert flaky[-1] == "—"
    assert flaky[5] == "6/6, 3/6"
    broken = next(r for r in ([c.strip() for c in ln.strip("|").split("|")]
                              for ln in comp.splitlines() if ln.startswith("| mmlu |"))
                  if r[1] == "broken")
    assert broken[2].startswith("— undetermined<br>⚠ broken: 6 of 6 seeds failed")
    assert "Failed seeds are excluded (`--failed-as exclude`, the default)" in comp
    aggregate = {r[0]: r for r in ([c.strip() for c in ln.strip("|").split("|")]
                                   for ln in comp.split("Across tasks")[1].splitlines()
                                   if ln.startswith("| ") and not ln.startswith("| config"))}
    assert aggregate["flaky"][1] == "3/6" and aggregate["base"][1] == "6/6"
    summary = _section(text, "## Summary")
    assert ("has an undetermined difference (no test valid for these seeds decides; see the warnings) on mmlu "
            "(Holm-adjusted p=" in summary and "; flaky: 3 of 6 seeds failed (1, 3, 5), excluded)" in summary)
    assert "at least 70 seeds" in text
    assert "**broken** failed on every seed of every task and has no score there." in summary
    page = (excluded / "report.html").read_text()
    assert "— undetermined<br>⚠ flaky: 3 of 6 seeds failed (1, 3, 5), excluded" in page
    assert "broken ✗ failed" in page and "0/6 (6 failed)" in page


def test_failed_as_worst_scores_failed_seeds_at_the_range_bound(results: Path, tmp_path: Path):
    done = run_cli("report", str(results), "--out", str(tmp_path / "rep"), "--no-plots",
                   "--no-html", "--failed-as", "worst", timeout=300)
    assert done.returncode == 0, done.stderr
    text = (tmp_path / "rep" / "BENCHMARK_REPORT.md").read_text()
    # acc declares range [0, 1]: a failed seed scores 0, the worst accuracy there is.
    flaky = [v if s % 2 == 0 else 0.0 for s, v in
             enumerate(0.95 + 0.002 * s for s in range(SEEDS))]
    mean, std = statistics.mean(flaky), statistics.stdev(flaky)
    half = sps.t.ppf(0.975, SEEDS - 1) * std / SEEDS**0.5
    table = _section(text, "### mmlu")
    row = next([c.strip() for c in ln.strip("|").split("|")] for ln in table.splitlines()
               if ln.startswith("| ") and "| flaky" in ln)
    at = 2  # half-width 0.55: 2 significant digits are 2 decimals
    assert row[2] == "3/6 (3 failed)"
    assert row[3] == f"{mean:.{at}f} ± {std:.{at}f}"
    # The t interval runs past both ends of [0, 1]; cut at the range it stays inside.
    assert mean - half < 0 and mean + half > 1
    assert row[4] == f"[{0:.{at}f}, {1:.{at}f}]"
    assert "interval of the mean (Student-t, cut at the range [0, 1])" in text
    comp = _section(text, "## Statistical comparisons")
    assert "Failed seeds are scored as the worst value (`--failed-as worst`)" in comp
    p = sps.ttest_rel(flaky, BASE).pvalue
    flaky_row = next(r for r in ([c.strip() for c in ln.strip("|").split("|")]
                                 for ln in comp.splitlines() if ln.startswith("| mmlu |"))
                     if r[1] == "flaky")
    assert float(flaky_row[7].split()[1]) == pytest.approx(p, rel=1e-2)
    assert "significantly better" not in flaky_row[2]
    assert "scored as the worst value 0" in flaky_row[2]
    bench = (tmp_path / "rep" / "BENCHMARKS.md").read_text()
    assert "`--failed-as worst`" in bench
    assert _row(bench, "mmlu")[4].startswith("0 ± 0")  # broken: every seed scored 0


def test_compare_names_the_loss_and_honours_failed_as(results: Path):
    done = run_cli("compare", str(results), "--candidate", "flaky", "--json")
    assert done.returncode == 0, done.stderr
    (row,) = json.loads(done.stdout)["comparisons"]
    assert row["baseline_seeds"] == "6/6" and row["candidate_seeds"] == "3/6"
    assert row["caveat"] == "flaky: 3 of 6 seeds failed (1, 3, 5), excluded"
    assert json.loads(done.stdout)["methods"]["failed_as"] == "exclude"
    worst = run_cli("compare", str(results), "--candidate", "flaky", "--failed-as", "worst",
                    "--json")
    assert worst.returncode == 0, worst.stderr
    (row,) = json.loads(worst.stdout)["comparisons"]
    flaky = [0.95 + 0.002 * s if s % 2 == 0 else 0.0 for s in range(SEEDS)]
    assert row["mean_diff"] == pytest.approx(statistics.mean(flaky) - statistics.mean(BASE))
    assert row["n"] == SEEDS
    text = run_cli("compare", str(results), "--candidate", "flaky")
    assert "failed seeds: excluded" in text.stdout and "3 of 6 seeds failed" in text.stdout
    bad = run_cli("compare", str(results), "--candidate", "flaky", "--failed-as", "zero")
    assert bad.returncode == 2 and "Invalid value for '--failed-as'" in bad.stderr
    assert "Traceback" not in bad.stderr


def test_analyze_counts_nan_seeds_of_a_csv_as_failed(tmp_path: Path):
    rows = [{"task": "t", "config": "a", "seed": s, "value": 1.0 + 0.1 * s} for s in range(4)]
    rows += [{"task": "t", "config": "b", "seed": s,
              "value": float("nan") if s == 3 else 2.0 + 0.05 * s} for s in range(4)]
    rows += [{"task": "t", "config": "c", "seed": s, "value": float("nan")} for s in range(4)]
    csv = tmp_path / "t.csv"
    pd.DataFrame(rows).to_csv(csv, index=False)
    done = run_cli("analyze", str(csv), "--baseline", "a", "--json")
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    summary = {r["config"]: r for r in out["summary"]}
    assert (summary["b"]["completed"], summary["b"]["planned"]) == (3, 4)
    assert summary["b"]["failed_seeds"] == [3]
    assert summary["c"]["n"] == 0 and summary["c"]["completed"] == 0  # kept, not dropped
    comps = {r["candidate"]: r for r in out["comparisons"]}
    assert comps["c"]["significant"] is None and comps["c"]["candidate_seeds"] == "0/4"
    assert comps["b"]["caveat"] == "b: 1 of 4 seeds failed (3), excluded"
    worst = json.loads(run_cli("analyze", str(csv), "--baseline", "a", "--failed-as", "worst",
                               "--json").stdout)
    # No range for a CSV: the worst value observed on the task, 1.0 (a, seed 0).
    b = [2.0, 2.05, 2.10, 1.0]
    row = next(r for r in worst["comparisons"] if r["candidate"] == "b")
    assert row["mean_diff"] == pytest.approx(statistics.mean(b) - statistics.mean(
        [1.0, 1.1, 1.2, 1.3]))
    assert row["caveat"] == "b: 1 of 4 seeds failed (3), scored as the worst value 1"
