import benchlab.stats


def test_public_names_are_pinned():
    # Adding or removing a public name is a decision: update this list with it.
    assert sorted(benchlab.stats.__all__) == sorted([
        "AGGREGATES", "ALIGNS", "METHODS", "NORMALIZATIONS", "RELATIVE_TOLERANCE", "RankTest",
        "aggregate_many", "diff_t_interval", "rank_sum_test", "signed_rank_test", "studentized_mean_ci",
        "SUMMARIES", "Comparison", "Description", "ScoreMatrices", "aggregate", "align", "analyze",
        "average_probability_of_improvement", "bootstrap_ci", "bootstrap_distribution",
        "bootstrap_mean_diff_ci", "cohens_d", "common_grid", "compare", "cv_of_mean", "describe",
        "effect_from_pilot", "hedges_g", "holm", "iqm", "is_high_variance", "is_significant",
        "mean_of_means", "median_of_means", "normalize", "optimality_gap", "paired_power",
        "paired_t_pvalue", "percentile_interval", "performance_profile", "power_analysis",
        "probability_of_improvement", "rank", "reduce_runs", "score_matrices", "seeds_for_power", "smallest_n",
        "stratified_bootstrap", "summarize", "t_interval", "validate_table", "variance_analysis",
        "welch_pvalue", "median_member", "normal_interval", "Analysis", "SummaryRow", "ComparisonRow",
        "AggregateRow", "Estimate", "AnalysisOptions", "PowerAnalysis", "PowerRow", "VarianceAnalysis",
        "TaskVariance", "CvCurve", "analyze_versions", "VersionAnalysis", "VersionChange", "VersionQuestions",
        "VersionRuns", "compare_questions", "QuestionAnalysis", "ResultsAnalysis", "analyze_results", "analyze_table",
    ])
    assert all(hasattr(benchlab.stats, name) for name in benchlab.stats.__all__)
