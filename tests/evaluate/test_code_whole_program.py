"""Tests the split cannot take apart are judged with the tests' program run whole, apart from the answer.

The tests' program runs in a sandbox without a line of the answer; each call into the
answer crosses, through the server, to the answer's sandbox and back as plain data
(``live.py``). Whatever shape the tests take (``shape_corpus.SHAPES``), a correct answer
scores 1 and a wrong one 0; the answer's sandbox sees only the calls' arguments; a value
that is not plain data is never compared; what the answer returns as code never runs
in the tests' sandbox.
"""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path

import pytest
from code_suites import HONEST, HOSTILE, WRONG
from shape_corpus import SHAPES

from benchlab.evaluate import live
from benchlab.evaluate.harness import judge
from benchlab.evaluate.sandbox import Sandbox, SandboxLimits
from benchlab.evaluate.testplan import plan_tests

LIMITS = SandboxLimits(timeout_secs=8, cpu_secs=6, memory_mb=512)
HUMANEVAL = [json.loads(line) for line in
             (Path(__file__).parent / "data" / "humaneval_sample.jsonl").read_text().splitlines()]


def _judge_all(cases, limits=LIMITS):
    async def run():
        sandbox = Sandbox(limits, concurrency=2)
        return await asyncio.gather(*(judge(sandbox, answer, tests) for tests, answer in cases))
    return asyncio.run(run())


@pytest.mark.slow
def test_every_test_shape_scores_a_correct_answer_1_and_a_wrong_one_0():
    cases = [(tests, answer) for tests, right, wrong in SHAPES.values() for answer in (right, wrong)]
    reports = _judge_all(cases)
    right = {name: reports[2 * i].why for i, name in enumerate(SHAPES) if not reports[2 * i].all_passed}
    wrong = [name for i, name in enumerate(SHAPES) if reports[2 * i + 1].all_passed]
    assert right == {}
    assert wrong == []


def test_the_whole_program_counts_the_tests_the_split_counts():
    suites = [t for t, _, _ in SHAPES.values()] + [t for t, _, _ in HOSTILE.values()]
    suites += [t for t, _ in HONEST.values()] + [t for t, _ in WRONG.values()]
    suites += [p["test"] + f"\n\ncheck({p['entry_point']})\n" for p in HUMANEVAL]
    suites += ["x = 1\nif x:\n    pass\n", "assert f(1)\nimport math\nassert g(2)\n", ["assert f(1)", "x = f(2)"]]
    for tests in suites:
        count = plan_tests(tests).tests
        plan = live.layout(tests, count)
        assert plan.why == "", tests
        assert {m for _, marks in plan.units for m in marks if m is not None} == set(range(count)), tests


@pytest.mark.slow
def test_the_answers_sandbox_never_holds_the_expected_value():
    # The comparison needs a helper of several statements: the tests run whole. The answer hunts
    # every object of its process for the expected value, and would return it if it found it.
    # The value has sixteen digits: a five-digit one turns up by chance among the thousands of
    # addresses and numbers the objects' reprs print (a false "found" about once in twenty runs).
    x, want = 2718281828459045, 3 * 2718281828459045 + 1
    helper = "def agrees(f, want, *shown):\n    got = f({x}, *shown)\n    return got == want\n\n"
    tests = (helper.format(x=x) + f"expected = {want}\nassert agrees(hunt, expected)\nassert agrees(hunt, {want})\n")
    # (No constant of the value in the answer, folded or not: its own code's would be found.)
    answer = ("import gc, sys\ndef hunt(x, *shown):\n    seen = [repr(o) for o in gc.get_objects()]\n"
              "    seen += [repr(sys._getframe(i).f_locals) for i in range(2)]\n"
              "    needle = str(3 * x + 1)\n"
              "    return int(needle) if any(needle in s for s in seen) else x\n")
    # The control: the same hunt, where the tests do hand the value over, finds it.
    shown = helper.format(x=x) + f"assert agrees(hunt, {want}, {want})\n"
    report, control = _judge_all([(tests, answer), (shown, answer)])
    assert report.passed == (False, False)
    assert "AssertionError" in report.why
    assert control.passed == (True,), control.why


@pytest.mark.slow
def test_eval_of_the_answers_output_runs_in_the_answers_sandbox_not_the_tests():
    tests = "def check(f):\n    out = f()\n    where = eval(out)\n    assert where == 'answer', where\n\ncheck(name)\n"
    answer = "WHERE = 'answer'\ndef name():\n    return 'WHERE'\n"
    # The same name bound in the tests' program: an eval there would see it.
    tests_with_own = "WHERE = 'tests'\n" + tests
    reports = _judge_all([(tests, answer), (tests_with_own, answer)])
    assert [r.all_passed for r in reports] == [True, True]


@pytest.mark.slow
def test_exec_of_a_string_the_tests_did_not_write_fails_its_test_with_the_reason():
    tests = "for code in [make_code()]:\n    exec(code)\n    assert ok\n"
    answer = "def make_code():\n    return 'ok = True'\n"
    [report] = _judge_all([(tests, answer)])
    assert not report.all_passed
    assert "runs code built at run time" in report.why


@pytest.mark.slow
def test_a_call_that_never_returns_costs_its_sample_within_the_time_limit():
    limits = SandboxLimits(timeout_secs=3, cpu_secs=3, memory_mb=256)
    tests = "got = []\nfor x in spin(1):\n    got.append(x)\nassert got == [1]\n"
    start = time.monotonic()
    [report] = _judge_all([(tests, "def spin(n):\n    while True:\n        pass\n")], limits)
    assert not report.all_passed
    assert time.monotonic() - start < 3 + 15


@pytest.mark.slow
def test_a_reply_over_the_size_cap_is_refused_and_fails_the_test():
    tests = "def agrees(f):\n    got = f()\n    return got == 'ok'\n\nassert agrees(big)\nassert 1 + 1 == 2\n"
    [report] = _judge_all([(tests, "def big():\n    return 'x' * 30_000_000\n")])
    assert report.passed == (False, True)
    assert "size cap" in report.why


@pytest.mark.slow
def test_an_answer_object_is_used_through_its_methods_but_never_compared():
    tests = ("s = Counter2()\nfor _ in range(3):\n    s.tick()\nassert s.value() == 3\n"
             "assert s == s\n")
    answer = ("class Counter2:\n    def __init__(self):\n        self.n = 0\n    def tick(self):\n"
              "        self.n += 1\n    def value(self):\n        return self.n\n    def __eq__(self, o):\n"
              "        return True\n")
    [report] = _judge_all([(tests, answer)])
    assert report.passed == (True, False)
    assert "compares the answer's value" in report.why


@pytest.mark.slow
def test_arguments_the_answer_changes_in_place_are_changed_in_the_tests():
    tests = ("grid = [[3, 1], [2, 0]]\nfor row in grid:\n    sort_row(row)\nassert grid == [[1, 3], [0, 2]]\n"
             "seen = {}\nremember(seen, 'a')\nassert seen == {'a': 1}\n")
    answer = ("def sort_row(row):\n    row.sort()\n    assert row is not None\n"
              "def remember(d, k):\n    d[k] = d.get(k, 0) + 1\n")
    [report] = _judge_all([(tests, answer)])
    assert report.all_passed, report.why


@pytest.mark.slow
def test_a_live_program_pair_talks_only_through_the_caller_one_capped_line_at_a_time():
    echo = "import os\nr = os.fdopen(3, 'rb')\nwhile True:\n    line = r.readline()\n    if not line:\n" \
           "        break\n    os.write(4, b'got ' + line)\n"
    flood = "import os\nos.write(4, b'x' * (3 << 20))\n"

    async def run():
        sandbox = Sandbox(SandboxLimits(timeout_secs=5, output_cap=65536), concurrency=1)
        async with sandbox.pair(echo, flood) as (a, b):
            a.send(b"hello")
            first = await a.receive(4)
            over = await b.receive(4)
        return first, over, await a.result()

    first, over, ended = asyncio.run(run())
    assert first == b"got hello\n"
    assert over is None  # a line over the cap (1 MiB at least) is refused, not read
    assert ended.exit_code == 0 and not ended.timed_out
