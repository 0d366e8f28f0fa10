"""`run --until-decided` on a metric with a range decides by betting; without one it says what
its guarantee rests on."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from benchlab.errors import UserError
from benchlab.execute.sequential import BETTER, all_runs, make_design, replay
from benchlab.ledger import COMPLETED
from benchlab.spec import load_spec
from benchlab.stats.sequential import BETTING, NORMAL_THEORY, decide_betting

SPEC = """
name: bounded
tasks: [{{name: acrobot{task_range}}}, {{name: cart}}]
configs: [{{name: base}}, {{name: cand}}]
seeds: 5
command: python run.py
metrics:
  primary: {{name: ret, goal: max{metric_range}}}
baseline: base
"""


def _spec(tmp_path: Path, metric_range: str = "", task_range: str = ""):  # type: ignore[no-untyped-def]
    path = tmp_path / "bench.yaml"
    path.write_text(SPEC.format(metric_range=metric_range, task_range=task_range))
    return load_spec(path, [])


def test_a_declared_range_makes_every_pair_bet_with_the_tasks_own_width(tmp_path: Path) -> None:
    spec = _spec(tmp_path, ", range: [0, 1]", ", range: {ret: [-500, 0]}")
    design = make_design(spec, max_seeds=20, batch=5)
    assert design.widths == {"acrobot": 500.0, "cart": 1.0}
    assert design.method == BETTING
    record = design.to_json()
    assert record["method"] == "betting" and "any distribution" in str(record["guarantee"])


def test_without_a_range_the_design_says_its_guarantee_rests_on_normality(tmp_path: Path) -> None:
    design = make_design(_spec(tmp_path), max_seeds=20, batch=5)
    assert design.method == NORMAL_THEORY
    assert "normal" in design.guarantee and "range" in design.guarantee
    assert design.to_json()["method"] == "normal-theory"


def test_one_task_without_a_range_makes_the_design_mixed_and_names_it(tmp_path: Path) -> None:
    design = make_design(_spec(tmp_path, task_range=", range: {ret: [-500, 0]}"), max_seeds=20, batch=5)
    assert design.method == "mixed" and "cart" in design.guarantee


def test_replay_of_a_bounded_pair_is_the_betting_decision_on_its_differences(tmp_path: Path) -> None:
    spec = _spec(tmp_path, ", range: [0, 1]")
    design = make_design(spec, max_seeds=20, batch=5)
    runs = all_runs(spec, design)
    rng = np.random.default_rng(11)
    noise = rng.normal(0, 0.01, size=(2, 2, 20))
    level = {"base": 0.05, "cand": 0.95}
    values = {r.run_id: level[r.config] + noise[["acrobot", "cart"].index(r.task), list(level).index(r.config), r.seed]
              for r in runs}
    first = [r for r in runs if r.seed < 10]
    state = replay(spec, design, runs, {r.run_id: COMPLETED for r in first}, values)
    for pair in state.pairs:
        t = ["acrobot", "cart"].index(pair.task)
        diffs = (level["cand"] + noise[t, 1]) - (level["base"] + noise[t, 0])
        # A difference of 0.9 in a range of width 1: decided at the second look (10 seeds), not the first.
        assert decide_betting(diffs[None, :5], 1.0, design.pair_alpha).decision[0] == 0
        look = decide_betting(diffs[None, :10], 1.0, design.pair_alpha)
        assert pair.status == BETTER and pair.seeds == 10
        assert (pair.low, pair.high) == pytest.approx((look.low[0], look.high[0]))


def test_a_value_outside_the_declared_range_is_a_user_error_naming_the_task(tmp_path: Path) -> None:
    spec = _spec(tmp_path, ", range: [0, 1]")
    design = make_design(spec, max_seeds=10, batch=5)
    runs = all_runs(spec, design)
    values = {r.run_id: (3.0 if r.config == "cand" else 0.5) for r in runs}
    with pytest.raises(UserError, match="acrobot.*outside"):
        replay(spec, design, runs, {r.run_id: COMPLETED for r in runs if r.seed < 5}, values)
