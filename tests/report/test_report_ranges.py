"""Ranges respected: a metric's declared or default range bounds its intervals and plots."""

from __future__ import annotations

import math
import statistics
import textwrap
from pathlib import Path

import pytest
from scipy import stats as sps

from benchlab.stats.ranges import default_range, metric_ranges
from benchlab_testing import run_cli

# Writes an lm-evaluation-harness results file whose gsm8k exact match depends on the seed.
LM_SCRIPT = """
import json, os
seed = int(os.environ["BENCHLAB_SEED"])
acc = [0.96, 1.0, 1.0][seed]
out = os.path.join(os.environ["BENCHLAB_RUN_DIR"], "lm", "model")
os.makedirs(out, exist_ok=True)
with open(os.path.join(out, "results_2025-01-01T00-00-00.json"), "w") as f:
    json.dump({"results": {"gsm8k": {"alias": "gsm8k", "exact_match,strict-match": acc,
                                     "exact_match_stderr,strict-match": 0.0137}}}, f)
"""

LM_SPEC = """
name: lm
tasks:
  - name: gsm8k
configs:
  - name: ckpt
seeds: 3
command: python run.py
metrics:
  primary:
    name: exact_match
    from: {lm_eval: lm, task: gsm8k, key: "exact_match,strict-match"}
"""

# CartPole-like returns capped at 500, logged as curves: the t band runs past the cap.
CART_SCRIPT = """
import json, os
seed = int(os.environ["BENCHLAB_SEED"])
final = [500.0, 500.0, 380.0][seed]
run_dir = os.environ["BENCHLAB_RUN_DIR"]
with open(os.path.join(run_dir, "metrics.jsonl"), "w") as f:
    for step in range(5):
        f.write(json.dumps({"step": step * 100, "return": min(500.0, final * (step + 1) / 4)}) + "\\n")
with open(os.path.join(run_dir, "metrics.json"), "w") as f:
    json.dump({"return": final}, f)
"""

CART_SPEC = """
name: cart
tasks:
  - name: cartpole
    target: 475
configs:
  - name: ppo
seeds: 3
command: python run.py
metrics:
  primary: {name: return, goal: max, range: [0, 500]}
"""


def _world(root: Path, script: str, spec: str) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / "run.py").write_text(script)
    (root / "bench.yaml").write_text(textwrap.dedent(spec).lstrip())
    done = run_cli("run", "bench.yaml", "--results", "out", "--no-report", cwd=root, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    return root / "out"


def _ci_cell(text: str, config: str) -> str:
    line = next(ln for ln in text.splitlines() if ln.startswith("| ") and f"| {config}" in ln)
    return [c.strip() for c in line.strip("|").split("|")][4]


def test_lm_eval_accuracy_interval_stays_inside_0_1(tmp_path: Path):
    results = _world(tmp_path / "w", LM_SCRIPT, LM_SPEC)
    done = run_cli("report", str(results), "--out", str(tmp_path / "rep"), "--no-plots",
                   timeout=300)
    assert done.returncode == 0, done.stderr
    text = (tmp_path / "rep" / "BENCHMARK_REPORT.md").read_text()
    values = [0.96, 1.0, 1.0]
    mean = statistics.mean(values)
    half = sps.t.ppf(0.975, 2) * statistics.stdev(values) / 3**0.5
    assert mean + half > 1  # the Student-t interval would claim accuracies above 1
    # Cut at 1: [mean - half, 1], to the decimals the cut interval's half-width supports.
    width = (1 - (mean - half)) / 2
    at = max(0, 1 - math.floor(math.log10(width)))
    assert _ci_cell(text, "ckpt") == f"[{mean - half:.{at}f}, {1:.{at}f}]"
    assert "interval of the mean (Student-t, cut at the range [0, 1])" in text
    page = (tmp_path / "rep" / "report.html").read_text()
    assert f"[{mean - half:.{at}f}, {1:.{at}f}]" in page
    assert "cut at the range [0, 1]" in page


def test_declared_range_cuts_curve_bands_and_score_intervals(tmp_path: Path):
    results = _world(tmp_path / "w", CART_SCRIPT, CART_SPEC)
    done = run_cli("report", str(results), "--out", str(tmp_path / "rep"), timeout=300)
    assert done.returncode == 0, done.stderr
    text = (tmp_path / "rep" / "BENCHMARK_REPORT.md").read_text()
    values = [500.0, 500.0, 380.0]
    mean = statistics.mean(values)
    half = sps.t.ppf(0.975, 2) * statistics.stdev(values) / 3**0.5
    assert mean + half > 500
    assert _ci_cell(text, "ppo").endswith(", 500]")
    assert "bands are cut at the metric's range [0, 500]" in text  # the curves' caption
    assert "interval over seeds, cut at the metric's range [0, 500]" in text  # the scores'


def test_a_range_whose_low_is_not_below_its_high_is_refused(tmp_path: Path):
    (tmp_path / "bench.yaml").write_text(textwrap.dedent("""
        name: bad
        tasks: [{name: t}]
        configs: [{name: c}]
        command: python run.py
        metrics:
          primary: {name: acc, range: [1, 0]}
        """).lstrip())
    done = run_cli("validate", "bench.yaml", cwd=tmp_path)
    assert done.returncode == 2
    assert "metrics.primary.range" in done.stderr
    assert "expected [low, high] with low < high, got [1, 0]" in done.stderr
    assert "Traceback" not in done.stderr


def test_default_ranges_of_lm_eval_and_eval_accuracies():
    assert default_range("em", {"lm_eval": "lm", "key": "exact_match,strict-match"}) == (0, 1)
    assert default_range("acc", {"lm_eval": "lm", "key": "acc_norm,none"}) == (0, 1)
    assert default_range("ppl", {"lm_eval": "lm", "key": "word_perplexity,none"}) is None
    assert default_range("bleu", {"lm_eval": "lm", "key": "bleu,none"}) is None  # 0..100
    assert default_range("arith/pass@1/accuracy") == (0, 1)
    assert default_range("gsm/pass@1[avg-of-4]/accuracy") == (0, 1)
    assert default_range("gsm/majority@4/no_answer") == (0, 1)
    assert default_range("arith/pass@1/num_entries") is None
    assert default_range("reward") is None
    spec = {"metrics": {
        "primary": {"name": "acc", "from": {"lm_eval": "lm", "task": "t", "key": "acc,none"},
                    "range": [0, 100]},
        "secondary": ["loss", {"name": "em", "from": {"lm_eval": "lm", "task": "t",
                                                       "key": "exact_match,none"}}]}}
    # A declared range wins over the default; a bare name is unbounded.
    assert metric_ranges(spec) == {"acc": (0.0, 100.0), "em": (0.0, 1.0)}


@pytest.mark.parametrize("bounds", [(0.0, 1.0), (-1.0, 1.0)])
def test_bound_interval_never_leaves_the_range(bounds):
    from benchlab.stats.accounting import bound_interval

    assert bound_interval(0.9502, 1.005, bounds) == (0.9502, 1.0)
    assert bound_interval(-2.0, 3.0, bounds) == bounds
    assert bound_interval(None, 0.5, bounds) == (None, 0.5)


def test_analyze_cuts_the_intervals_of_a_range_given_on_the_command_line(tmp_path: Path):
    import json

    csv = tmp_path / "acc.csv"
    values = [0.96, 1.0, 1.0]
    csv.write_text("task,config,seed,value\n" + "".join(
        f"gsm8k,ckpt,{s},{v}\n" for s, v in enumerate(values)))
    done = run_cli("analyze", str(csv), "--range", "0,1", "--json")
    assert done.returncode == 0, done.stderr
    (row,) = json.loads(done.stdout)["summary"]
    half = sps.t.ppf(0.975, 2) * statistics.stdev(values) / 3**0.5
    assert row["ci_low"] == pytest.approx(statistics.mean(values) - half)
    assert row["ci_high"] == 1.0
    assert row["ci_method"] == "Student-t, cut at the range [0, 1]"
    bad = run_cli("analyze", str(csv), "--range", "value=1,0")
    assert bad.returncode == 2 and "--range value=1,0: expected LOW < HIGH" in bad.stderr


def test_plotted_bands_and_intervals_never_pass_the_range(tmp_path: Path, monkeypatch):
    import numpy as np
    import pandas as pd
    from matplotlib.collections import LineCollection, PolyCollection

    from benchlab.report import plots
    from benchlab.results import BenchmarkInfo
    from benchlab.stats.curves import CurveSet
    from benchlab.stats.table import AnalysisOptions, describe_runs

    figures = []

    def keep(fig, folder, name, *args, **kwargs):  # the figure as drawn, before it is saved
        figures.append(fig)
        return f"plots/{name}"

    monkeypatch.setattr(plots, "save", keep)
    info = BenchmarkInfo(name="cart", primary="return", goal={"return": "max"}, baseline=None,
                         configs=["ppo"], tasks=["cartpole"])
    grid = np.array([0.0, 100.0, 200.0])
    runs = np.array([[100.0, 500.0, 500.0], [20.0, 100.0, 500.0], [60.0, 480.0, 380.0]])
    curve = CurveSet("return", "cartpole", grid, {"ppo": runs}, {"ppo": [0, 1, 2]})
    plots.plot_curves([curve], info, tmp_path, ranges={"return": (0.0, 500.0)})
    (band,) = [c for c in figures[0].axes[0].collections if isinstance(c, PolyCollection)]
    ys = np.concatenate([p.vertices[:, 1] for p in band.get_paths()])
    # Unclipped, the t band at step 100 runs from about -190 to 910.
    t = sps.t.ppf(0.975, 2) * runs[:, 1].std(ddof=1) / 3**0.5
    assert runs[:, 1].mean() + t > 600 and runs[:, 1].mean() - t < 0
    assert ys.max() <= 500.0 and ys.min() >= 0.0
    finals = pd.DataFrame({"task": "cartpole", "config": "ppo", "seed": [0, 1, 2],
                           "metric": "return", "value": runs[:, 2]})
    plots.plot_scores(describe_runs(finals, AnalysisOptions(goal={"return": "max"})), info, tmp_path, finals,
                      ranges={"return": (0.0, 500.0)})
    ax = figures[1].axes[0]
    (bar,) = [c for c in ax.collections if isinstance(c, LineCollection)]
    xs = np.concatenate([s[:, 0] for s in bar.get_segments()])
    assert xs.max() == 500.0  # the interval is cut at the cap, not drawn to 630
    assert ax.get_xlim()[1] < 510.0  # the axis ends just past the cap (a 2% margin)


# Two environments whose returns are bounded differently: CartPole's in [0, 500], Acrobot's in [-500, 0].
TWO_ENVS_SCRIPT = """
import json, os
seed = int(os.environ["BENCHLAB_SEED"])
task = os.environ["BENCHLAB_TASK"]
final = {"cartpole": [500.0, 500.0, 380.0], "acrobot": [-4.0, -2.0, -200.0]}[task][seed]
with open(os.path.join(os.environ["BENCHLAB_RUN_DIR"], "metrics.json"), "w") as f:
    json.dump({"return": final}, f)
"""

TWO_ENVS_SPEC = """
name: envs
tasks:
  - {name: cartpole, range: {return: [0, 500]}}
  - {name: acrobot, range: {return: [-500, 0]}}
configs:
  - name: ppo
seeds: 3
command: python run.py
metrics:
  primary: {name: return, goal: max}
"""


def test_a_tasks_own_range_cuts_that_tasks_intervals(tmp_path: Path):
    results = _world(tmp_path / "w", TWO_ENVS_SCRIPT, TWO_ENVS_SPEC)
    done = run_cli("report", str(results), "--out", str(tmp_path / "rep"), "--no-plots", timeout=300)
    assert done.returncode == 0, done.stderr
    text = (tmp_path / "rep" / "BENCHMARK_REPORT.md").read_text()
    sections = text.split("### ")
    for task, values, bound in (("cartpole", [500.0, 500.0, 380.0], 500),
                                ("acrobot", [-4.0, -2.0, -200.0], 0)):
        mean = statistics.mean(values)
        half = sps.t.ppf(0.975, 2) * statistics.stdev(values) / 3**0.5
        assert mean + half > bound  # the Student-t interval would pass the task's bound
        section = next(s for s in sections if s.startswith(task))
        cell = _ci_cell(section, "ppo")
        assert cell.endswith(f", {bound}]") or cell.endswith(f", {bound:.1f}]"), (task, cell)
    assert metric_ranges({"tasks": [{"name": "a", "range": {"r": [0, 1]}}]}) == {"a/r": (0.0, 1.0)}


def test_a_tasks_range_must_name_a_metric_and_be_ordered(tmp_path: Path):
    (tmp_path / "bench.yaml").write_text(textwrap.dedent("""
        name: bad
        tasks: [{name: t, range: {retrun: [0, 500]}}, {name: u, range: {return: [5, 1]}}]
        configs: [{name: c}]
        command: python run.py
        metrics: {primary: return}
        """).lstrip())
    done = run_cli("validate", "bench.yaml", cwd=tmp_path)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert "tasks[0].range.retrun: names no metric of the spec: 'retrun' (metrics: return)" in done.stderr
    assert "return: expected [low, high] with low < high, got [5, 1]" in done.stderr


def test_curve_bands_are_cut_at_each_tasks_own_range(tmp_path: Path, monkeypatch):
    import numpy as np
    from matplotlib.collections import PolyCollection

    from benchlab.report import plots
    from benchlab.results import BenchmarkInfo
    from benchlab.stats.curves import CurveSet

    figures = []

    def keep(fig, folder, name, *args, **kwargs):
        figures.append(fig)
        return f"plots/{name}"

    monkeypatch.setattr(plots, "save", keep)
    info = BenchmarkInfo(name="rl", primary="return", goal={"return": "max"}, baseline=None,
                         configs=["ppo"], tasks=["cartpole", "acrobot"])
    grid = np.array([0.0, 100.0, 200.0])
    cart = np.array([[100.0, 500.0, 500.0], [20.0, 100.0, 500.0], [60.0, 480.0, 380.0]])
    acro = np.array([[-500.0, -100.0, -80.0], [-500.0, -480.0, -90.0], [-500.0, -20.0, -85.0]])
    sets = [CurveSet("return", "cartpole", grid, {"ppo": cart}, {"ppo": [0, 1, 2]}),
            CurveSet("return", "acrobot", grid, {"ppo": acro}, {"ppo": [0, 1, 2]})]
    # The tasks' own ranges (TASK/METRIC keys, as metric_ranges writes them).
    (plot,) = plots.plot_curves(sets, info, tmp_path, ranges={"cartpole/return": (0.0, 500.0),
                                                              "acrobot/return": (-500.0, 0.0)})
    for ax, (low, high) in zip(figures[0].axes, [(0.0, 500.0), (-500.0, 0.0)], strict=False):
        (band,) = [c for c in ax.collections if isinstance(c, PolyCollection)]
        ys = np.concatenate([p.vertices[:, 1] for p in band.get_paths()])
        assert ys.min() >= low and ys.max() <= high
    assert "cartpole [0, 500], acrobot [-500, 0]" in plot.caption
