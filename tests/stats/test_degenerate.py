"""Near-degenerate data: spreads lost in float noise and sides with n < 2 give nulls and
warnings, never a confident number."""

import io
import json

import numpy as np
import pandas as pd
import pytest

from benchlab.stats import (
    analyze,
    cohens_d,
    compare,
    describe,
    effect_from_pilot,
    paired_t_pvalue,
    power_analysis,
    welch_pvalue,
)
from benchlab_testing import run_cli

# A candidate that is the baseline + 0.1 on every seed, typed as decimals into a CSV.
OFFSET_CSV = """task,config,seed,value
cartpole,base,0,1.1
cartpole,base,1,1.3
cartpole,base,2,0.9
cartpole,base,3,1.7
cartpole,base,4,1.2
cartpole,plus,0,1.2
cartpole,plus,1,1.4
cartpole,plus,2,1.0
cartpole,plus,3,1.8
cartpole,plus,4,1.3
"""


def _offset() -> tuple[np.ndarray, np.ndarray]:
    df = pd.read_csv(io.StringIO(OFFSET_CSV))
    b = df[df["config"] == "base"]["value"].to_numpy()
    c = df[df["config"] == "plus"]["value"].to_numpy()
    return b, c


def test_a_constant_offset_on_five_seeds_gives_no_t_test_no_effect_size_and_no_verdict(tmp_path):
    (tmp_path / "scores.csv").write_text(OFFSET_CSV)
    res = run_cli("analyze", "scores.csv", "--baseline", "base", "--reps", "500", "--json",
                  cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    out = json.loads(res.stdout)
    row = out["comparisons"][0]
    assert row["mean_diff"] == pytest.approx(0.1)
    assert row["t_pvalue"] is None
    # The signed-rank test stands, but 5 of 5 seeds one way is p = 2/2⁵ = 0.0625 at best.
    assert row["wilcoxon_pvalue"] == pytest.approx(0.0625)
    assert row["cohens_d"] is None and row["hedges_g"] is None
    assert row["significant"] is None
    assert any("cartpole value plus vs base: all 5 paired differences equal 0.1 (up to rounding)"
               in w for w in out["warnings"])
    assert any("too few seeds to decide" in w for w in out["warnings"])


def test_the_functions_themselves_treat_float_noise_as_zero_spread():
    b, c = _offset()
    assert 0 < np.std(c - b, ddof=1) < 1e-15  # float noise, not an exact zero
    assert paired_t_pvalue(c - b) is None
    assert cohens_d(b, c, paired=True) is None
    assert effect_from_pilot(b, c) is None
    # Two near-constant samples (0.3 as 0.1 + 0.2 and as 0.3): Welch has nothing to divide by.
    third = np.array([0.1 + 0.2, 0.3, 0.3, 0.1 + 0.2])
    assert np.std(third, ddof=1) > 0
    assert welch_pvalue(third, third + 1.0) is None
    assert cohens_d(third, third + 1.0, paired=False) is None


def test_describe_reports_zero_variance_for_values_equal_up_to_rounding():
    x = np.array([0.1 + 0.2, 0.3, 0.3, 0.1 + 0.2, 0.3])
    d = describe(x, reps=200, label="digits/mlp acc")
    assert d.std == 0.0 and (d.ci_low, d.ci_high) == (None, None)
    assert d.high_variance is False
    assert any("digits/mlp acc: all 5 values are equal (up to rounding): zero observed spread"
               in w for w in d.warnings)


def test_a_real_tiny_difference_is_not_mistaken_for_noise():
    b = np.array([1.0, 2.0, 3.0, 4.0])
    c = b + np.array([1e-9, 2e-9, 1.5e-9, 3e-9])  # relative spread 1e-10, far above 1e-12
    assert compare(b, c, paired=True, reps=0).t_pvalue is not None


def test_power_gives_no_seed_count_for_a_constant_offset():
    b, c = _offset()
    df = pd.DataFrame({"task": "t", "config": ["base"] * 5 + ["plus"] * 5,
                       "seed": list(range(5)) * 2, "value": np.concatenate([b, c])})
    out = power_analysis(df=df, baseline="base", candidate="plus")
    assert out.rows[0].effect is None and out.rows[0].seeds is None
    assert any(w.startswith("t value plus vs base: the effect is undefined from 5 pilot pair(s)")
               and "all differences equal up to rounding" in w for w in out.warnings)


def test_a_side_with_one_run_gives_no_effect_size_and_no_rank_test():
    r = compare(np.array([0.5]), np.array([0.6, 0.7, 0.65]), paired=False, reps=200, label="t m")
    assert r.mean_diff == pytest.approx(0.15)
    assert r.cohens_d is None and r.hedges_g is None
    assert r.mannwhitney_pvalue is None and r.welch_pvalue is None
    assert r.prob_improvement is None
    assert r.diff_ci_low is None and r.diff_boot_ci_low is None
    assert any("t m: a side has n<2 (baseline 1, candidate 3)" in w for w in r.warnings)


def test_a_single_seed_config_gets_no_verdict_in_the_table():
    table = pd.DataFrame({"task": "t", "config": ["a", "b", "b", "b"], "seed": [0, 1, 2, 3],
                          "value": [0.5, 0.6, 0.7, 0.65]})
    out = analyze(table, baseline="a", reps=200)
    row = out.comparisons[0]
    assert row.paired is False
    assert row.cohens_d is None and row.mannwhitney_pvalue is None
    assert row.significant is None
