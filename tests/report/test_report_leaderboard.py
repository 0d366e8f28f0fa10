"""BENCHMARKS.md statuses: the rule of docs/reports.md, case by case, worked by hand."""

from __future__ import annotations

from pathlib import Path

import pytest
from report_world import build_store_world

from benchlab.report import status, write_report


@pytest.mark.parametrize(
    ("score", "target", "goal", "expected"),
    [
        # goal max, positive target 0.9: solved at >= 0.9, close above 0.72 (80% of 0.9).
        (0.95, 0.9, "max", "solved"),
        (0.9, 0.9, "max", "solved"),
        (0.8, 0.9, "max", "close"),
        (0.7201, 0.9, "max", "close"),
        (0.7199, 0.9, "max", "failed"),
        # goal max, negative target -200 (a reward): close above -200 - 0.2*200 = -240.
        (-190.0, -200.0, "max", "solved"),
        (-230.0, -200.0, "max", "close"),
        (-250.0, -200.0, "max", "failed"),
        # goal min, target 1.0 (a loss): solved at <= 1.0, close below 1.0 / 0.8 = 1.25.
        (0.95, 1.0, "min", "solved"),
        (1.0, 1.0, "min", "solved"),
        (1.2, 1.0, "min", "close"),
        (1.249, 1.0, "min", "close"),
        (1.251, 1.0, "min", "failed"),
        # goal min, negative target -10: close below -10 + 0.25*10 = -7.5.
        (-11.0, -10.0, "min", "solved"),
        (-8.0, -10.0, "min", "close"),
        (-7.0, -10.0, "min", "failed"),
        # target 0: the close band is empty.
        (-0.01, 0.0, "max", "failed"),
    ],
)
def test_status_follows_the_documented_rule(score, target, goal, expected):
    assert status(score, target, goal) == expected


def test_no_target_or_no_score_means_no_status():
    assert status(0.5, None, "max") is None
    assert status(None, 0.5, "max") is None
    assert status(float("nan"), 0.5, "min") is None


def _row(text: str, task: str) -> list[str]:
    line = next(ln for ln in text.splitlines() if ln.startswith(f"| {task} |"))
    return [c.strip() for c in line.strip("|").split("|")]


def test_benchmarks_md_for_a_metric_to_minimise(tmp_path: Path):
    # loss, goal min. m1 target 1.0: x mean 0.95 solved, y mean 1.2 close (< 1.25),
    # z mean 1.35 failed; best (lowest mean) is x. m2 has no target.
    values = {
        ("m1", "x"): [0.9, 1.0],
        ("m1", "y"): [1.2, 1.2],
        ("m1", "z"): [1.3, 1.4],
        ("m2", "x"): [3.0, 5.0],
        ("m2", "y"): [2.0, 2.0],
        ("m2", "z"): [1.0, 1.0],
    }
    folder = build_store_world(
        tmp_path / "res", values, goal="min", targets={"m1": 1.0, "m2": None}
    )
    write_report(folder, tmp_path / "rep", plots=False, html=False)
    text = (tmp_path / "rep" / "BENCHMARKS.md").read_text()
    assert "(lower is better)" in text
    header = _row(text, "task")
    assert header == ["task", "target", "x", "y", "z", "best"]
    # std of [0.9, 1.0] = 0.0707..., of [1.2, 1.2] = 0, of [1.3, 1.4] = 0.0707...; the std
    # to 2 significant digits (0.071: 3 decimals) and the mean to the same decimals.
    # Each score links to its median seed's run folder (this world's run ids are
    # task-config-seed); of two seeds, the worse for the goal: the higher loss, seed 1 for
    # x (1.0) and z (1.4); y's seeds are equal, and the first is taken.
    # Overlaps, from the Student-t intervals: x is best (0.95) with 0.95 ± t(0.975, 1)·0.05 =
    # 0.95 ± 12.706·0.05 = [0.315, 1.585], which overlaps z's [0.715, 1.985]; y (1.2 twice)
    # has zero observed spread and so no interval: ranked by its mean, never an overlap.
    assert _row(text, "m1") == [
        "m1",
        "1",
        "[0.950 ± 0.071](../res/runs/m1-x-1/) ✅",
        "[1.2 ± 0](../res/runs/m1-y-0/) ⚠️",
        "[1.350 ± 0.071](../res/runs/m1-z-1/) ❌",
        "x ✅ solved; CI overlaps z",
    ]
    # No target: scores only, the best config named without a status (std 1.41: 1 decimal).
    # z (1, 1) is best with zero observed spread: no interval, so nothing overlaps it.
    assert _row(text, "m2") == ["m2", "—", "[4.0 ± 1.4](../res/runs/m2-x-1/)", "[2 ± 0](../res/runs/m2-y-0/)",
                                "[1 ± 0](../res/runs/m2-z-0/)", "z"]


def test_best_config_is_the_one_stats_ranks_first_and_its_ties_are_named(tmp_path: Path):
    # Goal max. Task "tie": a [0.50, 0.60, 0.55] mean 0.55, b [0.52, 0.58, 0.54] mean 0.5467,
    # c [0.10, 0.11, 0.12] mean 0.11. a is best; b's interval overlaps a's (b is tied),
    # c's lies far below. Task "equal": d and e score exactly the same, so neither is better:
    # the first in the spec's order is named, the other tied.
    values = {
        ("tie", "a"): [0.50, 0.60, 0.55],
        ("tie", "b"): [0.52, 0.58, 0.54],
        ("tie", "c"): [0.10, 0.11, 0.12],
        ("equal", "a"): [0.30, 0.30, 0.30],
        ("equal", "b"): [0.70, 0.70, 0.70],
        ("equal", "c"): [0.70, 0.70, 0.70],
    }
    from scipy import stats as sps

    def interval(xs: list[float]) -> tuple[float, float]:
        mean, sem = sum(xs) / len(xs), sps.sem(xs)
        return sps.t.interval(0.95, len(xs) - 1, loc=mean, scale=sem) if sem > 0 else (mean, mean)

    a, b, c = (interval(values[("tie", k)]) for k in "abc")
    assert b[0] <= a[1] and a[0] <= b[1] and c[1] < a[0]  # the premise: b overlaps a, c does not
    folder = build_store_world(tmp_path / "res", values, targets={"tie": 0.5, "equal": None})
    write_report(folder, plots=False, html=False)
    text = (folder / "BENCHMARKS.md").read_text()
    assert _row(text, "tie")[-1] == "a ✅ solved; CI overlaps b"
    assert _row(text, "equal")[-1] == "b; tied with c (equal means)"
    # BENCHMARK_REPORT.md's summary names the same winner of "tie".
    report = (folder / "BENCHMARK_REPORT.md").read_text()
    assert "**a** has the best mean score on 1 of 2 tasks (tie)" in report


def test_a_config_that_lost_seeds_is_never_best_or_tied_without_saying_so():
    import pandas as pd

    from benchlab.report.leaderboard import render_leaderboard
    from benchlab.stats.accounting import SeedCount
    from benchlab.stats.table import AnalysisOptions, describe_runs

    # Goal max, failed seeds excluded. base: 0.90 ± t(0.975, 3)·0.00408 = [0.887, 0.913].
    # On "up", flaky kept 2 of its 4 seeds and has the best mean, 0.95 ± 12.706·0.01 =
    # [0.823, 1.077]: best, and base is tied with it. On "down", flaky's 0.70 and 0.90 give
    # 0.80 ± 12.706·0.1 = [-0.47, 2.07], which overlaps base's: tied with the best, base.
    rows = [("up", "base", s, v) for s, v in enumerate([0.89, 0.90, 0.91, 0.90])]
    rows += [("up", "flaky", s, v) for s, v in zip((0, 2), [0.94, 0.96], strict=True)]
    rows += [("down", "base", s, v) for s, v in enumerate([0.89, 0.90, 0.91, 0.90])]
    rows += [("down", "flaky", s, v) for s, v in zip((0, 2), [0.70, 0.90], strict=True)]
    finals = pd.DataFrame(rows, columns=["task", "config", "seed", "value"]).assign(metric="acc")
    desc = describe_runs(finals, AnalysisOptions(goal={"acc": "max"}))
    lost = {(t, "flaky"): SeedCount(t, "flaky", "acc", 4, 2, failed=(1, 3)) for t in ("up", "down")}
    text = render_leaderboard(desc, ["up", "down"], ["base", "flaky"], {"up": None, "down": None}, "max",
                              "acc", "lossy", seeds=lost)
    assert _row(text, "up")[-1] == "flaky (2/4 seeds); CI overlaps base"
    assert _row(text, "down")[-1] == "base; CI overlaps flaky (2/4 seeds)"


def test_a_partial_evaluation_is_shown_but_never_ranked_best():
    import pandas as pd

    from benchlab.report.leaderboard import render_leaderboard
    from benchlab.stats.table import AnalysisOptions, describe_runs

    # "quick" was evaluated on 20 of the task's questions and scored best; "full" and "base" on all.
    # The best full evaluation is "full" (0.61 > 0.55), though "quick" (0.80) ranks first.
    rows = [("gsm8k", "base", s, v) for s, v in enumerate([0.54, 0.55, 0.56])]
    rows += [("gsm8k", "full", s, v) for s, v in enumerate([0.60, 0.61, 0.62])]
    rows += [("gsm8k", "quick", s, v) for s, v in enumerate([0.79, 0.80, 0.81])]
    # On "arc" the partial one is not first: the ranks stand as stats gives them.
    rows += [("arc", "base", s, v) for s, v in enumerate([0.70, 0.71, 0.72])]
    rows += [("arc", "full", s, v) for s, v in enumerate([0.40, 0.41, 0.42])]
    rows += [("arc", "quick", s, v) for s, v in enumerate([0.50, 0.51, 0.52])]
    finals = pd.DataFrame(rows, columns=["task", "config", "seed", "value"]).assign(metric="acc")
    desc = describe_runs(finals, AnalysisOptions(goal={"acc": "max"}))
    partial = {(t, "quick"): ["lm-eval --limit 20"] for t in ("gsm8k", "arc")}
    text = render_leaderboard(desc, ["gsm8k", "arc"], ["base", "full", "quick"], {"gsm8k": None, "arc": None},
                              "max", "acc", "evals", partial=partial)
    gsm = _row(text, "gsm8k")
    assert gsm[-1] == "full" and gsm[4] == "0.800 ± 0.010 (partial†)"
    assert _row(text, "arc")[-1] == "base"
    assert "never ranked best" in text
