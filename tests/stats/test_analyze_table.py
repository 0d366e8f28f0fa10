import numpy as np
import pandas as pd
import pytest
from scipy import stats as sps

from benchlab.errors import DataError
from benchlab.stats import analyze, reduce_runs, validate_table

SUMMARY_KEYS = {"task", "config", "metric", "n", "mean", "std", "sem", "median", "min", "max",
                "ci_low", "ci_high", "boot_ci_low", "boot_ci_high", "high_variance", "rank"}
COMPARISON_KEYS = {"task", "metric", "baseline", "candidate", "paired", "n", "mean_diff",
                   "diff_ci_low", "diff_ci_high", "diff_boot_ci_low", "diff_boot_ci_high",
                   "t_pvalue", "wilcoxon_pvalue", "welch_pvalue",
                   "mannwhitney_pvalue", "cohens_d", "hedges_g", "prob_improvement", "p_holm",
                   "holm_family", "significant", "decided_by"}
AGGREGATE_KEYS = {"config"} | {f"{n}{s}" for n in ("iqm", "median", "mean", "optimality_gap")
                               for s in ("", "_ci_low", "_ci_high")}


def _table(values: dict[tuple[str, str], list[float]], metric: str = "acc") -> pd.DataFrame:
    rows = [{"task": t, "config": c, "seed": s, "metric": metric, "value": v}
            for (t, c), vs in values.items() for s, v in enumerate(vs)]
    return pd.DataFrame(rows)


BASE_A = [0.70, 0.72, 0.69, 0.71, 0.73]
NEW_A = [0.75, 0.76, 0.74, 0.77, 0.74]
BASE_B = [10.0, 12.0, 11.0, 13.0, 9.0]
NEW_B = [10.5, 12.2, 11.1, 13.4, 9.1]
TABLE = _table({("a", "base"): BASE_A, ("a", "new"): NEW_A,
                ("b", "base"): BASE_B, ("b", "new"): NEW_B})


def test_analyze_returns_the_documented_layout():
    out = analyze(TABLE, baseline="base", reps=1_000)
    data = out.to_dict()
    assert list(data) == ["summary", "comparisons", "aggregate", "warnings", "methods",
                          "normalization"]
    assert all(set(r) == SUMMARY_KEYS for r in data["summary"])
    assert all(set(r) == COMPARISON_KEYS for r in data["comparisons"])
    assert all(set(r) == AGGREGATE_KEYS for r in data["aggregate"])
    assert len(out.summary) == 4 and len(out.comparisons) == 2
    assert [a.config for a in out.aggregate] == ["base", "new"]


def test_comparisons_are_paired_by_seed_and_holm_corrected_across_all():
    out = analyze(TABLE, baseline="base", reps=1_000)
    p = [sps.ttest_rel(NEW_A, BASE_A).pvalue, sps.ttest_rel(NEW_B, BASE_B).pvalue]
    lo, hi = sorted(p)
    holm = {lo: 2 * lo, hi: max(2 * lo, hi)}
    for row, pv in zip(out.comparisons, p, strict=True):
        assert row.paired is True and row.n == 5
        assert row.t_pvalue == pytest.approx(pv)
        assert row.p_holm == pytest.approx(min(1.0, holm[pv]))
    a = out.comparisons[0]
    assert a.mean_diff == pytest.approx(np.mean(NEW_A) - np.mean(BASE_A))
    t_verdict = bool(a.p_holm < 0.05 and a.diff_ci_low > 0)
    # Without a range a significant t verdict is withheld (null); assumed normal, it is the t verdict.
    assert a.significant is (None if t_verdict else False)
    assumed = analyze(TABLE, baseline="base", reps=1_000, assume_normal=["*"]).comparisons[0]
    assert assumed.significant is t_verdict and assumed.decided_by == "paired t, normal distribution assumed"


def test_summary_ranks_with_ties_and_goal_min():
    out = analyze(TABLE, reps=500)
    ranks = {(r.task, r.config): r.rank for r in out.summary}
    assert ranks[("a", "new")] == 1 and ranks[("a", "base")] == 2  # CIs apart
    # The CIs of task b overlap; the paired t-test separates the configs (scipy: p = 0.033), but
    # without a range or an assumed normal distribution its verdict is withheld (stats.verdict), so
    # nothing separates them: tied, as the undetermined verdict says. Assumed normal, the t verdict
    # stands and "tied" would contradict it.
    assert sps.ttest_rel(NEW_B, BASE_B).pvalue < 0.05
    assert ranks[("b", "new")] == 1 and ranks[("b", "base")] == 1
    assumed = {(r.task, r.config): r.rank for r in analyze(TABLE, reps=500, assume_normal=["*"]).summary}
    assert assumed[("b", "new")] == 1 and assumed[("b", "base")] == 2
    overlapping = analyze(_table({("c", "x"): [10.0, 12.0, 11.0, 13.0, 9.0],
                                  ("c", "y"): [10.5, 11.2, 11.6, 12.4, 9.9]}), reps=500)
    assert sps.ttest_rel([10.5, 11.2, 11.6, 12.4, 9.9], [10.0, 12.0, 11.0, 13.0, 9.0]).pvalue > 0.05
    assert {r.config: r.rank for r in overlapping.summary} == {"x": 1, "y": 1}  # CIs overlap, no test apart: tied
    out_min = analyze(TABLE, goal="min", reps=500)
    ranks_min = {(r.task, r.config): r.rank for r in out_min.summary}
    assert ranks_min[("a", "base")] == 1 and ranks_min[("a", "new")] == 2


def test_a_seed_missing_for_one_config_pairs_on_the_shared_seeds_with_a_warning():
    table = TABLE[~((TABLE["task"] == "a") & (TABLE["config"] == "new") & (TABLE["seed"] == 4))]
    out = analyze(table, baseline="base", reps=500)
    a = out.comparisons[0]
    assert a.paired is True and a.n == 4
    assert a.t_pvalue == pytest.approx(sps.ttest_rel(NEW_A[:4], BASE_A[:4]).pvalue)
    assert any("seed(s) 4 are missing on one side" in w for w in out.warnings)


def test_disjoint_seeds_are_compared_unpaired_with_a_warning():
    table = TABLE.copy()
    table.loc[table["config"] == "new", "seed"] += 100
    out = analyze(table, baseline="base", reps=500)
    a = out.comparisons[0]
    assert a.paired is False and a.t_pvalue is None
    assert a.welch_pvalue == pytest.approx(
        sps.ttest_ind(NEW_A, BASE_A, equal_var=False).pvalue)
    assert any("compared unpaired" in w for w in out.warnings)


def test_single_seed_nan_and_zero_variance_give_nulls_and_warnings_not_crashes():
    table = _table({("a", "base"): [0.5], ("a", "new"): [0.6],
                    ("b", "base"): [1.0, 1.0, 1.0], ("b", "new"): [1.0, np.nan, 2.0]})
    out = analyze(table, baseline="base", reps=500)
    rows = {(r.task, r.config): r for r in out.summary}
    assert rows[("a", "base")].std is None and rows[("a", "base")].ci_low is None
    assert rows[("b", "base")].std == 0.0 and rows[("b", "base")].ci_low is None
    assert rows[("b", "new")].n == 2
    comps = {c.task: c for c in out.comparisons}
    assert comps["a"].t_pvalue is None and comps["a"].significant is None
    text = "\n".join(out.warnings)
    assert "n=1" in text and "NaN" in text and "zero observed spread" in text


def test_several_metrics_each_get_a_goal_and_the_first_is_aggregated():
    table = pd.concat([TABLE, _table({("a", "base"): [0.3, 0.31], ("a", "new"): [0.2, 0.21]},
                                     metric="loss")])
    out = analyze(table, baseline="base", goal={"acc": "max", "loss": "min"}, reps=500)
    loss = [c for c in out.comparisons if c.metric == "loss"][0]
    assert loss.prob_improvement == 1.0  # lower loss is better
    assert any("aggregate across tasks is of 'acc'" in w for w in out.warnings)
    only_loss = analyze(table, metric="loss", reps=500)
    assert {r.metric for r in only_loss.summary} == {"loss"}


def test_references_normalise_the_aggregate():
    out = analyze(TABLE, references={"a": (0.0, 1.0), "b": (0.0, 10.0)}, reps=500)
    base = out.aggregate[0]
    assert base.mean.value == pytest.approx((np.mean(BASE_A) + np.mean(BASE_B) / 10) / 2)
    assert base.mean.ci_low <= base.mean.value <= base.mean.ci_high
    assert not any("reference" in w for w in out.warnings)


def test_same_seed_reproduces_and_another_seed_changes_the_bootstrap():
    one = analyze(TABLE, baseline="base", reps=500, seed=1)
    assert one == analyze(TABLE, baseline="base", reps=500, seed=1)
    two = analyze(TABLE, baseline="base", reps=500, seed=2)
    # (the bootstrap-t is null below 8 seeds: the across-task bootstrap shows the seed)
    assert [r.iqm.ci_low for r in one.aggregate] != [r.iqm.ci_low for r in two.aggregate]
    assert [r.mean for r in one.summary] == [r.mean for r in two.summary]


def _curves() -> pd.DataFrame:
    rows = []
    for config, gain in (("base", 1.0), ("new", 2.0)):
        for seed in range(3):
            steps = np.arange(0, 101, 10) + (5 if seed == 1 else 0)  # seed 1 logs off-grid
            for s in steps:
                rows.append({"task": "t", "config": config, "seed": seed, "metric": "r",
                             "step": float(s), "value": gain * s / 100 + 0.01 * seed})
    return pd.DataFrame(rows)


def test_curves_are_aligned_then_summarised():
    runs, _ = reduce_runs(validate_table(_curves()), "auc")
    # Common range [5, 100]: a line gain*s/100 averages gain*52.5/100 there.
    got = runs.set_index(["config", "seed"])["value"]
    assert got[("base", 0)] == pytest.approx(0.525)
    assert got[("new", 2)] == pytest.approx(1.05 + 0.02)
    out = analyze(_curves(), baseline="base", summary="slope", reps=500)
    assert out.comparisons[0].mean_diff == pytest.approx(0.01)


def test_auc_of_final_only_table_is_a_clear_error():
    with pytest.raises(DataError, match="no runs left to analyse with summary 'auc'"):
        analyze(TABLE, summary="auc")


@pytest.mark.parametrize(
    ("frame", "message"),
    [
        (TABLE.drop(columns=["seed"]), "scores.csv: missing column(s) seed"),
        (TABLE.assign(value=["x"] + [0.1] * (len(TABLE) - 1)),
         "scores.csv: column 'value' must hold numbers; row 1 has 'x'"),
        (TABLE.iloc[:0], "scores.csv: the table has no rows"),
    ],
)
def test_bad_tables_name_the_file_and_column(frame, message):
    with pytest.raises(DataError) as err:
        analyze(frame, source="scores.csv")
    assert message in str(err.value)


def test_unknown_baseline_lists_the_configs():
    with pytest.raises(DataError, match="no baseline 'old'; configs are base, new"):
        analyze(TABLE, baseline="old")


def test_duplicate_final_values_are_averaged_and_a_nan_among_them_is_kept():
    table = pd.DataFrame({"task": "t", "config": "a", "seed": [0, 0, 1, 1, 2],
                          "value": [1.0, 3.0, 5.0, np.nan, 4.0]})
    runs, notes = reduce_runs(validate_table(table), "final")
    got = runs.set_index("seed")["value"]
    assert got[0] == 2.0 and np.isnan(got[1]) and got[2] == 4.0
    assert any("2 run(s) have several final values" in n for n in notes)


def test_an_empty_metric_cell_is_an_error_naming_the_row():
    table = TABLE.copy()
    table.loc[2, "metric"] = np.nan
    with pytest.raises(DataError, match="scores.csv: column 'metric' is empty in row 3"):
        validate_table(table, "scores.csv")


def test_secondary_metrics_do_not_enter_the_primary_metrics_holm_family():
    from statsmodels.stats.multitest import multipletests

    rng = np.random.default_rng(8)
    rows = []
    for task in ("a", "b"):
        base = rng.normal(0.5, 0.05, 8)
        for config, shift in (("base", 0.0), ("new", 0.08)):
            score = base + shift + rng.normal(0, 0.02, 8)
            fps = rng.normal(100, 5, 8)
            rows += [(task, config, s, "score", v) for s, v in enumerate(score)]
            rows += [(task, config, s, "fps", v) for s, v in enumerate(fps)]
    df = pd.DataFrame(rows, columns=["task", "config", "seed", "metric", "value"])
    both = analyze(df, baseline="base", reps=200)
    alone = analyze(df[df["metric"] == "score"], baseline="base", reps=200)
    for metric in ("score", "fps"):
        mine = [c for c in both.comparisons if c.metric == metric]
        expected = multipletests([c.pvalue for c in mine], method="holm")[1]
        assert [c.p_holm for c in mine] == pytest.approx(list(expected))
    # The same p-values whether or not the secondary metric is in the table (as in the report).
    assert [c.p_holm for c in both.comparisons if c.metric == "score"] == pytest.approx(
        [c.p_holm for c in alone.comparisons])


def test_analyze_takes_its_settings_as_one_options_record_or_as_changes_to_it():
    from dataclasses import FrozenInstanceError

    from benchlab.stats import AnalysisOptions

    options = AnalysisOptions(baseline="base", reps=1_000, seed=3)
    by_record = analyze(TABLE, options).to_dict()
    by_changes = analyze(TABLE, baseline="base", reps=1_000, seed=3).to_dict()
    assert by_record == by_changes
    assert [r["candidate"] for r in by_record["comparisons"]] != []
    # A change overrides the record's field, the rest of the record stands.
    assert analyze(TABLE, options, baseline=None).comparisons == []
    with pytest.raises(TypeError, match="basline"):
        analyze(TABLE, basline="base")
    with pytest.raises(FrozenInstanceError):
        options.reps = 5  # type: ignore[misc]


def test_analyze_with_no_resamples_gives_the_t_results_and_null_bootstrap_intervals_without_warnings_of_them():
    """reps=0 asks for no bootstrap: the t intervals and tests stand (equal to scipy's), every
    bootstrap interval is null, and no warning claims the runs did not vary."""
    import numpy as np
    import pandas as pd
    from scipy import stats as sps

    from benchlab import stats

    rng = np.random.default_rng(3)
    values = {(t, c): rng.normal(1.0 * (c == "b"), 1.0, 10) for t in ("x", "y") for c in ("a", "b")}
    df = pd.DataFrame([{"task": t, "config": c, "seed": s, "metric": "acc", "value": v}
                       for (t, c), vs in values.items() for s, v in enumerate(vs)])
    result = stats.analyze(df, reps=0, baseline="a", assume_normal=("acc",))
    row = next(r for r in result.summary if (r.task, r.config) == ("x", "a"))
    low, high = sps.t.interval(0.95, 9, loc=np.mean(values["x", "a"]), scale=sps.sem(values["x", "a"]))
    assert (row.ci_low, row.ci_high) == pytest.approx((low, high))
    assert row.boot_ci_low is None and row.boot_ci_high is None
    cmp = next(r for r in result.comparisons if r.task == "x")
    assert cmp.t_pvalue == pytest.approx(sps.ttest_rel(values["x", "b"], values["x", "a"]).pvalue)
    assert cmp.diff_boot_ci_low is None and cmp.diff_boot_ci_high is None
    assert all(e.ci_low is None for a in result.aggregate for e in (a.iqm, a.median, a.mean))
    assert not [w for w in result.warnings if "resample" in w]


def test_analyze_refuses_a_negative_number_of_resamples_by_name():
    import pandas as pd

    from benchlab import stats
    from benchlab.errors import DataError

    df = pd.DataFrame({"task": "t", "config": ["a", "b"], "seed": 0, "metric": "m", "value": [1.0, 2.0]})
    with pytest.raises(DataError, match="reps must be .*got -5"):
        stats.analyze(df, reps=-5)


@pytest.mark.parametrize("given", ["acc", True, ["acc"], ("*",)])
def test_assume_normal_given_as_one_name_or_true_means_that_metric_not_its_letters(given):
    """A significant paired t verdict without a range is withheld unless normality is assumed;
    one name (not a list) or True must assume it, as the list forms do."""
    import numpy as np

    rng = np.random.default_rng(1)
    df = pd.DataFrame([{"task": "x", "config": c, "seed": s, "metric": "acc",
                        "value": rng.normal(3.0 * (c == "b"), 1.0)} for c in ("a", "b") for s in range(10)])
    withheld = analyze(df, baseline="a", reps=200).comparisons[0]
    assumed = analyze(df, baseline="a", reps=200, assume_normal=given).comparisons[0]
    assert withheld.significant is None
    assert assumed.significant is True and assumed.decided_by.startswith("paired t, normal distribution assumed")
