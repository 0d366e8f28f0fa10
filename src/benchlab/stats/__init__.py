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

from typing import TYPE_CHECKING, Any

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

if TYPE_CHECKING:
    from benchlab.stats.question_table import QuestionAnalysis, compare_questions

#: Public names whose module loads scipy.stats (about a second on a cold start), imported when
#: first asked for, so that ``import benchlab.stats`` stays as quick as it was.
_LAZY = {"QuestionAnalysis": "benchlab.stats.question_table", "compare_questions": "benchlab.stats.question_table"}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


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
