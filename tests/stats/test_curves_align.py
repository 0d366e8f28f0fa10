"""Learning curves of unequal length: per-run summaries of the end, the common range only
where a whole-range summary needs it, and warnings for every cut run and dropped point."""

import numpy as np
import pandas as pd
import pytest

from benchlab.errors import DataError
from benchlab.stats import analyze, reduce_runs, validate_table
from benchlab_testing import run_cli


def _curves() -> pd.DataFrame:
    # value = gain * step / 10: base ends at 9.2 (step 92)... except seed 1 of base, which
    # stopped at step 60; new ends at 12.0 (step 100).
    rows = []
    for config, gain, last in (("base", 1.0, 92), ("new", 1.2, 100)):
        for seed in range(3):
            stop = 60 if (config, seed) == ("base", 1) else last
            for step in [*range(0, stop, 10), stop]:
                rows.append({"task": "t", "config": config, "seed": seed, "metric": "r",
                             "step": float(step), "value": gain * step / 10})
    return pd.DataFrame(rows)


def test_final_and_max_are_taken_on_each_runs_own_curve():
    runs, notes = reduce_runs(validate_table(_curves()), "final")
    got = runs.set_index(["config", "seed"])["value"]
    assert got[("base", 0)] == pytest.approx(9.2) and got[("new", 0)] == pytest.approx(12.0)
    assert got[("base", 1)] == pytest.approx(6.0)  # its own last value, not the others' at 60
    assert not any("cut" in n for n in notes)
    runs, _ = reduce_runs(validate_table(_curves()), "max")
    assert runs.set_index(["config", "seed"])["value"][("new", 2)] == pytest.approx(12.0)


def test_mean_of_last_k_points_is_per_run():
    runs, _ = reduce_runs(validate_table(_curves()), "final", k=2)
    got = runs.set_index(["config", "seed"])["value"]
    assert got[("base", 0)] == pytest.approx((9.0 + 9.2) / 2)
    assert got[("base", 1)] == pytest.approx((5.0 + 6.0) / 2)


def test_auc_uses_the_common_range_and_names_every_cut_run_with_its_steps():
    runs, notes = reduce_runs(validate_table(_curves()), "auc")
    got = runs.set_index(["config", "seed"])["value"]
    # Common range [0, 60]: the average height of gain * s / 10 there is gain * 3.
    assert got[("base", 0)] == pytest.approx(3.0) and got[("new", 1)] == pytest.approx(3.6)
    cut = next(n for n in notes if "common step range" in n)
    assert cut.startswith("t r: --summary auc on the common step range [0, 60], the steps every run of the task "
                          "reached (one range per task, the same whichever configs are compared); cut to it: ")
    for name in ("base/s0 (steps 0–92)", "base/s2 (steps 0–92)", "new/s0 (steps 0–100)",
                 "new/s1 (steps 0–100)", "new/s2 (steps 0–100)"):
        assert name in cut
    assert "base/s1" not in cut


def test_align_common_for_final_reproduces_the_common_range_on_request():
    runs, notes = reduce_runs(validate_table(_curves()), "final", align="common")
    got = runs.set_index(["config", "seed"])["value"]
    assert got[("base", 0)] == pytest.approx(6.0) and got[("new", 0)] == pytest.approx(7.2)
    assert any("cut to it" in n for n in notes)
    with pytest.raises(DataError, match="^align must be one of common, own; got 'both'$"):
        reduce_runs(validate_table(_curves()), "final", align="both")  # type: ignore[arg-type]


def test_nan_curve_points_are_dropped_and_counted():
    df = _curves()
    df.loc[(df["config"] == "new") & (df["step"] == 100.0) & (df["seed"] < 2), "value"] = np.nan
    runs, notes = reduce_runs(validate_table(df), "final")
    assert "t r: 2 NaN curve point(s) dropped from 2 run(s)" in notes
    assert runs.set_index(["config", "seed"])["value"][("new", 0)] == pytest.approx(10.8)


def test_the_json_and_the_cli_say_which_alignment_applied(tmp_path):
    _curves().to_csv(tmp_path / "curves.csv", index=False)
    assert analyze(_curves(), reps=200).methods.align == "own"
    assert analyze(_curves(), summary="auc", reps=200).methods.align == "common"
    res = run_cli("analyze", "curves.csv", "--baseline", "base", "--summary", "final",
                  "--align", "common", "--reps", "200", "--json", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    assert '"align": "common"' in res.stdout
    bad = run_cli("analyze", "curves.csv", "--align", "middle", cwd=tmp_path)
    assert bad.returncode == 2 and "Invalid value for '--align'" in bad.stderr
    assert "'middle' is not one of 'common', 'own'" in bad.stderr
