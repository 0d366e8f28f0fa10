import subprocess
import sys

import pytest

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


def test_each_public_name_is_its_modules_own_object():
    import importlib

    for name in benchlab.stats.__all__:
        module = importlib.import_module(benchlab.stats._WHERE[name])
        assert getattr(benchlab.stats, name) is getattr(module, name), name


# That importing the package loads none of its modules and that they import each other without a
# cycle is tests/test_lazy_packages.py's, for every package that exports lazily.


# Two threads each import one module of the package, released together, in a fresh interpreter
# whose third-party imports are done (so both reach the package's own imports at once).
PAIR = """
import sys, threading
import numpy, scipy.stats  # noqa: F401
errors = []
start = threading.Barrier(2)

def load(name):
    start.wait()
    try:
        __import__(name)
    except BaseException as exc:
        errors.append(repr(exc))

threads = [threading.Thread(target=load, args=(n,)) for n in sys.argv[1:]]
for t in threads:
    t.start()
for t in threads:
    t.join()
print(errors)
"""


@pytest.mark.parametrize("pair", [("results_analysis", "curves"), ("table", "analysis"),
                                  ("versions", "question_table")])
def test_two_threads_importing_two_of_its_modules_at_once_both_get_whole_modules(pair: tuple[str, str]):
    # With the __init__ that imported every module, the first pair deadlocked on every try here.
    out = subprocess.run([sys.executable, "-c", PAIR, *(f"benchlab.stats.{m}" for m in pair)],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip() == "[]", out.stdout
