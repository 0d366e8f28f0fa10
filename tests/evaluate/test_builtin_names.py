"""A function under test named like a builtin is the answer's; no other builtin-named definition changes the checks.

``entry.choices`` says which builtin names of the tests reach the answer (the item's
``entry_point``, else every way of binding the candidates, a test passing only where
every way passes it); the judge keeps to it in the split, in the pre-pass over the
tests' own data, and with the tests run whole. The suites of ``code_suites`` and
``shape_corpus`` hold the rest of the cases (lying helpers, innocent ones).
"""

from __future__ import annotations

import ast
import json

import pytest
from code_scoring import code_scorers, score_all

from benchlab.errors import DataError
from benchlab.evaluate import entry
from benchlab.evaluate.config import BenchmarkConfig
from benchlab.evaluate.datasets import load_items
from benchlab.evaluate.sandbox import SandboxLimits

LIMITS = SandboxLimits(timeout_secs=8, cpu_secs=6, memory_mb=512)
SUM = "def sum(xs):\n    total = 0\n    for x in xs:\n        total += x\n    return total\n"
WRONG_SUM = "def sum(xs):\n    return 0\n"
LYING_ABS = "def abs(x):\n    return 0\n"
ABS = "def abs(x):\n    return -x if x < 0 else x\n"
MAGNITUDE_MAX = ("def max(xs):\n    best = xs[0]\n    for x in xs:\n        if x * x > best * best:\n"
                 "            best = x\n    return best\n")


def _ways(answer: str, tests: str, entry_point: str | None = None) -> list[set[str]]:
    return [set(way) for way in entry.choices(answer, tests, entry_point).ways]


def test_names_of_the_answers_own_are_judged_once_as_before():
    assert _ways("def add(a, b):\n    return a + b\n", "assert add(1, 2) == 3") == [set()]


def test_a_builtin_name_the_tests_alone_call_and_the_answer_defines_is_the_answer_s():
    assert _ways(WRONG_SUM, "assert sum([1, 2]) == 3") == [{"sum"}]


def test_a_builtin_named_helper_beside_the_function_under_test_is_judged_both_ways():
    answer = LYING_ABS + "def mean(xs):\n    return 0\n"
    assert _ways(answer, "assert abs(mean([1, 2]) - 1.5) < 1e-9") == [set(), {"abs"}]


def test_builtin_names_alone_are_judged_every_way_that_binds_one_to_the_answer():
    # The function under test is one of them; which one, the text does not say.
    assert _ways(WRONG_SUM + LYING_ABS, "assert abs(sum([0.1, 0.2]) - 0.3) < 1e-9") == [
        {"abs"}, {"sum"}, {"abs", "sum"}]


def test_builtin_names_the_answer_leaves_to_python_keep_the_way_with_every_candidate_python_s():
    # max may be the function under test, missing: round alone the answer's is not surely the true way.
    assert _ways("def round(x, n=None):\n    return -7\n", "assert round(max([-7.2, 3.1])) == -7") == [
        set(), {"round"}]
    # Exception classes and the module's dunder names are never under test: they leave nothing out.
    assert _ways(WRONG_SUM, "try:\n    assert sum([1]) == 1\nexcept ValueError:\n    raise\n") == [{"sum"}]


def test_an_items_entry_point_decides_and_every_other_builtin_name_is_python_s():
    tests = "assert abs(sum([0.1, 0.2]) - 0.3) < 1e-9"
    assert _ways(WRONG_SUM + LYING_ABS, tests, entry_point="sum") == [{"sum"}]
    assert _ways(WRONG_SUM + LYING_ABS, tests, entry_point="total") == [set()]


def test_an_exception_class_named_like_a_builtin_one_stays_python_s():
    # The tests catch what the answer raises by its class's name: its own TimeoutError included.
    answer = "class TimeoutError(Exception):\n    pass\ndef fetch(x):\n    raise TimeoutError\n"
    assert _ways(answer, "try:\n    fetch(1)\nexcept TimeoutError:\n    pass") == [set()]


def test_tests_that_call_nothing_the_answer_defines_are_refused():
    found = entry.choices("print('hello')\n", "assert sum([1, 2]) == 3")
    assert found.ways == () and "the tests call no name the answer defines" in found.why


def test_more_candidates_than_can_be_judged_each_way_are_refused_naming_them():
    answer = "".join(f"def {name}(*a):\n    return 0\n" for name in ("abs", "len", "max", "min"))
    found = entry.choices(answer, "assert abs(len([max([1]), min([2])])) == 2")
    assert found.ways == ()
    assert "abs, len, max, min" in found.why and "entry_point" in found.why


def test_the_names_an_answer_binds_are_read_from_its_text():
    tree = ast.parse(
        "import os.path\nfrom math import pow, floor as fl\nfrom string import *\n"
        "def f(x, sum=0):\n    global abs\n    len = 3\n    abs = len\n"
        "class C:\n    max = 1\n"
        "squares = [round for round in range(3)]\n"
        "if True:\n    min = min\nelse:\n    del str\n"
        "try:\n    pass\nexcept ValueError as int:\n    pass\n"
        "lambda zip=0: zip\n"
        "(any := 1)\n")
    assert entry.answer_bindings(tree) == {"os", "pow", "fl", "f", "abs", "C", "squares", "min", "str", "int",
                                           "any"}


def test_a_code_item_whose_entry_point_is_not_a_name_is_refused_when_it_loads(tmp_path):
    dataset = tmp_path / "code.jsonl"
    dataset.write_text(json.dumps({"id": "a", "question": "q", "tests": "assert f(1)", "entry_point": "f"}) + "\n"
                       + json.dumps({"id": "b", "question": "q", "tests": "assert f(1)", "entry_point": 3}) + "\n")
    bench = BenchmarkConfig(dataset=dataset, scorer="code")
    with pytest.raises(DataError, match=r"code.jsonl:2: entry_point 3 is not a Python name"):
        load_items(bench)


@pytest.fixture
def scorers():
    with code_scorers(LIMITS) as scorers:
        yield scorers


@pytest.mark.slow
def test_an_entry_point_unlike_its_builtin_scores_1_only_where_the_item_names_it(scorers):
    # Without an entry_point, max and abs are both candidates: a way with max Python's must pass too.
    tests = "assert max([-7, 3]) == -7\nassert abs(max([2, -1])) == 2"
    named, unnamed = score_all(scorers, [({"tests": tests, "entry_point": "max"}, MAGNITUDE_MAX + ABS),
                                          ({"tests": tests}, MAGNITUDE_MAX + ABS)])
    assert (named.correct, named.detail) == (True, "")
    assert not unnamed.correct
    assert unnamed.detail == "test 1: AssertionError (judged with abs the answer's, max Python's builtin)"


@pytest.mark.slow
def test_with_an_entry_point_a_lying_helper_is_python_s_and_a_missing_function_a_name_error(scorers):
    tests = "assert abs(sum([0.1, 0.2]) - 0.3) < 1e-9"
    lying, missing, right = score_all(scorers, [
        ({"tests": tests, "entry_point": "sum"}, WRONG_SUM + LYING_ABS),
        ({"tests": tests, "entry_point": "sum"}, "def total(xs):\n    return 0.3\n"),
        ({"tests": tests, "entry_point": "sum"}, SUM + LYING_ABS)])
    assert not lying.correct and lying.detail == "test 1: AssertionError"
    assert not missing.correct and "NameError" in missing.detail
    assert (right.correct, right.detail) == (True, "")


@pytest.mark.slow
def test_the_tests_own_data_never_runs_a_builtin_name_that_is_the_answer_s(scorers):
    # The data is drawn by the tests' own code first (the pre-pass): were sum run there with
    # Python's, the value it recorded would pass whatever the answer's sum returns.
    tests = ("import random\nrng = random.Random(4)\nfor _ in range(3):\n"
             "    xs = [rng.randint(0, 9) for _ in range(3)]\n    got = sum(xs)\n"
             "    assert got == xs[0] + xs[1] + xs[2]\n")
    right, wrong = score_all(scorers, [({"tests": tests}, SUM), ({"tests": tests}, WRONG_SUM)])
    assert (right.correct, right.detail) == (True, "")
    assert not wrong.correct


@pytest.mark.slow
def test_a_lying_helper_never_covers_for_a_function_under_test_the_answer_lacks(scorers):
    # Python's max (3.1) stands in for the missing one, and the lying round would turn it into -7.
    tests = "assert round(max([-7.2, 3.1])) == -7"
    decoy, right = score_all(scorers, [({"tests": tests}, "def round(x, n=None):\n    return -7\n"),
                                        ({"tests": tests, "entry_point": "max"}, MAGNITUDE_MAX)])
    assert not decoy.correct
    assert decoy.detail == "test 1: AssertionError (judged with round Python's builtin)"
    assert (right.correct, right.detail) == (True, "")


@pytest.mark.slow
def test_the_reason_names_the_way_a_lying_helper_failed(scorers):
    tests = "assert abs(sum([0.1, 0.2]) - 0.3) < 1e-9"
    [score] = score_all(scorers, [({"tests": tests}, WRONG_SUM + LYING_ABS)])
    assert not score.correct
    assert score.detail == "test 1: AssertionError (judged with abs Python's builtin, sum the answer's)"
