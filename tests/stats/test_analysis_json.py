"""The JSON of ``benchlab analyze --json`` is a contract: the typed result must print it unchanged.

The files under ``golden/`` were written by the dict-returning ``analyze`` (main at 0b7a328,
before the result was typed) from the hand-built ``golden/table.csv`` (3 tasks x 3 configs x
6 seeds; an accuracy with a NaN seed and a missing seed, a loss logged as a learning curve)
with the commands below. The contract is the keys, their order, every string, null and integer,
and the layout of the text: those are compared exactly. Floats are compared to 1e-12 relative:
the order in which numpy sums a bootstrap's resamples changes between releases and moves a bound
in its 15th or 16th digit, which no user of the JSON can rely on. They were written again once since,
when the across-task intervals changed (the median's shrinkage, the single-task IQM and gap):
only ``methods.aggregate_ci`` and the median's ``median_ci_low``/``median_ci_high`` differ.
And once more when the IQM's dot products began to sum along a contiguous axis (a faster
layout of the resample counts): three IQM bounds changed in their last digit (2e-16). And once
when a constant shift (every paired difference the same) lost its zero-width interval: the six
loss comparisons of that kind have null t and bootstrap intervals and a warning saying why, and
their spurious "look bimodal" caveats (float noise in equal differences) are gone. And once when
the across-task IQM of a table with a failed or missing seed began to cut the full table's share
of the task-weighted runs (⌊N/4⌋/N of its N slots, as trim_mean on a full table) rather than a
quarter of them: one IQM of the loss file with a lost seed, and its bounds, moved in the fifth digit. And once when
the shape warning was calibrated (an outlier and a two-groups statistic at their normal-data
critical values, no t/rank disagreement): four caveats on normal-looking seeds left the warnings;
a significant verdict from few seeds gained its normal-theory warning; and the three "flaky" loss
rows, whose paired comparison with the best config is significant, are no longer ranked tied (1 → 2).
And once when the fixed-seed verdict began to need a range test's confirmation or an assumed normal
distribution (benchlab.stats.verdict): every comparison gained ``decided_by``, and the one significant
t verdict of an acc without a range (t2 cand, 5 seeds, Holm p 0.038) is withheld (null) with a warning.
And once when a constant shift (where the exact rank test decides) was named as decided by a test valid for
any distribution: the ten comparisons of that kind read "Wilcoxon signed-rank (exact), valid for any
distribution: about the median paired difference" in ``decided_by``; their verdicts and every rank are unchanged.
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from benchlab.errors import BadArgument
from benchlab.stats import analyze
from benchlab.stats.accounting import analyze_seeds
from benchlab.stats.analysis import AggregateRow, Analysis, ComparisonRow, Estimate, SummaryRow
from benchlab_testing import run_cli

GOLDEN = Path(__file__).parent / "golden"

CASES = {
    "analyze_all.json": ["--baseline", "base", "--reps", "500", "--range", "acc=0,1",
                         "--references", "references.csv"],
    "analyze_loss_auc.json": ["--baseline", "base", "--metric", "loss", "--goal", "min",
                              "--summary", "auc", "--method", "percentile", "--failed-as", "worst",
                              "--reps", "500"],
}


FLOAT_RTOL = 1e-12
_NUMBER = re.compile(r"-?\d+\.\d+(?:[eE][-+]?\d+)?|-?\d+[eE][-+]?\d+")


def _pairs(text: str) -> Any:
    return json.loads(text, object_pairs_hook=lambda kv: ("object", kv))


def _same(actual: Any, expected: Any, where: str) -> None:
    if isinstance(expected, float) and not isinstance(expected, bool):
        assert isinstance(actual, float), f"{where}: {actual!r} is not a float like {expected!r}"
        assert math.isclose(actual, expected, rel_tol=FLOAT_RTOL, abs_tol=FLOAT_RTOL), (
            f"{where}: {actual!r} != {expected!r} (rel tol {FLOAT_RTOL})")
    elif isinstance(expected, tuple):
        assert isinstance(actual, tuple), f"{where}: {actual!r} is not an object"
        assert [k for k, _ in actual[1]] == [k for k, _ in expected[1]], f"{where}: keys or their order differ"
        for (key, a), (_, e) in zip(actual[1], expected[1], strict=True):
            _same(a, e, f"{where}.{key}")
    elif isinstance(expected, list):
        assert isinstance(actual, list) and len(actual) == len(expected), f"{where}: lists differ in length"
        for i, (a, e) in enumerate(zip(actual, expected, strict=True)):
            _same(a, e, f"{where}[{i}]")
    else:
        assert type(actual) is type(expected) and actual == expected, f"{where}: {actual!r} != {expected!r}"


def assert_same_json(actual: str, expected: str) -> None:
    """The text has the golden's layout (with every float masked) and the same values, floats within
    ``FLOAT_RTOL``."""
    assert _NUMBER.sub("F", actual) == _NUMBER.sub("F", expected)
    _same(_pairs(actual), _pairs(expected), "$")


def test_json_comparison_fails_on_a_real_difference():
    golden = (GOLDEN / "analyze_api_observed.json").read_text()
    value = json.loads(golden)["summary"][0]["ci_low"]
    nudged = golden.replace(repr(value), repr(value * (1 + 1e-9)), 1)
    with pytest.raises(AssertionError, match="ci_low"):
        assert_same_json(nudged, golden)
    assert_same_json(golden.replace(repr(value), repr(value * (1 + 1e-15)), 1), golden)
    with pytest.raises(AssertionError):
        assert_same_json(golden.replace('"task"', '"Task"', 1), golden)


@pytest.mark.parametrize("name", sorted(CASES))
def test_cli_json_keeps_the_contract(name):
    res = run_cli("analyze", "table.csv", *CASES[name], "--json", cwd=GOLDEN)
    assert res.returncode == 0, res.stderr
    assert_same_json(res.stdout, (GOLDEN / name).read_text())


def test_library_result_serialises_to_the_same_json_as_the_dict_it_replaces():
    df = pd.read_csv(GOLDEN / "table.csv")
    out = analyze(df[df["metric"] == "acc"], baseline="base", candidates=["cand"], reps=300,
                  normalize="observed")
    assert_same_json(out.to_json() + "\n", (GOLDEN / "analyze_api_observed.json").read_text())


def test_result_is_typed_rows_not_dicts():
    df = pd.read_csv(GOLDEN / "table.csv")
    out = analyze_seeds(df, baseline="base", metric="acc", reps=200, ranges={"acc": (0.0, 1.0)})
    assert isinstance(out, Analysis)
    assert all(isinstance(r, SummaryRow) for r in out.summary)
    assert all(isinstance(r, ComparisonRow) for r in out.comparisons)
    assert all(isinstance(r, AggregateRow) and isinstance(r.iqm, Estimate) for r in out.aggregate)
    flaky = out.summary_of("t1", "flaky", "acc")
    assert flaky is not None and flaky.n == 5
    assert flaky.seeds is not None and flaky.seeds.failed_seeds == (1,) and flaky.seeds.planned == 6
    assert flaky.ci_method == "Student-t, cut at the range [0, 1]"
    t1 = next(c for c in out.comparisons if c.task == "t1" and c.candidate == "flaky")
    assert t1.pvalue == t1.t_pvalue and t1.caveat is not None and "1 of 6 seeds failed" in t1.caveat
    data = out.to_dict()
    assert data["methods"]["failed_as"] == "exclude"
    assert data["aggregate"][0]["iqm"] == out.aggregate[0].iqm.value


def test_a_config_that_failed_everywhere_keeps_rows_with_every_key():
    df = pd.read_csv(GOLDEN / "table.csv")
    df = df[df["metric"] == "acc"]
    df.loc[df["config"] == "flaky", "value"] = float("nan")
    data = analyze_seeds(df, baseline="base", reps=200).to_dict()
    summary = [r for r in data["summary"] if r["config"] == "flaky"]
    comps = [r for r in data["comparisons"] if r["candidate"] == "flaky"]
    assert len(summary) == 3 and all(r["n"] == 0 and r["mean"] is None for r in summary)
    assert len(comps) == 3 and all(r["significant"] is None for r in comps)
    # The same keys, in the same order, as a comparison that was computed.
    computed = next(r for r in data["comparisons"] if r["candidate"] == "cand")
    assert all(list(r) == list(computed) for r in comps)
    assert json.loads(json.dumps(data)) == data


def test_bad_choices_name_the_argument_in_the_library_and_the_flag_in_the_cli(tmp_path):
    df = pd.read_csv(GOLDEN / "table.csv")
    with pytest.raises(BadArgument) as err:
        analyze(df, summary="median")  # type: ignore[arg-type]
    assert str(err.value) == "summary must be one of final, auc, max, slope; got 'median'"
    assert err.value.argument == "summary"
    with pytest.raises(BadArgument, match="^goal of metric 'acc' must be one of max, min; got 'up'$"):
        analyze(df, goal={"acc": "up"})  # type: ignore[dict-item]
    res = run_cli("analyze", "table.csv", "--goal", "up", cwd=GOLDEN)
    assert res.returncode == 2
    assert "Invalid value for '--goal'" in res.stderr and "'up' is not one of 'max', 'min'" in res.stderr


def test_the_python_example_of_docs_statistics_runs(tmp_path, monkeypatch):
    from benchlab_testing import doc_blocks

    doc = Path(__file__).resolve().parents[2] / "docs" / "statistics.md"
    # The example reads the worked example's runs, saved as the doc says: scores.csv.
    (tmp_path / "scores.csv").write_text(doc_blocks(doc, "csv")[0])
    monkeypatch.chdir(tmp_path)
    code = next(b for b in doc_blocks(doc, "python") if "from benchlab.stats import analyze" in b)
    namespace: dict[str, object] = {}
    exec(code, namespace)  # noqa: S102  (the doc's own example)
    report = namespace["report"]
    assert isinstance(report, Analysis) and report.comparisons[0].p_holm is not None
    assert json.loads(report.to_json())["comparisons"][0]["p_holm"] == report.comparisons[0].p_holm
