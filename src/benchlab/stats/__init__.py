"""Statistics as pure functions over numpy arrays: no I/O, vectorised, seeded.

Modules, one concept each: :mod:`~benchlab.stats.bootstrap` (resampling),
:mod:`~benchlab.stats.describe` (one sample, ranking), :mod:`~benchlab.stats.compare`
(candidate vs baseline), :mod:`~benchlab.stats.aggregate` (across tasks),
:mod:`~benchlab.stats.scores` (normalised score matrices of a table),
:mod:`~benchlab.stats.curves` (learning curves), :mod:`~benchlab.stats.ranktests`
(exact rank tests), :mod:`~benchlab.stats.tolerance` (what counts as zero),
:mod:`~benchlab.stats.seeds`
(how many seeds), :mod:`~benchlab.stats.table` (a whole long-format table),
:mod:`~benchlab.stats.runvalues` (one value per run, without pandas),
:mod:`~benchlab.stats.analysis` (its typed result), :mod:`~benchlab.stats.results_analysis`
(a results folder's one analysis, which every output renders), :mod:`~benchlab.stats.figures`
(the numbers of its figures of seeds, computed on first use), :mod:`~benchlab.stats.versions`
(two versions of a benchmark: what ``benchlab diff`` shows) and :mod:`~benchlab.stats.question_table`
(a whole samples table, question by question).
Definitions and defaults are in ``docs/statistics.md``.
"""

from typing import TYPE_CHECKING

from benchlab.names.exports import export_lazily

if TYPE_CHECKING:
    from benchlab.stats.aggregate import (
        AGGREGATES,
        aggregate,
        aggregate_many,
        average_probability_of_improvement,
        iqm,
        mean_of_means,
        median_of_means,
        normalize,
        optimality_gap,
        performance_profile,
    )
    from benchlab.stats.analysis import AggregateRow, Analysis, ComparisonRow, Estimate, SummaryRow
    from benchlab.stats.bootstrap import (
        METHODS,
        bootstrap_ci,
        bootstrap_distribution,
        bootstrap_mean_diff_ci,
        percentile_interval,
        stratified_bootstrap,
        studentized_mean_ci,
    )
    from benchlab.stats.compare import (
        Comparison,
        cohens_d,
        compare,
        diff_t_interval,
        hedges_g,
        holm,
        is_significant,
        paired_t_pvalue,
        probability_of_improvement,
        welch_pvalue,
    )
    from benchlab.stats.curves import SUMMARIES, align, common_grid, summarize
    from benchlab.stats.describe import (
        Description,
        describe,
        is_high_variance,
        median_member,
        normal_interval,
        rank,
        t_interval,
    )
    from benchlab.stats.question_table import QuestionAnalysis, compare_questions
    from benchlab.stats.ranktests import RankTest, rank_sum_test, signed_rank_test
    from benchlab.stats.results_analysis import ResultsAnalysis, analyze_results, analyze_table
    from benchlab.stats.scores import NORMALIZATIONS, ScoreMatrices, score_matrices
    from benchlab.stats.seeds import (
        cv_of_mean,
        effect_from_pilot,
        paired_power,
        seeds_for_power,
        smallest_n,
    )
    from benchlab.stats.sizing import (
        CvCurve,
        PowerAnalysis,
        PowerRow,
        TaskVariance,
        VarianceAnalysis,
        power_analysis,
        variance_analysis,
    )
    from benchlab.stats.table import ALIGNS, AnalysisOptions, analyze, reduce_runs, validate_table
    from benchlab.stats.tolerance import RELATIVE_TOLERANCE
    from benchlab.stats.versions import VersionAnalysis, VersionChange, VersionQuestions, VersionRuns, analyze_versions

#: Where each public name lives. The package imports none of its modules until a name is asked
#: for (:func:`benchlab.names.exports.export_lazily`, which says why); its modules import each
#: other without a cycle (a test checks both), which makes concurrent first imports safe.
_WHERE = {
    "AGGREGATES": "benchlab.stats.aggregate",
    "aggregate": "benchlab.stats.aggregate",
    "aggregate_many": "benchlab.stats.aggregate",
    "average_probability_of_improvement": "benchlab.stats.aggregate",
    "iqm": "benchlab.stats.aggregate",
    "mean_of_means": "benchlab.stats.aggregate",
    "median_of_means": "benchlab.stats.aggregate",
    "normalize": "benchlab.stats.aggregate",
    "optimality_gap": "benchlab.stats.aggregate",
    "performance_profile": "benchlab.stats.aggregate",
    "AggregateRow": "benchlab.stats.analysis",
    "Analysis": "benchlab.stats.analysis",
    "ComparisonRow": "benchlab.stats.analysis",
    "Estimate": "benchlab.stats.analysis",
    "SummaryRow": "benchlab.stats.analysis",
    "METHODS": "benchlab.stats.bootstrap",
    "bootstrap_ci": "benchlab.stats.bootstrap",
    "bootstrap_distribution": "benchlab.stats.bootstrap",
    "bootstrap_mean_diff_ci": "benchlab.stats.bootstrap",
    "percentile_interval": "benchlab.stats.bootstrap",
    "stratified_bootstrap": "benchlab.stats.bootstrap",
    "studentized_mean_ci": "benchlab.stats.bootstrap",
    "Comparison": "benchlab.stats.compare",
    "cohens_d": "benchlab.stats.compare",
    "compare": "benchlab.stats.compare",
    "diff_t_interval": "benchlab.stats.compare",
    "hedges_g": "benchlab.stats.compare",
    "holm": "benchlab.stats.compare",
    "is_significant": "benchlab.stats.compare",
    "paired_t_pvalue": "benchlab.stats.compare",
    "probability_of_improvement": "benchlab.stats.compare",
    "welch_pvalue": "benchlab.stats.compare",
    "SUMMARIES": "benchlab.stats.curves",
    "align": "benchlab.stats.curves",
    "common_grid": "benchlab.stats.curves",
    "summarize": "benchlab.stats.curves",
    "Description": "benchlab.stats.describe",
    "describe": "benchlab.stats.describe",
    "is_high_variance": "benchlab.stats.describe",
    "median_member": "benchlab.stats.describe",
    "normal_interval": "benchlab.stats.describe",
    "rank": "benchlab.stats.describe",
    "t_interval": "benchlab.stats.describe",
    "QuestionAnalysis": "benchlab.stats.question_table",
    "compare_questions": "benchlab.stats.question_table",
    "RankTest": "benchlab.stats.ranktests",
    "rank_sum_test": "benchlab.stats.ranktests",
    "signed_rank_test": "benchlab.stats.ranktests",
    "ResultsAnalysis": "benchlab.stats.results_analysis",
    "analyze_results": "benchlab.stats.results_analysis",
    "analyze_table": "benchlab.stats.results_analysis",
    "NORMALIZATIONS": "benchlab.stats.scores",
    "ScoreMatrices": "benchlab.stats.scores",
    "score_matrices": "benchlab.stats.scores",
    "cv_of_mean": "benchlab.stats.seeds",
    "effect_from_pilot": "benchlab.stats.seeds",
    "paired_power": "benchlab.stats.seeds",
    "seeds_for_power": "benchlab.stats.seeds",
    "smallest_n": "benchlab.stats.seeds",
    "CvCurve": "benchlab.stats.sizing",
    "PowerAnalysis": "benchlab.stats.sizing",
    "PowerRow": "benchlab.stats.sizing",
    "TaskVariance": "benchlab.stats.sizing",
    "VarianceAnalysis": "benchlab.stats.sizing",
    "power_analysis": "benchlab.stats.sizing",
    "variance_analysis": "benchlab.stats.sizing",
    "ALIGNS": "benchlab.stats.table",
    "AnalysisOptions": "benchlab.stats.table",
    "analyze": "benchlab.stats.table",
    "reduce_runs": "benchlab.stats.table",
    "validate_table": "benchlab.stats.table",
    "RELATIVE_TOLERANCE": "benchlab.stats.tolerance",
    "VersionAnalysis": "benchlab.stats.versions",
    "VersionChange": "benchlab.stats.versions",
    "VersionQuestions": "benchlab.stats.versions",
    "VersionRuns": "benchlab.stats.versions",
    "analyze_versions": "benchlab.stats.versions",
}


export_lazily(__name__, _WHERE)


__all__ = [
    "AGGREGATES",
    "ALIGNS",
    "METHODS",
    "NORMALIZATIONS",
    "RELATIVE_TOLERANCE",
    "SUMMARIES",
    "AggregateRow",
    "Analysis",
    "AnalysisOptions",
    "Comparison",
    "CvCurve",
    "ComparisonRow",
    "Description",
    "Estimate",
    "PowerAnalysis",
    "PowerRow",
    "QuestionAnalysis",
    "RankTest",
    "ResultsAnalysis",
    "ScoreMatrices",
    "SummaryRow",
    "TaskVariance",
    "VarianceAnalysis",
    "VersionAnalysis",
    "VersionChange",
    "VersionQuestions",
    "VersionRuns",
    "aggregate",
    "aggregate_many",
    "align",
    "analyze",
    "analyze_results",
    "analyze_table",
    "analyze_versions",
    "average_probability_of_improvement",
    "bootstrap_ci",
    "bootstrap_distribution",
    "bootstrap_mean_diff_ci",
    "cohens_d",
    "common_grid",
    "compare",
    "compare_questions",
    "cv_of_mean",
    "describe",
    "diff_t_interval",
    "effect_from_pilot",
    "hedges_g",
    "holm",
    "iqm",
    "is_high_variance",
    "is_significant",
    "mean_of_means",
    "median_member",
    "median_of_means",
    "normal_interval",
    "normalize",
    "optimality_gap",
    "paired_power",
    "paired_t_pvalue",
    "percentile_interval",
    "performance_profile",
    "power_analysis",
    "probability_of_improvement",
    "rank",
    "rank_sum_test",
    "score_matrices",
    "reduce_runs",
    "seeds_for_power",
    "signed_rank_test",
    "smallest_n",
    "stratified_bootstrap",
    "studentized_mean_ci",
    "summarize",
    "t_interval",
    "validate_table",
    "variance_analysis",
    "welch_pvalue",
]
