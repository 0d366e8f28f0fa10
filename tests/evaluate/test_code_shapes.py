"""Test shapes a text-only split cannot take apart, judged with the tests' own data computed first.

Real HumanEval problems (``data/humaneval_sample.jsonl``, MIT, see ``data/README.md``) and
small synthetic tests of each shape: data the tests compute (seeded and unseeded random),
loops and comprehensions over it, a helper handed the answer's function, an argument the
answer changes in place. A correct answer scores 1, a wrong one 0, and the answer's
program still holds no expected value and no comparison.
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest
from code_scoring import code_scorers, score_all

from benchlab.evaluate import testdata
from benchlab.evaluate.harness import _answer_steps, _program, _walk
from benchlab.evaluate.sandbox import SandboxLimits
from benchlab.evaluate.testplan import plan_tests

LIMITS = SandboxLimits(timeout_secs=10, cpu_secs=8, memory_mb=512)
HUMANEVAL = [json.loads(line) for line in
             (Path(__file__).parent / "data" / "humaneval_sample.jsonl").read_text().splitlines()]


@pytest.fixture
def scorers():
    with code_scorers(LIMITS) as scorers:
        yield scorers


def _tests(problem: dict) -> str:
    return problem["test"] + f"\n\ncheck({problem['entry_point']})\n"


def test_humaneval_canonical_solutions_score_1_and_wrong_ones_0(scorers):
    right = [(_tests(p), p["prompt"] + p["canonical_solution"]) for p in HUMANEVAL]
    none = [(_tests(p), p["prompt"] + "    return None\n") for p in HUMANEVAL]
    by_id = {p["task_id"]: p for p in HUMANEVAL}
    nearly = [  # right on the cases written out, wrong on the data the tests draw
        (_tests(by_id["HumanEval/53"]), "def add(x, y):\n    return x + y if x + y < 20 else 0\n"),
        (_tests(by_id["HumanEval/32"]), "def find_zero(xs):\n    return 0.0\n"),
        (_tests(by_id["HumanEval/38"]), by_id["HumanEval/38"]["prompt"] + "    return s\n"),
    ]
    scores = score_all(scorers, right + none + nearly)
    assert [(p["task_id"], s.correct, s.detail) for p, s in zip(HUMANEVAL, scores, strict=False)] == [
        (p["task_id"], True, "") for p in HUMANEVAL]
    assert [s.correct for s in scores[len(right):]] == [False] * (len(none) + len(nearly))
    assert scores[-3].detail == "test 1: AssertionError"


_ADD = "def add(a, b):\n    return a + b\n"
_ADD_WRONG_ON_7 = "def add(a, b):\n    return a + b if a != 7 else 0\n"


@pytest.mark.parametrize(("tests", "right", "wrong"), [
    # a comprehension over constant cases, its comparison per element on the trusted side
    ("cases = [(1, 2), (7, 3)]\nassert all(add(a, b) == a + b for a, b in cases)", _ADD, _ADD_WRONG_ON_7),
    ("assert [add(a, 1) for a in range(9) if a % 7 == 0] == [1, 8]", _ADD, _ADD_WRONG_ON_7),
    # data the tests compute: seeded, unseeded, in a loop, in a comprehension over it
    ("import random\nrng = random.Random(7)\nfor _ in range(30):\n    a, b = rng.randint(0, 9), rng.randint(0, 9)\n"
     "    assert add(a, b) == a + b", _ADD, _ADD_WRONG_ON_7),
    ("import random\nxs = list(range(10))\nrandom.shuffle(xs)\nassert all(add(x, 0) == x for x in xs)",
     _ADD, _ADD_WRONG_ON_7),
    ("def check(candidate):\n    n = 0\n    while n < 9:\n        n += 1\n        if n % 2:\n"
     "            assert candidate(n, n) == 2 * n\n\ncheck(add)", _ADD, _ADD_WRONG_ON_7),
    # a helper handed the answer's function
    ("def agrees(fn, a):\n    return fn(a, a) == 2 * a\nassert agrees(add, 7)", _ADD, _ADD_WRONG_ON_7),
    ("def check_all(fn):\n    for a in [1, 7]:\n        assert fn(a, 0) == a\ncheck_all(add)", _ADD, _ADD_WRONG_ON_7),
    # an argument the answer changes in place, read afterwards
    ("xs = [3, 1, 2]\nsort_in_place(xs)\nassert xs == [1, 2, 3]",
     "def sort_in_place(xs):\n    xs.sort()\n", "def sort_in_place(xs):\n    return sorted(xs)\n"),
    ("xs = [3, 1, 2]\nassert sort_in_place(xs) == xs == [1, 2, 3]",  # read after the call, in one statement
     "def sort_in_place(xs):\n    xs.sort()\n    return xs\n", "def sort_in_place(xs):\n    return sorted(xs)\n"),
    ("xs = [1]\npush(xs, 2)\npush(xs, 3)\nassert xs == [1, 2, 3]",
     "def push(xs, x):\n    xs.append(x)\n", "def push(xs, x):\n    xs[:] = [1, x]\n"),
    # a comprehension over the answer's own result, its body glue alone: evaluated here, over the data
    ("assert all(x > 0 for x in squares(3)) and {x for x in squares(3)} == {1, 4, 9}",
     "def squares(n):\n    return [i * i for i in range(1, n + 1)]\n", "def squares(n):\n    return [1, 4, -9]\n"),
    # any() stops where Python's would: an element past a true one does not count
    ("assert any(first(x) == 1 for x in [1, 2])",
     "def first(x):\n    if x > 1:\n        raise ValueError\n    return x\n", "def first(x):\n    return 5\n"),
])
def test_each_shape_scores_a_right_answer_1_and_a_wrong_one_0(scorers, tests, right, wrong):
    right_score, wrong_score = score_all(scorers, [(tests, right), (tests, wrong)])
    assert (right_score.correct, right_score.detail) == (True, "")
    assert not wrong_score.correct


def test_tests_data_that_is_not_plain_data_is_judged_with_the_tests_run_whole(scorers):
    # The split cannot write the tests' Box as a literal; the tests' program, run whole apart from
    # the answer, hands the answer box.v (plain data) and compares itself.
    tests = ("class Box:\n    def __init__(self, v):\n        self.v = v\nbox = Box(3)\n"
             "assert add(box.v, 1) == 4\nassert add(1, 1) == 2")
    right, wrong = score_all(scorers, [(tests, _ADD), (tests, "def add(a, b):\n    return a * b\n")])
    assert (right.correct, right.tests_passed, right.tests_total) == (True, 2, 2)
    assert (wrong.correct, wrong.tests_passed) == (False, 0)


def test_a_hostile_answer_gains_nothing_from_the_tests_data(scorers):
    tests = ("import random\nrng = random.Random(3)\nfor _ in range(5):\n    a = rng.randint(0, 99)\n"
             "    assert all(add(a, b) == a + b for b in range(3))")
    always_equal = ("class Same(int):\n    def __eq__(self, other):\n        return True\n"
                    "def add(a, b):\n    return Same(0)\n")
    remember = ("import gc\ndef add(a, b):\n    for o in gc.get_objects():\n"
                "        if type(o) is int and o > 1000:\n            return o\n    return -1\n")
    scores = score_all(scorers, [(tests, always_equal), (tests, remember)])
    assert [s.correct for s in scores] == [False, False]


def _recorded_plan(tests: str):
    """The plan after the pre-pass, its recorder run as a plain subprocess (the tests' code only)."""
    plan = plan_tests(tests)
    expanded = testdata.expand(tests)
    done = subprocess.run([sys.executable, "-c", testdata.program(expanded)], capture_output=True, text=True,
                          timeout=60, check=True)
    replacements, notes = testdata.rewrite(expanded, testdata.read(done.stdout, ""), set(plan.unsplit))
    return plan_tests(tests, replacements, notes)


def test_the_answers_program_holds_the_tests_data_as_arguments_and_no_expected_value():
    problem = next(p for p in HUMANEVAL if p["task_id"] == "HumanEval/53")
    tests = _tests(problem) + "\nassert add(1, 2) == 918273\n"
    plan = _recorded_plan(tests)
    assert not plan.unsplit
    answer_calls = [p.source for p in plan.probes if p.side == "answer"]
    assert len(answer_calls) == 5 + 100 + 1
    program = _program(_ADD, _answer_steps(plan, _walk(plan, {}, {}, {}).injections))
    probes = program.rsplit("\n_run(", 1)[1]
    assert "918273" not in probes and "==" not in probes and "x + y" not in probes


def test_the_pre_pass_runs_only_the_tests_own_code_and_records_the_rest():
    tests = ("import random\nrng = random.Random(42)\ncoeffs = [rng.randint(1, 9) for _ in range(3)]\n"
             "assert check(coeffs, solve(coeffs))")
    expanded = testdata.expand(tests)
    program = testdata.program(expanded)
    done = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, timeout=60, check=True)
    recording = testdata.read(done.stdout, "")
    expected = __import__("random").Random(42)
    coeffs = [expected.randint(1, 9) for _ in range(3)]
    [(number, values)] = recording.events[3]
    assert number == 3 and list(values) == ["coeffs"]
    replacements, _ = testdata.rewrite(expanded, recording, {(0, 3)})
    assert [ast.unparse(s) for s in replacements[(0, 3)].statements] == [
        f"coeffs = {coeffs!r}", "assert check(coeffs, solve(coeffs))"]


def test_a_loop_unrolled_over_an_argument_holds_only_while_the_answer_leaves_it_alone(scorers):
    tests = "xs = [3, 1, 2]\nlook(xs)\nfor x in xs:\n    assert x > 0"
    reads, appends = score_all(scorers, [(tests, "def look(xs):\n    return len(xs)\n"),
                                          (tests, "def look(xs):\n    xs.append(-1)\n")])
    assert (reads.correct, reads.detail) == (True, "")
    # The split refuses its unrolled loop ("the answer changed xs in place"); the tests' program,
    # run whole, then sees the -1 the answer appended.
    assert not appends.correct and "AssertionError" in appends.detail
