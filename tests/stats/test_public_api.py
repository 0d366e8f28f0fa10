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


def _stats_module_graph() -> dict[str, set[str]]:
    """benchlab.stats' modules and those of them each imports when it is imported (module level,
    outside ``if TYPE_CHECKING``), read from the source."""
    import ast
    from pathlib import Path

    folder = Path(benchlab.stats.__file__).parent
    names = {f"benchlab.stats.{p.stem}" for p in folder.glob("*.py") if p.stem != "__init__"} | {"benchlab.stats"}
    graph: dict[str, set[str]] = {}
    for path in folder.glob("*.py"):
        name = "benchlab.stats" if path.stem == "__init__" else f"benchlab.stats.{path.stem}"
        found: set[str] = set()
        for node in ast.parse(path.read_text()).body:
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                found.add(node.module)
                found |= {f"{node.module}.{a.name}" for a in node.names}
            elif isinstance(node, ast.Import):
                found |= {a.name for a in node.names}
        graph[name] = found & names
    return graph


def test_importing_the_package_runs_none_of_its_modules_and_they_import_each_other_without_a_cycle():
    # Two threads importing two modules of a package at once can deadlock on CPython's module
    # locks (a module's is taken before its package's) when the package's __init__ imports its
    # modules or the modules import in a cycle; the deadlock is broken by handing one thread a
    # half-initialised module. Neither may be: the package is lazy, its modules' imports a DAG.
    import graphlib

    graph = _stats_module_graph()
    assert graph["benchlab.stats"] == set()
    assert len(graph) > 20
    list(graphlib.TopologicalSorter(graph).static_order())  # raises CycleError on a cycle
    code = "import sys, benchlab.stats; print(sorted(m for m in sys.modules if m.startswith('benchlab.stats.')))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


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
