"""Replaying a sequential design from finished runs: direction of the goal, failed seeds, the baseline's seeds."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from scipy import stats

from benchlab.execute.sequential import BETTER, NO_DATA, OPEN, all_runs, make_design, plan_runs, replay
from benchlab.ledger import COMPLETED, FAILED
from benchlab.spec import load_spec

SPEC = """
name: replay
tasks: [{name: t1}]
configs: [{name: base}, {name: fast}, {name: noisy}]
seeds: 4
command: python run.py
metrics:
  primary: {name: loss, goal: min}
baseline: base
"""


@pytest.fixture
def setup(tmp_path: Path):
    path = tmp_path / "bench.yaml"
    path.write_text(SPEC)
    spec = load_spec(path, [])
    design = make_design(spec, max_seeds=12, batch=4)
    return spec, design, all_runs(spec, design)


def _values(runs, loss_of) -> dict[str, float]:
    return {r.run_id: loss_of(r.config, r.seed) for r in runs}


def test_a_lower_loss_is_better_and_the_interval_keeps_the_metrics_direction(setup) -> None:
    spec, design, runs = setup
    rng = np.random.default_rng(3)
    noise = rng.normal(0, 0.3, size=(3, 12))
    loss = {"base": 10.0, "fast": 0.0, "noisy": 10.0}
    values = _values(runs, lambda c, s: loss[c] + noise[list(loss).index(c), s])
    first = [r for r in runs if r.seed < 4]
    state = replay(spec, design, runs, {r.run_id: COMPLETED for r in first}, values)
    fast = next(p for p in state.pairs if p.config == "fast")
    assert fast.status == BETTER and fast.seeds == 4
    diffs = noise[1, :4] - noise[0, :4] - 10.0  # candidate − baseline, as the metric reads
    half = stats.t.ppf(stats.norm.cdf(design.bounds[0]), 3) * diffs.std(ddof=1) / 2.0
    assert fast.mean == pytest.approx(diffs.mean())
    assert (fast.low, fast.high) == pytest.approx((diffs.mean() - half, diffs.mean() + half))
    noisy = next(p for p in state.pairs if p.config == "noisy")
    assert noisy.status == OPEN and noisy.wanted == 8
    # The next plan: the open pair and the baseline get seeds 4..7, the decided one nothing more.
    planned = {(r.config, r.seed) for r in plan_runs(spec, design, runs, state)}
    assert {s for c, s in planned if c == "fast"} == {0, 1, 2, 3}
    assert {s for c, s in planned if c == "base"} == {s for c, s in planned if c == "noisy"} == set(range(8))


def test_a_failed_seed_drops_out_of_its_pair_and_is_counted(setup) -> None:
    spec, design, runs = setup
    values = _values(runs, lambda c, s: {"base": 10.0, "fast": 0.0, "noisy": 10.0}[c] + 0.1 * ((s * 7 + len(c)) % 5))
    statuses = {r.run_id: COMPLETED for r in runs if r.seed < 4}
    lost = next(r for r in runs if r.config == "fast" and r.seed == 2)
    statuses[lost.run_id] = FAILED
    fast = next(p for p in replay(spec, design, runs, statuses, values).pairs if p.config == "fast")
    assert fast.failed == 1 and fast.seeds == 4
    kept = [s for s in range(4) if s != 2]
    def mean_of(cfg: str) -> float:
        return float(np.mean([values[r.run_id] for r in runs if r.config == cfg and r.seed in kept]))

    assert fast.mean == pytest.approx(mean_of("fast") - mean_of("base"))


def test_a_look_waits_until_both_sides_have_finished_its_seeds(setup) -> None:
    spec, design, runs = setup
    values = _values(runs, lambda c, s: float(s))
    statuses = {r.run_id: COMPLETED for r in runs if r.seed < 4 and not (r.config == "base" and r.seed == 3)}
    state = replay(spec, design, runs, statuses, values)
    assert all(p.status == OPEN and p.seeds == 0 and p.wanted == 4 for p in state.pairs)


def test_a_candidate_that_failed_every_seed_gets_no_more_seeds(setup) -> None:
    spec, design, runs = setup
    values = _values(runs, lambda c, s: float(s) + (0.3 if c == "noisy" else 0.0) * (s % 3))
    statuses = {r.run_id: (FAILED if r.config == "fast" else COMPLETED) for r in runs if r.seed < 4}
    state = replay(spec, design, runs, statuses, values)
    fast = next(p for p in state.pairs if p.config == "fast")
    assert fast.status == NO_DATA and fast.failed == 4 and fast.seeds == 4
    assert {r.seed for r in plan_runs(spec, design, runs, state) if r.config == "fast"} == {0, 1, 2, 3}


@pytest.mark.parametrize(("kwargs", "named"), [
    ({"spending": "haybittle"}, "--spending haybittle: expected one of obrien-fleming, pocock"),
    ({"alpha": 1.5}, "--alpha must be between 0 and 1, got 1.5"),
    ({"alpha": 0.0}, "--alpha must be between 0 and 1, got 0.0"),
    ({"batch": 0}, "--batch must be at least 1, got 0"),
])
def test_a_python_caller_gets_the_clis_refusal_of_a_design_that_cannot_work(setup, kwargs, named) -> None:
    # The CLI used to check --spending itself, so a Python caller got a bare ValueError from deep
    # inside the statistics (or, for batch 0, from the look sizes) instead of the user's error.
    from benchlab.errors import UserError

    spec, _, _ = setup
    with pytest.raises(UserError) as raised:
        make_design(spec, **kwargs)
    assert str(raised.value) == named
