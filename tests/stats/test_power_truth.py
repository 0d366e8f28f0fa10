"""`power` answers without NaN, in seeds that never rise with the effect, and says which sd a
smallest effect of interest was divided by."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from scipy import integrate, stats

from benchlab.stats import paired_power, power_analysis
from benchlab.stats.seeds import seeds_for_power
from benchlab_testing import run_cli


def _power_by_integration(n: int, d: float, alpha: float = 0.05) -> float:
    """P(|T| > t_crit) for T = (Z + d√n) / sqrt(V/(n-1)), integrating over V ~ chi2(n-1)."""
    df = n - 1
    crit = stats.t.ppf(1 - alpha / 2, df)

    def at(v: float) -> float:
        s = crit * np.sqrt(v / df)
        return (stats.norm.sf(s - d * np.sqrt(n)) + stats.norm.cdf(-s - d * np.sqrt(n))) * stats.chi2.pdf(v, df)

    return float(integrate.quad(at, 0, np.inf, limit=200)[0])


def test_power_at_three_pairs_and_a_large_effect_is_a_number():
    # scipy's nct.cdf is NaN here; the power is near 0.99.
    p = float(paired_power(3, 5.57))
    assert np.isfinite(p)
    assert p == pytest.approx(_power_by_integration(3, 5.57), abs=1e-6)
    assert seeds_for_power(5.57) == 3


def test_seeds_needed_never_rise_with_the_effect():
    effects = np.linspace(0.05, 12, 1500)
    needed = [seeds_for_power(d) for d in effects]
    assert all(a >= b for a, b in zip(needed, needed[1:], strict=False))
    assert not np.isnan(np.concatenate([paired_power(np.arange(2, 40), d) for d in effects[::50]])).any()


def test_min_effect_says_which_sd_it_divided_by_and_why(tmp_path):
    b = np.array([10.0, 12.0, 11.0, 13.0])
    c = b + np.array([1.0, 1.4, 0.6, 1.2])
    rows = [("t", "base", s, v) for s, v in enumerate(b)] + [("t", "cand", s, v) for s, v in enumerate(c)]
    df = pd.DataFrame(rows, columns=["task", "config", "seed", "value"])
    out = power_analysis(df=df, baseline="base", candidate="cand", min_effect=0.5)
    (row,) = out.rows
    sd = np.std(c - b, ddof=1)
    high = sd * np.sqrt(3 / stats.chi2.ppf(0.025, 3))
    assert row.sd_observed == pytest.approx(sd) and row.sd_used == pytest.approx(high)
    assert "upper end of the 95% interval" in row.sd_basis
    assert any(f"divided by sd {high:.4g}" in w for w in out.warnings)
    path = tmp_path / "pilot.csv"
    df.to_csv(path, index=False)
    proc = run_cli("power", str(path), "--baseline", "base", "--candidate", "cand", "--min-effect", "0.5", "--json",
                   cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)["rows"][0]
    assert data["sd_used"] == pytest.approx(high) and data["sd_observed"] == pytest.approx(sd)
