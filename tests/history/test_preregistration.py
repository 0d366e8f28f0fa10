"""The pre-registered analysis plan: hashed into the ledger at the first run, the report states it or
its deviations, and min_effect verdicts follow the CI (checked with scipy)."""

from __future__ import annotations

import hashlib
import json
import re
import sqlite3
import textwrap
from pathlib import Path

import numpy as np
import pytest
from scipy import stats as sps

from benchlab.history.preregistration import practical_verdict
from benchlab_testing import run_cli

# Per seed, "far" is the baseline + 0.1, "same" the baseline ± 0.001, "near" the baseline + 0.02
# with a large per-seed spread: three different min_effect verdicts with min_effect 0.01.
RUN = """
import json, os, sys
config = sys.argv[1]
seed = int(os.environ["BENCHLAB_SEED"])
base = 0.5 + [0.013, -0.02, 0.007, 0.031, -0.004, 0.018][seed]
jitter = [0.3, -0.7, 0.5, -0.2, 0.9, -0.4][seed]
score = {"base": base, "far": base + 0.1 + 0.002 * jitter, "same": base + 0.001 * jitter,
         "near": base + 0.02 + 0.05 * jitter, "late": base}[config]
json.dump({"score": score}, open(os.path.join(os.environ["BENCHLAB_RUN_DIR"], "metrics.json"), "w"))
"""

SPEC = """
name: plan
tasks: [{name: t}]
configs: [{name: base}, {name: far}, {name: same}, {name: near}]
seeds: 6
command: python run.py {config}
metrics: {primary: score}
baseline: base
analysis:
  metric: score
  alpha: 0.05
  comparisons: [[base, far], [base, same], [base, near]]
  min_effect: 0.01
"""


def _registered(results):
    with sqlite3.connect(results / "benchlab.db") as db:
        (value,) = db.execute("SELECT value FROM meta WHERE key = 'preregistration'").fetchone()
    return json.loads(value)


@pytest.fixture
def bench(tmp_path):
    (tmp_path / "run.py").write_text(RUN)
    (tmp_path / "bench.yaml").write_text(textwrap.dedent(SPEC).lstrip())
    return tmp_path


def _scores(config: str) -> np.ndarray:
    ns: dict = {}
    base = np.array([0.5 + x for x in [0.013, -0.02, 0.007, 0.031, -0.004, 0.018]])
    jitter = np.array([0.3, -0.7, 0.5, -0.2, 0.9, -0.4])
    ns = {"base": base, "far": base + 0.1 + 0.002 * jitter, "same": base + 0.001 * jitter,
          "near": base + 0.02 + 0.05 * jitter}
    return ns[config]


def test_report_states_the_plan_as_pre_registered_with_min_effect_verdicts(bench):
    run_cli("run", "bench.yaml", cwd=bench, check=True)
    results = bench / "results" / "plan"
    reg = _registered(results)
    plan = {"metric": "score", "summary": "final", "alpha": 0.05, "test": "t",
            "comparisons": [["base", "far"], ["base", "same"], ["base", "near"]], "min_effect": 0.01}
    assert reg["plan"] == plan and reg["completed_before"] == 0
    assert reg["hash"] == hashlib.sha256(json.dumps(plan, sort_keys=True).encode()).hexdigest()
    report = (results / "BENCHMARK_REPORT.md").read_text()
    assert f"Analysis as pre-registered (hash {reg['hash'][:12]}, registered at {reg['registered_at']})." in report
    rows = {line.split("|")[2].strip(): line for line in report.splitlines() if line.startswith("| t | ")}
    for config, verdict in (("far", "meaningful improvement"), ("same", "practically equivalent"),
                            ("near", "undecided")):
        d = _scores(config) - _scores("base")
        # The interval the significance uses too: Bonferroni-adjusted over the 3 planned comparisons.
        lo, hi = sps.t.interval(1 - 0.05 / 3, len(d) - 1, loc=d.mean(), scale=sps.sem(d))
        # The verdict the CI calls for, by hand, with min_effect 0.01.
        expected = ("meaningful improvement" if lo > 0.01 else "practically equivalent"
                    if -0.01 < lo and hi < 0.01 else "undecided")
        assert expected == verdict, (config, lo, hi)
        row = rows[f"{config} vs base"]
        assert verdict in row and f"[{lo:+.3g}, {hi:+.3g}]" in row


def test_deviations_are_listed_alpha_and_a_config_added_after_results(bench):
    run_cli("run", "bench.yaml", cwd=bench, check=True)
    spec = bench / "bench.yaml"
    spec.write_text(spec.read_text().replace("alpha: 0.05", "alpha: 0.1").replace(
        "{name: near}]", "{name: near}, {name: late}]"))
    run_cli("run", "bench.yaml", cwd=bench, check=True)
    results = bench / "results" / "plan"
    reg = _registered(results)
    assert reg["plan"]["alpha"] == 0.05  # the registration is kept as first made
    report = (results / "BENCHMARK_REPORT.md").read_text()
    assert (f"Analysis **deviates** from the pre-registered plan (hash {reg['hash'][:12]}, "
            f"registered at {reg['registered_at']}):") in report
    assert "- alpha changed: 0.05 registered, 0.1 now" in report
    assert "- config(s) added after results existed: late" in report
    # docs/history.md shows this section as the report writes it (hash and time aside).
    doc = (Path(__file__).resolve().parents[2] / "docs" / "history.md").read_text()
    block = next(b for b in re.findall(r"```markdown\n(.*?)```", doc, re.S) if b.startswith("## Analysis plan"))
    shown = block.replace("6eefc6fed978", reg["hash"][:12]).replace("2026-11-23T14:04:53+00:00", reg["registered_at"])
    import os

    if os.environ.get("SEQSTATS_DUMP"):
        Path(os.environ["SEQSTATS_DUMP"]).write_text(report)
    assert shown.strip() in report


def test_a_plan_added_after_results_is_not_called_a_pre_registration(bench):
    spec = bench / "bench.yaml"
    text = spec.read_text()
    spec.write_text(text[:text.index("analysis:")])
    run_cli("run", "bench.yaml", "--no-report", cwd=bench, check=True)
    spec.write_text(text)
    run_cli("run", "bench.yaml", cwd=bench, check=True)
    report = (bench / "results" / "plan" / "BENCHMARK_REPORT.md").read_text()
    assert "- registered after 24 run(s) had completed: not a pre-registration" in report


@pytest.mark.parametrize(("lo", "hi", "goal", "verdict"), [
    (0.02, 0.05, "max", "meaningful improvement"),
    (0.02, 0.05, "min", "meaningful degradation"),
    (-0.005, 0.008, "max", "practically equivalent"),
    (0.005, 0.03, "max", "undecided"),
    (-0.03, -0.02, "min", "meaningful improvement"),
])
def test_practical_verdict_compares_the_ci_with_min_effect(lo, hi, goal, verdict):
    assert practical_verdict(lo, hi, 0.01, goal).startswith(verdict)


def _planned_rows(report: str, section: str = "registered") -> dict[str, str]:
    """The rows of the Analysis plan's registered table, or of its exploratory one."""
    plan = report.split("## Analysis plan")[1].split("\n## ")[0]
    registered, _, exploratory = plan.partition("Exploratory")
    part = registered if section == "registered" else exploratory
    return {line.split("|")[2].strip(): line for line in part.splitlines() if line.startswith("| t | ")}


def _holm(p):
    """Holm's step-down adjustment, by hand."""
    order = np.argsort(p)
    out, running = np.empty(len(p)), 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (len(p) - rank) * p[i]))
        out[i] = running
    return out


def test_a_config_added_after_registration_leaves_the_registered_verdicts_and_the_rebuild_keeps_them(bench):
    spec = bench / "bench.yaml"
    spec.write_text(spec.read_text().replace("  comparisons: [[base, far], [base, same], [base, near]]\n", ""))
    run_cli("run", "bench.yaml", cwd=bench, check=True)  # every config against base: 3 comparisons
    results = bench / "results" / "plan"
    before = _planned_rows((results / "BENCHMARK_REPORT.md").read_text())
    assert sorted(before) == ["far vs base", "near vs base", "same vs base"]
    # The registered family's p-values: paired t-tests (scipy), Holm over these three alone.
    names = ["far", "same", "near"]
    raw = np.array([sps.ttest_rel(_scores(c), _scores("base")).pvalue for c in names])
    for name, p in zip(names, _holm(raw), strict=True):
        assert f"| {p:.3g} |" in before[f"{name} vs base"]

    spec.write_text(spec.read_text().replace("{name: near}]", "{name: near}, {name: late}]"))
    run_cli("run", "bench.yaml", cwd=bench, check=True)
    report = (results / "BENCHMARK_REPORT.md").read_text()
    assert _planned_rows(report) == before  # the registered verdicts did not move
    late = _planned_rows(report, "exploratory")
    assert list(late) == ["late vs base"]
    assert "config(s) added after results existed: late (their comparisons are exploratory" in report

    registered = _registered(results)
    (results / "benchlab.db").unlink()  # the ledger lost: rebuilt from the run directories
    rebuilt = run_cli("collect", str(results), "--rebuild", cwd=bench)
    assert rebuilt.returncode == 0, rebuilt.stderr
    assert _registered(results) == registered
    run_cli("report", str(results), "--no-plots", "--no-html", cwd=bench, check=True)
    report = (results / "BENCHMARK_REPORT.md").read_text()
    assert f"(hash {registered['hash'][:12]}, registered at {registered['registered_at']})" in report
    assert "not a pre-registration" not in report
    assert _planned_rows(report) == before and list(_planned_rows(report, "exploratory")) == ["late vs base"]


def test_a_zero_width_interval_is_never_practically_equivalent():
    # Every seed the same difference (identical runs): [+0, +0] is no evidence of equivalence.
    assert practical_verdict(0.0, 0.0, 0.01, "max").startswith("undecided")
    assert practical_verdict(0.004, 0.004, 0.01, "min").startswith("undecided")


def test_a_meaningful_change_is_always_significant_with_the_same_interval():
    import pandas as pd

    from benchlab.history.preregistration import judge
    from benchlab.ledger import AnalysisPlan

    # Three comparisons: one unadjusted 95% interval below -min_effect whose Holm p is above alpha
    # was "not significant" beside "meaningful degradation"; with one interval both agree.
    rng = np.random.default_rng(7)
    rows = []
    base = rng.normal(0.5, 0.01, 4)
    shifts = {"base": 0.0, "a": -0.05, "b": -0.04, "c": 0.0}
    noise = {"a": [0.0217, -0.0217, 0.0217, -0.0217], "b": [0.002, -0.002, 0.0025, -0.0025],
             "c": [0.0, 0.001, -0.001, 0.0]}
    for config, shift in shifts.items():
        for seed in range(4):
            value = base[seed] + shift + (noise[config][seed] if config in noise else 0.0)
            rows.append({"task": "t", "config": config, "seed": seed, "metric": "score", "value": value})
    plan = AnalysisPlan(metric="score", summary="final", alpha=0.05, test="t",
                        comparisons=[("base", "a"), ("base", "b"), ("base", "c")], min_effect=0.01)
    # By hand: a's unadjusted 95% interval lies below -0.01 while its Holm p (2 x 0.028) is above 0.05.
    d_a = -0.05 + np.array(noise["a"])
    assert sps.t.interval(0.95, 3, loc=d_a.mean(), scale=sps.sem(d_a))[1] < -0.01
    assert 2 * sps.ttest_1samp(d_a, 0).pvalue > 0.05
    results = judge(pd.DataFrame(rows), plan, {"score": "max"}, list(shifts), reps=200)
    assert {r.candidate: r.significant for r in results} == {"a": False, "b": True, "c": False}
    for r in results:
        assert r.ci_method is not None and "1 − alpha/3" in r.ci_method
        d = np.array([base[s] + shifts[r.candidate] + noise[r.candidate][s] - base[s] for s in range(4)])
        lo, hi = sps.t.interval(1 - 0.05 / 3, 3, loc=d.mean(), scale=sps.sem(d))
        assert (r.ci_low, r.ci_high) == pytest.approx((lo, hi))
        if r.practical.startswith("meaningful"):
            assert r.significant is True, r
