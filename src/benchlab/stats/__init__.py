"""Statistics as pure functions over numpy arrays: no I/O, vectorised, seeded.

Modules, one concept each: :mod:`~benchlab.stats.bootstrap` (resampling),
:mod:`~benchlab.stats.describe` (one sample, ranking), :mod:`~benchlab.stats.compare`
(candidate vs baseline), :mod:`~benchlab.stats.aggregate` (across tasks),
:mod:`~benchlab.stats.scores` (normalised score matrices of a table),
:mod:`~benchlab.stats.curves` (learning curves), :mod:`~benchlab.stats.seeds`
(how many seeds), and :mod:`~benchlab.stats.table` (a whole long-format table).
Definitions and defaults are in ``docs/statistics.md``.
"""

from benchlab.stats.aggregate import (
    AGGREGATES,
    aggregate,
    average_probability_of_improvement,
    iqm,
    mean_of_means,
    median_of_means,
    normalize,
    optimality_gap,
    performance_profile,
)
from benchlab.stats.bootstrap import (
    bootstrap_ci,
    bootstrap_distribution,
    bootstrap_mean_diff_ci,
    percentile_interval,
    stratified_bootstrap,
)
from benchlab.stats.compare import (
    Comparison,
    cohens_d,
    compare,
    hedges_g,
    holm,
    is_significant,
    paired_t_pvalue,
    probability_of_improvement,
    welch_pvalue,
)
from benchlab.stats.curves import SUMMARIES, align, common_grid, summarize
from benchlab.stats.describe import Description, describe, is_high_variance, rank, t_interval
from benchlab.stats.scores import ScoreMatrices, score_matrices
from benchlab.stats.seeds import (
    cv_of_mean,
    effect_from_pilot,
    paired_power,
    seeds_for_power,
    smallest_n,
)
from benchlab.stats.sizing import power_analysis, variance_analysis
from benchlab.stats.table import analyze, reduce_runs, validate_table

__all__ = [
    "AGGREGATES",
    "SUMMARIES",
    "Comparison",
    "Description",
    "ScoreMatrices",
    "aggregate",
    "align",
    "analyze",
    "average_probability_of_improvement",
    "bootstrap_ci",
    "bootstrap_distribution",
    "bootstrap_mean_diff_ci",
    "cohens_d",
    "common_grid",
    "compare",
    "cv_of_mean",
    "describe",
    "effect_from_pilot",
    "hedges_g",
    "holm",
    "iqm",
    "is_high_variance",
    "is_significant",
    "mean_of_means",
    "median_of_means",
    "normalize",
    "optimality_gap",
    "paired_power",
    "paired_t_pvalue",
    "percentile_interval",
    "performance_profile",
    "power_analysis",
    "probability_of_improvement",
    "rank",
    "score_matrices",
    "reduce_runs",
    "seeds_for_power",
    "smallest_n",
    "stratified_bootstrap",
    "summarize",
    "t_interval",
    "validate_table",
    "variance_analysis",
    "welch_pvalue",
]
