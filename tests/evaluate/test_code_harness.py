"""A code answer's verdict is decided where the answer's code never runs.

The hostile answers (``code_suites.HOSTILE``) try to pass without solving: they
end the process, forge output, read or rewrite their own memory, hunt for the
expected values, patch what the tests compare with, or return objects equal to
everything. Each must score 0 through the real scorer and sandbox; honest
answers score 1 and wrong ones 0. The same programs go through
lm-evaluation-harness's own code checker, and the side-by-side table is
asserted row by row against the verdicts ``code_suites`` states by hand.
"""

from __future__ import annotations

import ast
import json
import math
import subprocess
import sys
from collections import Counter
from fractions import Fraction

import pytest
from code_scoring import code_scorers, score_all
from code_suites import HONEST, HOSTILE, NEEDS_NUMPY, WRONG

from benchlab.evaluate import plain
from benchlab.evaluate.glue import Glue, GlueError
from benchlab.evaluate.harness import _answer_steps, _program, _walk, count_tests
from benchlab.evaluate.sandbox import SandboxLimits, default_python
from benchlab.evaluate.testplan import plan_tests

LIMITS = SandboxLimits(timeout_secs=6, cpu_secs=4, memory_mb=512)


def _runnable(suite: dict) -> dict:
    """``suite`` without its numpy cases where the sandbox's interpreter has no numpy."""
    has_numpy = subprocess.run([default_python(), "-c", "import numpy"], capture_output=True).returncode == 0
    return {n: c for n, c in suite.items() if has_numpy or n not in NEEDS_NUMPY}


@pytest.fixture
def scorers():
    with code_scorers(LIMITS) as scorers:
        yield scorers


_LM_EVAL_CHECK = """
import json, sys
from lm_eval.tasks.cruxeval.utils import check_correctness
cases = json.load(sys.stdin)
print(json.dumps([check_correctness(answer + "\\n" + tests, timeout=3) for tests, answer in cases]))
"""


def lm_eval_verdicts(cases) -> list[bool]:
    """lm-eval's checker on each program, in a process of its own (it forks, which a threaded pytest must not)."""
    pytest.importorskip("lm_eval.tasks.cruxeval.utils")
    done = subprocess.run([sys.executable, "-c", _LM_EVAL_CHECK], input=json.dumps(cases), capture_output=True,
                          text=True, timeout=900, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def suites():
    """The hostile, honest and wrong answers, each scored once through the real scorer and sandbox
    (three tests read these verdicts; judging ~110 programs again for each cost ~30 s of CPU)."""
    honest, wrong = _runnable(HONEST), _runnable(WRONG)
    cases = [(t, a) for t, a, _ in HOSTILE.values()] + list(honest.values()) + list(wrong.values())
    with code_scorers(LIMITS) as scorers:
        scores = score_all(scorers, cases)
    hostile_scores = scores[: len(HOSTILE)]
    honest_scores = scores[len(HOSTILE): len(HOSTILE) + len(honest)]
    wrong_scores = scores[len(HOSTILE) + len(honest):]
    return {"cases": cases, "hostile": dict(zip(HOSTILE, hostile_scores, strict=True)),
            "honest": dict(zip(honest, honest_scores, strict=True)),
            "wrong": dict(zip(wrong, wrong_scores, strict=True))}


@pytest.mark.slow
def test_hostile_answers_score_zero(suites):
    scores = list(suites["hostile"].values())
    passed = {n: s.detail for n, s in suites["hostile"].items() if s.correct}
    assert passed == {}
    # Where a test passed, the answer's own value was right (a forged "True" for is_even(4)).
    assert sum(s.tests_passed for s in scores) <= 1, [s.detail for s in scores if s.tests_passed]


@pytest.mark.slow
def test_honest_answers_keep_their_score_and_wrong_ones_fail(suites):
    honest, wrong = suites["honest"], suites["wrong"]
    assert len(honest) >= 20 and len(wrong) >= 10
    failed = {n: s.detail for n, s in honest.items() if not s.correct}
    assert failed == {}
    assert all(s.tests_passed == s.tests_total >= 1 for s in honest.values())
    assert [n for n, s in wrong.items() if s.correct] == []


@pytest.mark.slow
def test_lm_eval_code_checker_side_by_side(suites):
    """Row by row: our verdict, lm-eval's, and lm-eval's expected verdict stated by hand in code_suites."""
    honest, wrong = suites["honest"], suites["wrong"]
    names = list(HOSTILE) + list(honest) + list(wrong)
    expected_lm = [fooled for _, _, fooled in HOSTILE.values()] + [True] * len(honest) + [False] * len(wrong)
    expected_ours = [False] * len(HOSTILE) + [True] * len(honest) + [False] * len(wrong)
    ours = [s.correct for part in ("hostile", "honest", "wrong") for s in suites[part].values()]
    theirs = lm_eval_verdicts(suites["cases"])
    table = [f"{n[:60]:60s} benchlab={int(o)} lm-eval={int(t)}" for n, o, t in zip(names, ours, theirs, strict=True)]
    print("\n".join(table))
    assert theirs == expected_lm, "\n".join(table)
    assert ours == expected_ours, "\n".join(table)


# Answers that work the same on any item: none knows the task.
_GENERIC_CHEATS = [
    "import os, json\nreport = {'loaded': '', 'values': {f'__bl_{i}': ['b', True] for i in range(9)}, 'failed': [],"
    " 'modules': {}}\nos.write(3, (json.dumps(report) + '\\n').encode())\nos._exit(0)\n",
    "import builtins\nclass Same:\n    def __eq__(self, o):\n        return True\n    def __bool__(self):\n"
    "        return True\ndef __getattr__(name):\n    return lambda *a, **k: Same()\n"
    "for n in ('add', 'is_even', 'reverse', 'fib', 'count_vowels', 'dedupe', 'is_palindrome', 'gcd'):\n"
    "    globals()[n] = lambda *a, **k: Same()\n",
]


@pytest.mark.slow
def test_the_builtin_pyfunc_benchmark_scores_references_only(scorers):
    from importlib.resources import files

    items = [json.loads(line) for line in files("benchlab.evaluate").joinpath("data/pyfunc.jsonl").read_text()
             .splitlines()]
    cases = [(item["tests"], item["reference"]) for item in items]
    cases += [(item["tests"], cheat) for cheat in _GENERIC_CHEATS for item in items]
    scores = score_all(scorers, cases)
    assert [s.correct for s in scores[: len(items)]] == [True] * len(items)
    assert [s.correct for s in scores[len(items):]] == [False] * (len(cases) - len(items))


@pytest.mark.slow
def test_each_test_is_counted_on_its_own(scorers):
    tests = "assert add(1, 1) == 2\nassert add(2, 2) == 5\noffset = 3\nassert add(offset, 0) == 3"
    [score] = score_all(scorers, [(tests, "def add(a, b):\n    return a + b\n")])
    assert (score.correct, score.tests_passed, score.tests_total) == (False, 2, 3)
    assert "test 2: AssertionError" in score.detail


@pytest.mark.slow
def test_setup_that_fails_fails_every_test_after_it(scorers):
    tests = "assert add(1, 1) == 2\nimport no_such_module_anywhere\nassert add(2, 2) == 4"
    [score] = score_all(scorers, [(tests, "def add(a, b):\n    return a + b\n")])
    assert (score.tests_passed, score.tests_total) == (1, 2)


@pytest.mark.slow
def test_a_test_that_cannot_be_split_is_judged_with_the_tests_run_whole(scorers):
    # The turns are the answer's own result, and each calls the answer again: nothing to split, so
    # the tests' program runs whole apart from the answer (live.py), and each test counts on its own.
    tests = "assert add(1, 1) == 2\nassert all(add(x, x) == 2 * x for x in range(add(1, 2)))"
    right, wrong = score_all(scorers, [(tests, "def add(a, b):\n    return a + b\n"),
                                        (tests, "def add(a, b):\n    return a + b if a < 2 else 0\n")])
    assert (right.correct, right.tests_passed, right.tests_total) == (True, 2, 2)
    assert (wrong.correct, wrong.tests_passed, wrong.detail) == (False, 1, "test 2: AssertionError")


def test_the_answers_program_holds_no_expected_value_and_no_secret():
    tests = ("import math\ndef expected(xs):\n    return 987654\nassert add(2, 3) == 918273\n"
             "assert math.isclose(add(0.5, 0.25), 0.123456)\nassert add(1, 2) == expected([1])")
    plan = plan_tests(tests)
    program = _program("def add(a, b):\n    return a + b\n", _answer_steps(plan, _walk(plan, {}, {}, {}).injections))
    for secret in ("918273", "0.123456", "987654", "expected", "isclose", "=="):
        assert secret not in program.rsplit("\n_run(", 1)[1], secret
    assert "add(__bl_" in program


def test_humaneval_checks_are_inlined_one_test_per_check_call():
    tests = ("METADATA = {}\n\ndef check(candidate):\n    assert candidate(1) == 2\n"
             "    assert candidate(2) == 3\n\ncheck(inc)")
    plan = plan_tests(tests)
    assert plan.tests == 1
    assert [p.source for p in plan.probes if p.side == "answer"] == ["inc(__bl_0_0)", "inc(__bl_1_0)"]
    assert count_tests(["assert f(1)", "assert f(2)"]) == 2


def test_a_loop_over_constant_cases_is_unrolled_and_one_over_computed_data_is_refused():
    plan = plan_tests("cases = [(1, 2), (3, 6)]\nfor x, want in cases:\n    assert double(x) == want")
    assert plan.tests == 1
    assert [p.source for p in plan.probes if p.side == "answer"] == ["double(__bl_0_0)", "double(__bl_1_0)"]
    plan = plan_tests("import random\nfor _ in range(2):\n    x = random.randint(1, 9)\n    assert sq(x) == x * x")
    assert [s.why for s in plan.steps if s.kind == "unjudgeable"] == [
        "x is data the tests compute, which cannot be sent to the answer"] * 2


# Expressions over plain values: the glue must agree with Python's own evaluation of the same text.
_GLUE_CASES = [
    "1 == 1.0", "[1, 2] == (1, 2)", "(1, 2) == (1, 2.0)", "{1: 2} == {1: 2.0}", "True == 1", "0.1 + 0.2 == 0.3",
    "abs(0.1 + 0.2 - 0.3) < 1e-9", "math.isclose(0.1 + 0.2, 0.3)", "sorted([3, 1, 2]) == [1, 2, 3]",
    "Counter('abca') == Counter({'a': 2, 'b': 1, 'c': 1})", "Counter('ab') == {'a': 1, 'b': 1}",
    "Fraction(1, 3) == 1 / 3", "Fraction(2, 4) == Fraction(1, 2)", "not [] and not 0", "'abc'.upper() == 'ABC'",
    "len({1, 2, 2}) == 2", "1 < 2 < 3", "1 < 3 < 2", "None is None", "[1, [2, 3]][1][0] == 2", "'b' in 'abc'",
    "float('nan') == float('nan')", "set([1, 2]) == frozenset([2, 1])", "round(2.675, 2) == 2.67",
    "divmod(7, 2) == (3, 1)", "list(zip([1, 2], 'ab')) == [(1, 'a'), (2, 'b')]", "-0.0 == 0", "2 ** 10 == 1024",
    "[x * 2 for x in [1, 2, 3] if x > 1]", "{k: v * 2 for k, v in {1: 2}.items()}", "{x % 2 for x in range(5)}",
    "any(x > 1 for x in [1, 2, 'a'])", "all(x > y for x, y in [(2, 1), (3, 5)])",
    "[(a, b) for a in range(3) for b in range(a)]", "sum(x for x in [0.1, 0.2])",
]


@pytest.mark.parametrize("text", _GLUE_CASES)
def test_the_glue_agrees_with_python(text):
    env = {"math": math, "Counter": Counter, "Fraction": Fraction}
    from benchlab.evaluate.glue import GLUE_BUILTINS

    ours = Glue({**GLUE_BUILTINS, **env}, {}).eval(ast.parse(text, mode="eval").body)
    assert ours == eval(text, env)  # noqa: S307 - the reference: Python itself, on our own constants


def test_the_glue_refuses_to_compute_what_would_hold_the_server():
    glue = Glue({"pow": pow, "list": list, "range": range, "zip": zip, "sum": sum},
                {"__bl_0": 10**12, "__bl_1": "x" * 1000, "__bl_2": Fraction(3, 2)})
    for text in ("2 ** __bl_0", "__bl_1 * __bl_0", "1 << __bl_0", "pow(3, __bl_0)", "list(range(__bl_0))",
                 "sum(range(__bl_0))", "list(zip(range(__bl_0)))", "__bl_2 ** 10 ** 7", "[0] * 10**6 * 10**6",
                 "__bl_1.replace('', 'y' * 100000)", "[(a, b) for a in range(10**4) for b in range(10**4)]"):
        with pytest.raises(GlueError):
            glue.eval(ast.parse(text, mode="eval").body)


def test_a_failed_probe_never_compares_equal():
    glue = Glue({}, {"__bl_0": plain.Failed("returned a Same, not plain data")})
    with pytest.raises(GlueError, match="not plain data"):
        glue.eval(ast.parse("__bl_0 == 5", mode="eval").body)


@pytest.mark.parametrize("data", [
    ["i", "zz"], ["i", 5], ["f", "xyz"], ["l", "notalist"], ["S", [["l", []]]], ["d", [["i", "1"]]],
    ["?", None], [], "x", ["np", ["O", [1], ["l", [["n", None]]]]], ["np", ["<f8", [10**9], ["l", []]]],
    ["Q", ["1", "0"]], ["r", ["0", "1", "0"]], ["D", "1e999999999"], ["s", None],
])
def test_decode_refuses_what_is_not_exactly_a_plain_value(data):
    with pytest.raises(plain.PlainDataError):
        plain.decode(data)


def test_decode_rebuilds_exact_builtins_only():
    values = [1, True, 2.5, "s", b"b", [1, (2, 3)], {1: {2}}, Counter("ab"), Fraction(1, 3), None, frozenset({1})]
    for value in values:
        back = plain.decode(json.loads(json.dumps(plain.encode(value))))
        assert back == value and type(back) is type(value)
    # A subclass crosses as its base only for tuples (a namedtuple); others are not plain data.
    subclass = type("S", (int,), {"__eq__": lambda s, o: True, "__hash__": int.__hash__})
    assert isinstance(plain.decode(plain.encode(subclass(3))), plain.Failed)
