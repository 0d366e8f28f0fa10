"""`compare`, `analyze` and the report agree on a results folder: one Holm family per metric (every
task and candidate against the baseline, named), and a config's curve summary on one step range per
task, the same whichever config it is compared with."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from statsmodels.stats.multitest import multipletests

from benchlab.plan import Run
from benchlab_testing import run_cli

SEEDS = range(5)


def _ledger(folder: Path, curves: dict[tuple[str, str, int], tuple[list[float], list[float]]]) -> None:
    from benchlab.ledger import Store

    with Store.create(folder) as store:
        store._set_meta(name="c", primary="score", goals={"score": "max"}, tasks=sorted({t for t, _, _ in curves}),
                        configs=sorted({c for _, c, _ in curves}), baseline="base")
        runs = [Run(run_id=f"{t}{c}{s}", benchmark="c", task=t, config=c, seed=s, params={}, command="x")
                for t, c, s in curves]
        store.register(runs)
        for run in runs:
            steps, vals = curves[(run.task, run.config, run.seed)]
            attempt, _ = store.start_attempt(run.run_id, host="h")
            store.finish_attempt(attempt, run.run_id, status="completed", run_status="completed",
                                 metrics={"score": vals[-1]},
                                 series={"score": (np.array(steps), np.array(vals))})


def _csv(folder: Path) -> str:
    """The folder's long-format table, as `benchlab analyze` reads it."""
    from benchlab.results import load

    path = folder.parent / f"{folder.name}.csv"
    load(folder).to_csv(path, index=False)
    return str(path)


def _json(*args: str) -> dict:
    proc = run_cli(*args, "--json", "--reps", "200")
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def _three_configs(folder: Path) -> None:
    rng = np.random.default_rng(7)
    curves = {}
    for task in ("t1", "t2"):
        for config, gain in (("base", 0.0), ("c1", 0.05), ("c2", 0.02)):
            for s in SEEDS:
                final = 0.6 + gain + 0.03 * rng.standard_normal()
                curves[(task, config, s)] = ([0.0, 10.0], [0.1, final])
    _ledger(folder, curves)


def test_seed_level_compare_adjusts_over_the_family_analyze_and_the_report_use(tmp_path: Path):
    _three_configs(tmp_path)
    analyzed = _json("analyze", _csv(tmp_path), "--baseline", "base")
    compared = _json("compare", str(tmp_path), "--candidate", "c1")
    from benchlab.report import analyze, gather
    from benchlab.results import read

    reported = analyze(gather(read(tmp_path))).analysis
    assert reported is not None

    family = analyzed["comparisons"]
    assert len(family) == 4  # two candidates on two tasks
    _, by_hand, _, _ = multipletests([c["t_pvalue"] for c in family], method="holm")
    holm = {(c["task"], c["candidate"]): p for c, p in zip(family, by_hand, strict=True)}
    assert {(c["task"], c["candidate"]) for c in compared["comparisons"]} == {("t1", "c1"), ("t2", "c1")}
    for c in compared["comparisons"]:
        assert c["p_holm"] == pytest.approx(holm[(c["task"], "c1")], rel=1e-12)
        assert c["holm_family"] == "metric score, m = 4"
    for c in family:
        assert c["p_holm"] == pytest.approx(holm[(c["task"], c["candidate"])], rel=1e-12)
    for c in reported.comparisons:
        assert c.p_holm == pytest.approx(holm[(c.task, c.candidate)], rel=1e-12)
        assert c.holm_family == "metric score, m = 4"
    assert run_cli("report", str(tmp_path), "--no-plots", "--no-html").returncode == 0
    report = (tmp_path / "BENCHMARK_REPORT.md").read_text()
    assert "one Holm family: metric score, m = 4, as in `benchlab compare` and `analyze`" in report
    # Only the pair asked for is shown.
    assert {r["config"] for r in compared["summary"]} == {"base", "c1"}
    text = run_cli("compare", str(tmp_path), "--candidate", "c1", "--reps", "200").stdout
    assert "one family per metric: metric score, m = 4" in text


def _auc(steps: np.ndarray, values: np.ndarray) -> float:
    return float(np.trapezoid(values, steps) / (steps[-1] - steps[0]))


def test_the_baselines_curve_summary_is_the_same_against_candidates_of_different_lengths(tmp_path: Path):
    # base and c1 log steps 0..1000, c2 stops at 600: the task's one range is [0, 600].
    rng = np.random.default_rng(3)
    long, short = np.arange(0, 1001, 100.0), np.arange(0, 601, 100.0)
    curves = {}
    for config, steps in (("base", long), ("c1", long), ("c2", short)):
        for s in SEEDS:
            curves[("t", config, s)] = (steps.tolist(), (np.sqrt(steps) * (1 + 0.1 * s)
                                                        + rng.normal(0, 0.5, steps.shape)).tolist())
    _ledger(tmp_path, curves)
    for summary in ("auc", "slope"):
        rows = []
        for cand in ("c1", "c2"):
            out = _json("compare", str(tmp_path), "--candidate", cand, "--summary", summary)
            (base,) = [r for r in out["summary"] if r["config"] == "base"]
            rows.append(base)
            assert any("the steps every run of the task reached" in w and "[0, 600]" in w for w in out["warnings"])
        assert rows[0]["mean"] == rows[1]["mean"] and rows[0]["ci_low"] == rows[1]["ci_low"]
        # By hand: each baseline seed's curve on [0, 600]; the slope fitted on its last quarter.
        per_seed = []
        for s in SEEDS:
            steps, vals = np.array(curves[("t", "base", s)][0]), np.array(curves[("t", "base", s)][1])
            keep = steps <= 600
            st, v = steps[keep], vals[keep]
            if summary == "auc":
                per_seed.append(_auc(st, v))
            else:
                window = st >= 600 - 0.25 * 600
                per_seed.append(float(np.polyfit(st[window], v[window], 1)[0]))
        assert rows[0]["mean"] == pytest.approx(np.mean(per_seed), rel=1e-12)
        analyzed = _json("analyze", _csv(tmp_path), "--baseline", "base", "--summary", summary)
        (base,) = [r for r in analyzed["summary"] if r["config"] == "base"]
        assert base["mean"] == pytest.approx(rows[0]["mean"], rel=1e-12)
