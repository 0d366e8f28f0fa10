"""Question-level statistics against statsmodels, scipy and small cases worked by hand."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
import statsmodels.api as sm
from scipy import stats
from statsmodels.stats.contingency_tables import mcnemar
from statsmodels.stats.multitest import multipletests
from statsmodels.stats.proportion import proportion_confint
from statsmodels.stats.sandwich_covariance import cov_cluster

from benchlab.stats.question_table import analyze_questions
from benchlab.stats.questions import (
    clustered_se,
    mcnemar_exact,
    minimum_detectable_effect,
    paired_questions,
    paired_seeds_questions,
    questions_for_effect,
    summarize_questions,
    variance_split,
    wilson_interval,
)


def test_se_over_questions_averages_each_questions_samples_first():
    # Three questions, two samples each: means 1, 0, 0.5; by hand s = 0.5, se = 0.5 / sqrt(3).
    scores = np.array([[1, 1], [0, 0], [1, 0]], dtype=float)
    s = summarize_questions(scores)
    assert s.mean == pytest.approx(0.5)
    assert s.se_questions == pytest.approx(0.5 / math.sqrt(3))
    assert s.se == pytest.approx(stats.sem([1, 0, 0.5]))
    assert s.n_questions == 3 and s.n_samples == 2
    # Counting the six samples as six questions would give a smaller, wrong SE.
    assert s.se > stats.sem(scores.ravel())
    low, high = stats.t.interval(0.95, 2, loc=0.5, scale=stats.sem([1, 0, 0.5]))
    assert (s.ci_low, s.ci_high) == pytest.approx((low, high))


def test_clustered_se_matches_statsmodels_cluster_robust_with_the_c_over_c_minus_1_factor():
    rng = np.random.default_rng(3)
    clusters = np.repeat(np.arange(7), [3, 5, 2, 4, 6, 1, 3])
    x = rng.normal(size=clusters.shape[0]) + np.repeat(rng.normal(size=7), [3, 5, 2, 4, 6, 1, 3])
    se, c = clustered_se(x, clusters)
    assert c == 7
    fit = sm.OLS(x, np.ones_like(x)).fit()
    # statsmodels without its small-sample correction is sum_g (sum e)^2 / n^2; the factor
    # C/(C-1) is the one Inspect AI applies.
    raw = cov_cluster(fit, clusters, use_correction=False)[0, 0]
    assert se == pytest.approx(math.sqrt(raw * 7 / 6))
    # And by hand: cluster sums of deviations.
    dev = x - x.mean()
    sums = np.array([dev[clusters == g].sum() for g in range(7)])
    assert se == pytest.approx(math.sqrt((sums**2).sum() * 7 / 6) / x.shape[0])


def test_clustered_interval_is_t_on_clusters_minus_one_degrees_of_freedom():
    # Scores in [0, 1] that are not all 0/1 (a binary score gets the Wilson interval instead).
    scores = np.array([0.9, 0.8, 0.1, 0.7, 0.2, 0.3, 1.0, 0.9, 0.6, 0.5])
    clusters = np.array([0, 0, 1, 1, 2, 2, 3, 3, 4, 4])
    s = summarize_questions(scores, clusters)
    # Equal clusters: CR2 is CR1 with C/(C-1), Bell-McCaffrey's df is C - 1.
    assert s.df == 4 and s.n_clusters == 5
    assert s.se_type.startswith("clustered") and s.ci_method == "t"
    assert s.se_clustered == pytest.approx(clustered_se(scores, clusters)[0])
    half = stats.t.ppf(0.975, 4) * s.se_clustered
    assert (s.ci_low, s.ci_high) == pytest.approx((0.6 - half, 0.6 + half))


@pytest.mark.parametrize("k,n", [(0, 30), (3, 30), (27, 30), (30, 30), (11, 40)])
def test_wilson_interval_matches_statsmodels(k, n):
    assert wilson_interval(k, n) == pytest.approx(proportion_confint(k, n, method="wilson"), abs=1e-12)


def test_binary_single_sample_summary_carries_wilson():
    scores = np.array([1] * 4 + [0] * 26, dtype=float)  # an AIME-sized set
    s = summarize_questions(scores)
    assert (s.wilson_low, s.wilson_high) == pytest.approx(proportion_confint(4, 30, method="wilson"))
    # The interval shown is the Wilson one: the t interval runs below what a proportion near 0 allows.
    assert (s.ci_low, s.ci_high) == (s.wilson_low, s.wilson_high) and s.ci_method == "Wilson"
    assert stats.t.interval(0.95, 29, loc=s.mean, scale=s.se)[0] < s.wilson_low


@pytest.mark.parametrize("better,worse", [(0, 0), (7, 7), (9, 2), (1, 12), (30, 14)])
def test_exact_mcnemar_matches_statsmodels(better, worse):
    expected = mcnemar([[10, better], [worse, 5]], exact=True).pvalue
    assert mcnemar_exact(better, worse) == pytest.approx(expected)


def test_binary_paired_comparison_counts_discordant_questions_and_uses_exact_mcnemar():
    base = np.array([1, 1, 0, 0, 1, 0, 1, 0, 0, 0, 1, 0], dtype=float)
    cand = np.array([1, 1, 1, 1, 1, 1, 0, 1, 0, 1, 1, 0], dtype=float)
    r = paired_questions(base, cand)
    assert (r.better, r.worse) == (5, 1)
    assert r.test == "exact McNemar"
    assert r.pvalue == pytest.approx(mcnemar([[4, 5], [1, 2]], exact=True).pvalue)
    assert r.mean_diff == pytest.approx(4 / 12)
    assert r.correlation == pytest.approx(stats.pearsonr(base, cand)[0])


def test_paired_comparison_with_samples_matches_scipy_paired_t_on_question_means():
    rng = np.random.default_rng(0)
    base = rng.integers(0, 2, size=(40, 4)).astype(float)
    cand = np.clip(base + rng.integers(0, 2, size=(40, 4)), 0, 1)
    r = paired_questions(base, cand)
    a, b = base.mean(axis=1), cand.mean(axis=1)
    ref = stats.ttest_rel(b, a)
    assert r.test == "paired t"
    assert r.pvalue == pytest.approx(ref.pvalue)
    ci = ref.confidence_interval(0.95)
    assert (r.ci_low, r.ci_high) == pytest.approx((ci.low, ci.high))
    assert r.se == pytest.approx(stats.sem(b - a))
    # The paired SE is smaller than the unpaired one when the checkpoints agree on questions.
    assert r.se < math.sqrt(stats.sem(a) ** 2 + stats.sem(b) ** 2)


def test_clustered_paired_comparison_matches_statsmodels_on_the_differences():
    rng = np.random.default_rng(5)
    clusters = np.repeat(np.arange(6), 5)
    base = rng.normal(size=30)
    cand = base + 0.3 + np.repeat(rng.normal(scale=0.5, size=6), 5)
    r = paired_questions(base, cand, clusters)
    d = cand - base
    fit = sm.OLS(d, np.ones_like(d)).fit(cov_type="cluster", cov_kwds={"groups": clusters, "use_correction": False})
    assert r.se == pytest.approx(float(fit.bse[0]) * math.sqrt(6 / 5))
    assert r.df == 5 and r.test == "clustered paired t"
    assert r.pvalue == pytest.approx(2 * stats.t.sf(abs(d.mean()) / r.se, 5))


def test_variance_split_by_hand():
    # Means 1, 0, 0.5: var (ddof 1) 0.25. Within: sample variances 0, 0, 0.5 -> 1/6. The noise the
    # samples put into the means: mean(s^2/K) = 0.25/3 = 1/12; between = 0.25 - 1/12 = 1/6.
    split = variance_split(np.array([[1, 1], [0, 0], [1, 0]], dtype=float))
    assert split is not None
    assert split.within == pytest.approx(1 / 6)
    assert split.between == pytest.approx(1 / 6)
    assert split.se_reruns == pytest.approx(math.sqrt((1 / 12) / 3))


def test_variance_split_recovers_a_random_effects_models_parts():
    rng = np.random.default_rng(11)
    n, k = 4000, 6
    truth = rng.normal(0, 0.5, size=(n, 1))  # between-question sd 0.5
    scores = truth + rng.normal(0, 1.0, size=(n, k))  # within sd 1
    split = variance_split(scores)
    assert split is not None
    assert split.between == pytest.approx(0.25, rel=0.08)
    assert split.within == pytest.approx(1.0, rel=0.03)


def _nested_by_hand(base: np.ndarray, cand: np.ndarray) -> tuple[float, float]:
    """The nested seeds x questions variance and Satterthwaite df, from ANOVA mean squares."""
    n = base.shape[1]
    d_q = cand.mean(axis=0) - base.mean(axis=0)
    v_q = d_q.var(ddof=1) / n
    v, terms = v_q, [(v_q, n - 1)]
    for x in (base, cand):
        s = x.shape[0]
        ms_seed = n * x.mean(axis=1).var(ddof=1)
        # Two-way residual mean square, as statsmodels' ANOVA of value ~ C(seed) + C(question).
        frame = pd.DataFrame({"y": x.ravel(), "seed": np.repeat(np.arange(s), n), "q": np.tile(np.arange(n), s)})
        fit = sm.OLS.from_formula("y ~ C(seed) + C(q)", frame).fit()
        ms_resid = fit.mse_resid
        if ms_seed > ms_resid:
            v += (ms_seed - ms_resid) / (n * s)
            terms += [(ms_seed / (n * s), s - 1), (ms_resid / (n * s), (s - 1) * (n - 1))]
    return v, v**2 / sum(t * t / f for t, f in terms)


def test_seeds_by_questions_is_the_nested_anova_variance_with_satterthwaite_df():
    rng = np.random.default_rng(2)
    s, n = 4, 25
    base = rng.normal(size=(s, n)) + rng.normal(size=(1, n))
    cand = base + 0.2 + rng.normal(scale=0.3, size=(s, 1)) + rng.normal(scale=0.3, size=(s, n))
    r = paired_seeds_questions(base, cand)
    v, df = _nested_by_hand(base, cand)
    assert r.se == pytest.approx(math.sqrt(v))
    assert r.df == pytest.approx(df, abs=0.01)
    assert r.n_seeds == 2 * s and r.test == "seeds (nested) x questions"
    assert r.variance_parts is not None and r.variance_parts["questions"] + r.variance_parts["seeds"] == (
        pytest.approx(v))


def test_mde_by_hand():
    assert minimum_detectable_effect(0.01) == pytest.approx((1.959963984540054 + 0.8416212335729143) * 0.01)


def test_questions_for_effect_reaches_the_asked_power_in_simulation():
    rng = np.random.default_rng(7)
    p_base, effect = 0.5, 0.08
    pilot_b = (rng.random((300, 1)) < p_base).astype(float)
    pilot_c = (rng.random((300, 1)) < p_base + effect).astype(float)
    plan = questions_for_effect(pilot_b, pilot_c, effect)
    assert plan.questions is not None
    n = plan.questions
    sims = 2000
    b = rng.random((sims, n)) < p_base
    c = rng.random((sims, n)) < p_base + effect
    d = c.astype(float) - b.astype(float)
    t = d.mean(axis=1) / (d.std(axis=1, ddof=1) / math.sqrt(n))
    power = float(np.mean(np.abs(t) > stats.t.ppf(0.975, n - 1)))
    assert 0.72 < power < 0.88


def test_more_samples_cannot_help_when_questions_differ_more_than_the_effect():
    rng = np.random.default_rng(1)
    hard = rng.random((50, 1))
    base = (rng.random((50, 4)) < hard).astype(float)
    cand = (rng.random((50, 4)) < np.clip(hard + rng.normal(0, 0.4, (50, 1)), 0, 1)).astype(float)
    plan = questions_for_effect(base, cand, 0.01)
    assert plan.samples is None  # the questions' own spread is above what 50 questions allow
    assert plan.questions is not None and plan.questions > 50


def test_holm_runs_across_tasks_as_statsmodels():
    rng = np.random.default_rng(4)
    rows = []
    for t, shift in enumerate([0.0, 0.15, 0.3]):
        base = rng.random(200) < 0.5
        cand = np.where(rng.random(200) < shift, True, base)
        for q in range(200):
            rows.append((f"t{t}", "a", str(q), float(base[q])))
            rows.append((f"t{t}", "b", str(q), float(cand[q])))
    table = pd.DataFrame(rows, columns=["task", "config", "question", "value"])
    result = analyze_questions(table, baseline="a")
    ps = [c.result.pvalue for c in result.comparisons]
    assert [c.p_holm for c in result.comparisons] == pytest.approx(list(multipletests(ps, method="holm")[1]))
    assert result.comparisons[2].verdict == "better"


def test_one_seed_per_checkpoint_comparison_has_a_verdict():
    rows = []
    for q in range(100):
        rows.append(("gsm8k", "step20", 42, str(q), 1.0 if q < 40 else 0.0))
        rows.append(("gsm8k", "step40", 42, str(q), 1.0 if q < 70 else 0.0))
    table = pd.DataFrame(rows, columns=["task", "config", "seed", "question", "value"])
    c = analyze_questions(table, baseline="step20").comparisons[0]
    assert c.verdict == "better"
    assert c.result.pvalue == pytest.approx(mcnemar([[40, 30], [0, 30]], exact=True).pvalue)


def test_samples_needed_is_unknown_with_one_sample_per_question():
    rng = np.random.default_rng(3)
    base = (rng.random((200, 1)) < 0.5).astype(float)
    cand = (rng.random((200, 1)) < 0.6).astype(float)
    plan = questions_for_effect(base, cand, 0.05)
    assert plan.samples is None and plan.samples_note == "one sample per question"
    assert plan.questions is not None


def test_samples_needed_shrinks_the_within_question_part_to_the_target():
    # Questions of equal difficulty (no between-question spread): only the draws vary, so more
    # samples per question reach any effect. By hand: within = p(1-p) for each side.
    rng = np.random.default_rng(9)
    base = (rng.random((400, 4)) < 0.5).astype(float)
    cand = (rng.random((400, 4)) < 0.5).astype(float)
    plan = questions_for_effect(base, cand, 0.02)
    assert plan.samples is not None
    z = stats.norm.ppf(0.975) + stats.norm.ppf(0.8)
    within = base.var(axis=1, ddof=1).mean() + cand.var(axis=1, ddof=1).mean()
    se2 = stats.sem(cand.mean(axis=1) - base.mean(axis=1)) ** 2
    between = max(0.0, se2 * 400 - within / 4)
    assert plan.samples == math.ceil(within / (400 * (0.02 / z) ** 2 - between))


def test_a_table_with_several_training_seeds_compares_seeds_by_questions():
    rng = np.random.default_rng(8)
    rows = []
    for seed in (1, 2, 3):
        for q in range(20):
            for cfg, shift in (("a", 0.0), ("b", 0.1)):
                rows.append(("t", cfg, seed, str(q), float(rng.random() < 0.5 + shift)))
    table = pd.DataFrame(rows, columns=["task", "config", "seed", "question", "value"])
    c = analyze_questions(table, baseline="a").comparisons[0]
    assert c.result.test == "seeds (nested) x questions" and c.result.n_seeds == 6
    wide = table.pivot_table(index=["config", "seed"], columns="question", values="value")
    qs = [str(q) for q in range(20)]
    base, cand = wide.loc["a"][qs].to_numpy(), wide.loc["b"][qs].to_numpy()
    assert c.result.mean_diff == pytest.approx((cand - base).mean())
    v, df = _nested_by_hand(base, cand)
    assert c.result.se == pytest.approx(math.sqrt(v))
    assert c.result.df == pytest.approx(df, abs=0.01)
