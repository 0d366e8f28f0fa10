"""`run --until-decided` over several pairs: the familywise false-positive rate stays at α.

Seeded simulation of the sweep's own design (``make_design`` on a real spec of 2 tasks x 3
configs, so 4 candidate-vs-baseline pairs, two per task sharing that task's baseline runs),
every pair taken through its looks with the published boundaries until decided.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from benchlab.execute.sequential import make_design
from benchlab.spec import load_spec
from benchlab.stats.sequential import NEGATIVE, POSITIVE, boundaries, run_design

SPEC = """
name: family
tasks: [{name: t1}, {name: t2}]
configs: [{name: base}, {name: a}, {name: b}]
seeds: 5
command: python run.py
metrics:
  primary: {name: score, goal: max}
baseline: base
"""

TRIALS, ALPHA, MAX_SEEDS = 4000, 0.05, 20


def _familywise_rate(sizes: list[int], bounds: np.ndarray, seed: int = 20261123) -> float:
    """Share of null trials in which any of the 4 pairs is decided better or worse."""
    rng = np.random.default_rng(seed)
    wrong = np.zeros(TRIALS, dtype=bool)
    for _task in range(2):
        base = rng.normal(0.0, 1.0, size=(TRIALS, MAX_SEEDS))
        for _candidate in range(2):
            cand = rng.normal(0.0, 1.0, size=(TRIALS, MAX_SEEDS))
            decision, _ = run_design(cand - base, sizes, bounds)
            wrong |= np.isin(decision, (POSITIVE, NEGATIVE))
    return float(wrong.mean())


@pytest.fixture()
def design(tmp_path: Path):  # type: ignore[no-untyped-def]
    spec = tmp_path / "benchlab.yaml"
    spec.write_text(SPEC)
    return make_design(load_spec(spec), max_seeds=MAX_SEEDS, batch=5, alpha=ALPHA)


def test_alpha_is_split_over_the_pairs_of_the_sweep(design) -> None:  # type: ignore[no-untyped-def]
    assert design.pairs == 4 and design.pair_alpha == pytest.approx(ALPHA / 4)
    assert design.sizes == [5, 10, 15, 20]
    expected = boundaries(np.array([5, 10, 15, 20]) / 20, ALPHA / 4)
    assert design.bounds == pytest.approx(expected.tolist())
    assert design.to_json()["correction"] == "bonferroni"


def test_familywise_false_positive_rate_over_four_null_pairs_stays_at_alpha(design) -> None:  # type: ignore[no-untyped-def]
    rate = _familywise_rate(design.sizes, np.asarray(design.bounds))
    mc_error = np.sqrt(ALPHA * (1 - ALPHA) / TRIALS)
    # Bonferroni is at most α; pairs sharing a baseline are correlated, so a little below.
    assert rate < ALPHA + 3 * mc_error, rate
    assert rate > ALPHA - 4 * mc_error, rate  # not so conservative that power is thrown away


def test_each_pair_at_the_full_alpha_inflates_the_familywise_rate(design) -> None:  # type: ignore[no-untyped-def]
    # What the design did before alpha was split: every pair's boundaries at the whole α.
    per_pair = boundaries(np.array(design.sizes) / MAX_SEEDS, ALPHA)
    rate = _familywise_rate(design.sizes, per_pair)
    assert rate > ALPHA + 10 * np.sqrt(ALPHA * (1 - ALPHA) / TRIALS), rate
