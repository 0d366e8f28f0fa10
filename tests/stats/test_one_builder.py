"""`benchlab analyze`, `compare` and `benchlab.compare` build their numbers with the report's builder
(`stats.analyze_table`) and print the one `ResultsAnalysis` it returns."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pandas as pd
import pytest
from scipy import stats as sps

from benchlab.stats import AnalysisOptions, ResultsAnalysis, analyze_table
from benchlab.stats.runvalues import RunValues


def _table() -> pd.DataFrame:
    """2 tasks x 3 configs x 5 seeds of two metrics; config c's seed 3 on task x is NaN (failed)."""
    rng = np.random.default_rng(3)
    rows = []
    for task in ("x", "y"):
        for config, shift in (("a", 0.0), ("b", 0.1), ("c", 0.05)):
            for seed in range(5):
                acc = 0.5 + shift + rng.normal(0, 0.02)
                rows.append((task, config, seed, "acc", np.nan if (task, config, seed) == ("x", "c", 3) else acc))
                rows.append((task, config, seed, "loss", 1 - acc))
    return pd.DataFrame(rows, columns=["task", "config", "seed", "metric", "value"])


def test_every_metric_asked_for_is_analysed_in_full_and_the_first_is_primary():
    out = analyze_table(_table(), None, options=AnalysisOptions(baseline="a", reps=200,
                                                                goal={"acc": "max", "loss": "min"}))
    assert isinstance(out, ResultsAnalysis)
    assert out.analysed == out.metrics == ("acc", "loss")
    assert (out.primary, out.goal) == ("acc", "max")
    # Each metric is compared with the baseline, its own Holm family of 4 (2 tasks x 2 candidates).
    assert sorted({(r.metric, r.holm_family) for r in out.comparisons}) == [
        ("acc", "metric acc, m = 4"), ("loss", "metric loss, m = 4")]
    # The failed seed is counted once, for the metric it failed on.
    assert [(c.task, c.config, c.metric, c.failed) for c in out.seeds if c.failed] == [("x", "c", "acc", (3,))]
    row = out.row("x", "b", "acc")
    values = _table().query("task == 'x' and config == 'b' and metric == 'acc'")["value"].to_numpy()
    assert row is not None and row.mean == pytest.approx(values.mean())
    half = sps.t.ppf(0.975, 4) * values.std(ddof=1) / np.sqrt(5)
    assert (row.ci_low, row.ci_high) == pytest.approx((values.mean() - half, values.mean() + half))
    assert json.loads(out.to_json())["methods"]["failed_as"] == "exclude"


def test_final_values_read_without_pandas_give_the_same_analysis_as_the_frame():
    table = _table().dropna()
    runs = RunValues.from_frame(table.assign(step=np.nan))
    options = AnalysisOptions(baseline="a", reps=200, source="t.csv")
    assert analyze_table(runs, None, options=options).to_json() == analyze_table(table, None, options=options).to_json()


def test_the_pair_keeps_the_whole_familys_adjusted_p_values_and_drops_the_others_warnings():
    whole = analyze_table(_table(), None, options=AnalysisOptions(baseline="a", metric="acc", reps=200))
    pair = whole.of_pair("a", "b")
    assert {r.config for r in pair.summary} == {"a", "b"} and {r.candidate for r in pair.comparisons} == {"b"}
    assert [r.p_holm for r in pair.comparisons] == [r.p_holm for r in whole.comparisons if r.candidate == "b"]
    assert any(w.startswith("x/c acc: 1 of 5 seeds failed") for w in whole.warnings)
    assert not any(w.startswith("x/c acc:") or w.startswith("x acc c vs a") for w in pair.warnings)
    assert any(w.startswith("x acc b vs a") for w in pair.warnings)
    assert pair.goal == whole.goal and pair.analysed == whole.analysed


def test_the_analysis_is_immutable():
    out = analyze_table(_table(), None, options=AnalysisOptions(baseline="a", reps=200))
    with pytest.raises(dataclasses.FrozenInstanceError):
        out.primary = "loss"  # type: ignore[misc]


def test_the_rows_of_an_analysis_are_frozen():
    out = analyze_table(_table(), None, options=AnalysisOptions(baseline="a", reps=200))
    row, comparison, aggregate = out.summary[0], out.comparisons[0], out.aggregate[0]
    assert row.seeds is not None and comparison.seeds is not None and out.methods is not None
    for record, name in ((row, "mean"), (row, "rank"), (row.seeds, "failed_seeds"), (comparison, "p_holm"),
                         (comparison, "significant"), (comparison.seeds, "caveat"), (aggregate, "iqm"),
                         (out.methods, "reps")):
        with pytest.raises(dataclasses.FrozenInstanceError):
            setattr(record, name, None)
    # The seeds a row lost are held as a tuple, and printed as a JSON array.
    failed = out.row("x", "c", "acc")
    assert failed is not None and failed.seeds is not None and failed.seeds.failed_seeds == (3,)
    assert failed.to_json()["failed_seeds"] == [3]
