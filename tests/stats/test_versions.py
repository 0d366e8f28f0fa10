"""The analysis of two versions (`benchlab diff`'s statistics): the same comparison as `analyze`,
checked against scipy and statsmodels."""

from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd
import pytest
from scipy import stats as sps
from statsmodels.stats.multitest import multipletests

from benchlab.stats import analyze, analyze_versions
from benchlab.stats.versions import IMPROVEMENT, NO_CHANGE, REGRESSION, UNDETERMINED, VersionRuns

NORMAL_SPEC = {"metrics": {"primary": {"name": "score", "goal": "max", "assume": "normal"},
                           "secondary": [{"name": "loss", "goal": "min", "assume": "normal"}]}}


def _table(values: dict[tuple[str, str, str], dict[int, float]]) -> pd.DataFrame:
    return pd.DataFrame([{"task": t, "config": c, "metric": m, "seed": s, "value": v}
                         for (t, c, m), by_seed in values.items() for s, v in by_seed.items()])


def _side(label: str, values: dict[tuple[str, str, str], dict[int, float]], spec: dict | None = None) -> VersionRuns:
    return VersionRuns(label, _table(values), {"score": "max", "loss": "min"}, spec or NORMAL_SPEC)


BEFORE = {("easy", "a", "score"): {0: 0.61, 1: 0.58, 2: 0.64, 3: 0.60, 4: 0.62, 5: 0.59},
          ("hard", "a", "score"): {0: 0.41, 1: 0.45, 2: 0.39, 3: 0.44, 4: 0.40, 5: 0.43}}
# easy moves by about nothing; hard loses 0.03-0.05 on every seed.
AFTER = {("easy", "a", "score"): {0: 0.62, 1: 0.57, 2: 0.64, 3: 0.61, 4: 0.61, 5: 0.60},
         ("hard", "a", "score"): {0: 0.37, 1: 0.41, 2: 0.35, 3: 0.39, 4: 0.36, 5: 0.40}}


def test_a_paired_change_is_the_paired_t_test_with_holm_across_the_metrics_tasks():
    result = analyze_versions(_side("v1", BEFORE), _side("v2", AFTER), reps=0)
    assert [c.key for c in result.changes] == ["easy/a/score", "hard/a/score"]
    pvalues = []
    for change in result.changes:
        key = (change.task, change.config, change.metric)
        b = np.array([BEFORE[key][s] for s in range(6)])
        a = np.array([AFTER[key][s] for s in range(6)])
        d = a - b
        assert change.paired and (change.n_before, change.n_after) == (6, 6)
        assert change.diff == pytest.approx(d.mean())
        assert (change.ci_low, change.ci_high) == pytest.approx(
            sps.t.interval(0.95, len(d) - 1, loc=d.mean(), scale=sps.sem(d)))
        assert change.p_value == pytest.approx(sps.ttest_rel(a, b).pvalue)
        assert change.mean_before == pytest.approx(b.mean()) and change.std_after == pytest.approx(a.std(ddof=1))
        pvalues.append(change.p_value)
    holm = multipletests(pvalues, method="holm")[1]
    assert [c.p_holm for c in result.changes] == pytest.approx(list(holm))
    easy, hard = result.changes
    assert hard.verdict == REGRESSION and hard.direction == "worse"
    assert easy.verdict == NO_CHANGE
    assert result.counts == {REGRESSION: 1, IMPROVEMENT: 0, NO_CHANGE: 1, UNDETERMINED: 0}


def test_a_change_is_numbered_as_analyze_numbers_the_same_runs():
    # The later version as a candidate config against the earlier one, in one table: analyze's
    # comparison of the two and the diff's change are the same comparison.
    both = pd.concat([_table(BEFORE), _table(AFTER).assign(config="a2")], ignore_index=True)
    found = analyze(both, baseline="a", reps=100, goal={"score": "max"}, assume_normal=["score"])
    changes = analyze_versions(_side("v1", BEFORE), _side("v2", AFTER), reps=0).changes
    for row, change in zip(found.comparisons, changes, strict=True):
        assert (row.task, row.paired, row.n) == (change.task, change.paired, 6)
        assert (row.mean_diff, row.diff_ci_low, row.diff_ci_high, row.pvalue, row.p_holm, row.significant) == \
            pytest.approx((change.diff, change.ci_low, change.ci_high, change.p_value, change.p_holm,
                           change.verdict == REGRESSION))


def test_without_a_range_or_assumed_normality_a_t_verdict_is_withheld_and_says_why():
    bare = {"metrics": {"primary": {"name": "score", "goal": "max"}}}
    result = analyze_versions(_side("v1", BEFORE, bare), _side("v2", AFTER, bare), reps=0)
    hard = result.changes[1]
    assert hard.verdict == UNDETERMINED and hard.decided_by is None
    assert any("no verdict (significance is null)" in w and "assume: normal" in w for w in hard.warnings)
    assert result.regressions == [] and result.undetermined == [hard]


def test_seeds_not_shared_are_compared_unpaired_with_welch_and_the_change_says_so():
    after = {("hard", "a", "score"): {10 + s: v for s, v in AFTER[("hard", "a", "score")].items()}}
    before = {("hard", "a", "score"): BEFORE[("hard", "a", "score")]}
    (change,) = analyze_versions(_side("v1", before), _side("v3", after), reps=0).changes
    b, a = list(before[("hard", "a", "score")].values()), list(after[("hard", "a", "score")].values())
    assert change.paired is False
    assert change.p_value == pytest.approx(sps.ttest_ind(a, b, equal_var=False).pvalue)
    assert "hard/a/score: fewer than 2 shared seeds; compared unpaired" in change.warnings


def test_a_loss_that_rose_is_a_regression_by_its_goal_and_keys_on_one_side_are_listed():
    before = {("t", "a", "loss"): {s: 0.20 + 0.01 * s for s in range(5)}, ("t", "old", "loss"): {0: 1.0, 1: 1.0}}
    after = {("t", "a", "loss"): {s: 0.26 + 0.01 * s + 0.002 * (s % 2) for s in range(5)},
             ("t", "new", "loss"): {0: 1.0, 1: 1.0}}
    result = analyze_versions(_side("v1", before), _side("v2", after), reps=0)
    (change,) = result.changes
    assert change.goal == "min" and change.diff == pytest.approx(0.0608)
    assert change.verdict == REGRESSION and change.direction == "worse"
    assert (result.only_before, result.only_after) == (("t/old/loss",), ("t/new/loss",))


def test_the_result_does_not_depend_on_the_order_of_the_rows_and_cannot_be_changed():
    one = analyze_versions(_side("v1", BEFORE), _side("v2", AFTER), reps=200, seed=3)
    shuffled = VersionRuns("v2", _table(AFTER).sample(frac=1, random_state=0), {"score": "max"}, NORMAL_SPEC)
    other = analyze_versions(_side("v1", BEFORE), shuffled, reps=200, seed=3)
    assert one == other
    with pytest.raises(dataclasses.FrozenInstanceError):
        one.changes[0].verdict = IMPROVEMENT  # type: ignore[misc]


def test_runs_left_out_and_a_version_without_runs_are_said():
    left = VersionRuns("v1", _table(BEFORE), {}, NORMAL_SPEC, {"failed": 2})
    result = analyze_versions(left, _side("v2", AFTER), reps=0)
    assert "v1: 2 run(s) failed, not in the comparison" in result.notes
    from benchlab.errors import DataError

    with pytest.raises(DataError, match="v1: no completed run with metric 'loss'"):
        analyze_versions(_side("v1", BEFORE), _side("v2", AFTER), metric="loss")
