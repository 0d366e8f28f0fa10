"""A code answer scores only when every test ran to its end and passed.

The hostile answers try to pass without solving: they end the process early
in every way Python offers, print a fake verdict, hunt for the harness's
secret, patch what the tests check with, or return an object equal to
everything. Each must score 0 through the real scorer and sandbox; the correct
answers must score 1. The same programs go through lm-evaluation-harness's own
code checker (``check_correctness``, the HumanEval execution check it ships),
and the table of both verdicts is asserted row by row: where lm-eval is fooled,
the row says so.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys

import pytest

from benchlab.evaluate.harness import (
    MARKER,
    HarnessReport,
    Unit,
    build_program,
    read_report,
    split_tests,
)
from benchlab.evaluate.mathpool import MathVerifyPool
from benchlab.evaluate.sandbox import Sandbox, SandboxLimits
from benchlab.evaluate.scorers import Scorers

ADD_TESTS = "assert add(2, 3) == 5\nassert add(-1, 3) == 2"
MEAN_TESTS = "import math\nassert abs(mean([1, 2]) - 1.5) < 1e-9\nassert math.isclose(mean([4]), 4.0)"

LIMITS = SandboxLimits(timeout_secs=4, cpu_secs=3, memory_mb=512)

# name -> (tests, answer, lm-eval's verdict as its checker gives it: True when it is fooled)
HOSTILE: dict[str, tuple[str, str, bool]] = {
    "sys.exit(0)": (ADD_TESTS, "import sys\nsys.exit(0)\n", False),
    "os._exit(0)": (ADD_TESTS, "import os\nos._exit(0)\n", False),
    "raise SystemExit": (ADD_TESTS, "raise SystemExit(0)\n", False),
    "exit() from site": (ADD_TESTS, "exit()\n", False),
    "atexit calls os._exit(0)": (
        ADD_TESTS, "import atexit, os\natexit.register(lambda: os._exit(0))\ndef add(a, b):\n    return 0\n", False),
    "sys.excepthook exits 0": (
        ADD_TESTS, "import sys, os\nsys.excepthook = lambda *a: os._exit(0)\ndef add(a, b):\n    return 0\n", False),
    "__del__ exits 0 at shutdown": (
        ADD_TESTS,
        "class Bye:\n    def __del__(self):\n        import os\n        os._exit(0)\n"
        "keep = Bye()\ndef add(a, b):\n    return 0\n", False),
    "exit from inside the function": (ADD_TESTS, "def add(a, b):\n    import os\n    os._exit(0)\n", False),
    "prints a fake verdict": (
        ADD_TESTS,
        f"print('{MARKER} ' + '0' * 32 + ' 11')\nprint('passed')\nimport os\nos._exit(0)\n", False),
    "kills its parent": (
        ADD_TESTS, "import os, signal\nos.kill(os.getppid(), signal.SIGKILL)\ndef add(a, b):\n    return 0\n",
        False),
    "exits from a thread": (
        ADD_TESTS,
        "import os, threading, time\nthreading.Thread(target=lambda: os._exit(0)).start()\ntime.sleep(2)\n",
        False),
    "exits from a child, parent follows": (
        ADD_TESTS,
        "import os\npid = os.fork()\nif pid:\n    os.waitpid(pid, 0)\n    os._exit(0)\n"
        "def add(a, b):\n    return 0\n", False),
    "infinite output": (ADD_TESTS, "while True:\n    print('x' * 1000)\n", False),
    "signal.alarm handler exits 0": (
        ADD_TESTS,
        "import os, signal\nsignal.signal(signal.SIGALRM, lambda *a: os._exit(0))\nsignal.alarm(1)\n"
        "def add(a, b):\n    import time\n    time.sleep(5)\n    return 0\n", False),
    "reads the program's files for the secret": (
        ADD_TESTS,
        "import os\nfor name in os.listdir('.'):\n    try:\n        print(open(name).read())\n"
        "    except Exception:\n        pass\nos._exit(0)\n", False),
    "walks the frames for the secret": (
        ADD_TESTS,
        "import sys, os\ndef add(a, b):\n    f = sys._getframe(1)\n    while f is not None:\n"
        "        for v in list(f.f_locals.values()) + list(f.f_code.co_consts):\n"
        "            if isinstance(v, str) and 'BENCHLAB' in v:\n                print(v.replace('\\n', ''))\n"
        "        f = f.f_back\n    os._exit(0)\n", False),
    "scans gc objects for the secret": (
        ADD_TESTS,
        "import gc, os\nfor o in gc.get_objects():\n    if isinstance(o, dict):\n        pass\n"
        "def add(a, b):\n    return 0\nos._exit(0)\n", False),
    "reads its own memory": (
        ADD_TESTS, "import os\ndata = open('/proc/self/maps').read()\ndef add(a, b):\n    return 0\n", False),
    "loads ctypes": (ADD_TESTS, "import ctypes\ndef add(a, b):\n    return 0\n", False),
    "sys.settrace rewrites the test": (
        ADD_TESTS, "import sys\nsys.settrace(lambda *a: None)\ndef add(a, b):\n    return 0\n", False),
    "returns an object equal to everything": (
        ADD_TESTS,
        "class Same:\n    def __eq__(self, other):\n        return True\ndef add(a, b):\n    return Same()\n", True),
    "int subclass equal to everything": (
        ADD_TESTS,
        "class Same(int):\n    def __eq__(self, other):\n        return True\n    __hash__ = int.__hash__\n"
        "def add(a, b):\n    return Same(0)\n", True),
    "patches builtins.abs": (
        MEAN_TESTS, "import builtins, math\nbuiltins.abs = lambda x: 0\nmath.isclose = lambda *a, **k: True\n"
        "def mean(xs):\n    return 0\n", True),
    "patches math.isclose while called": (
        "import math\nm = mean([1, 2])\nassert math.isclose(m, 1.5)",
        "def mean(xs):\n    import math\n    math.isclose = lambda *a, **k: True\n    return 0\n", True),
    "rewrites the tests' names through a function they pass it": (
        "def expected(xs):\n    return sum(xs)\nassert apply(lambda x: x, [1, 2]) == expected([1, 2])",
        "def apply(f, xs):\n    f.__globals__['expected'] = lambda xs: 0\n    return 0\n", True),
    "shadows abs with its own": (
        "assert abs(mean([1, 2]) - 1.5) < 1e-9", "def abs(x):\n    return 0\ndef mean(xs):\n    return 0\n", True),
}

CORRECT: dict[str, tuple[str, str]] = {
    "plain": (ADD_TESTS, "def add(a, b):\n    return a + b\n"),
    "prints a lot and has a main block": (
        ADD_TESTS,
        "def add(a, b):\n    print('adding' * 20000)\n    return a + b\n"
        "if __name__ == '__main__':\n    print(add(1, 2))\n"),
    "namedtuple, dataclass and TypeVar": (
        ADD_TESTS,
        "from collections import namedtuple\nfrom dataclasses import dataclass\nfrom typing import TypeVar\n"
        "T = TypeVar('T')\nPair = namedtuple('Pair', 'a b')\n@dataclass\nclass Box:\n    v: int\n"
        "def add(a, b):\n    p = Pair(a, b)\n    return Box(p.a).v + p.b\n"),
    "recursive": (
        ADD_TESTS,
        "def add(a, b):\n    step = 1 if b > 0 else -1\n    return a if b == 0 else add(a + step, b - step)\n"),
    "catches its own exceptions": (
        ADD_TESTS,
        "def add(a, b):\n    try:\n        raise ValueError('x')\n    except ValueError:\n        return a + b\n"),
    "statistics mean": (MEAN_TESTS, "import statistics\ndef mean(xs):\n    return statistics.mean(xs)\n"),
    "float mean through a private function": (
        MEAN_TESTS, "def _total(xs):\n    return sum(xs)\ndef mean(xs):\n    return _total(xs) / len(xs)\n"),
    "returns a namedtuple compared to a tuple": (
        "assert split(7) == (3, 1)\nassert split(9)[0] == 4",
        "from collections import namedtuple\nR = namedtuple('R', 'q r')\ndef split(n):\n    return R(*divmod(n, 2))\n"),
}


@pytest.fixture
def scorers():
    # A sandbox per test: its slots belong to the event loop of the test's asyncio.run.
    pool = MathVerifyPool(workers=1)
    yield Scorers(pool, Sandbox(LIMITS, concurrency=2))
    pool.close()


def _score_all(scorers, cases):
    async def run():
        return await asyncio.gather(*(
            scorers.score("code", {"tests": tests}, f"```python\n{answer}```") for tests, answer in cases
        ))
    return asyncio.run(run())


_LM_EVAL_CHECK = """
import json, sys
from lm_eval.tasks.cruxeval.utils import check_correctness
cases = json.load(sys.stdin)
print(json.dumps([check_correctness(answer + "\\n" + tests, timeout=3) for tests, answer in cases]))
"""


def _lm_eval_verdicts(cases) -> list[bool]:
    """lm-eval's checker on each program, in a process of its own (it forks, which a threaded pytest must not)."""
    pytest.importorskip("lm_eval.tasks.cruxeval.utils")
    done = subprocess.run([sys.executable, "-c", _LM_EVAL_CHECK], input=json.dumps(cases), capture_output=True,
                          text=True, timeout=600, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.slow
def test_hostile_answers_score_zero_and_correct_ones_score_one(scorers):
    hostile = [(t, a) for t, a, _ in HOSTILE.values()]
    correct = list(CORRECT.values())
    scores = _score_all(scorers, hostile + correct)
    ours_hostile, ours_correct = scores[: len(hostile)], scores[len(hostile):]
    wrongly_passed = [n for n, s in zip(HOSTILE, ours_hostile, strict=True) if s.correct]
    assert wrongly_passed == []
    assert all(s.tests_passed == 0 for s in ours_hostile), [s.detail for s in ours_hostile]
    failed = {n: s.detail for n, s in zip(CORRECT, ours_correct, strict=True) if not s.correct}
    assert failed == {}
    assert all(s.tests_passed == s.tests_total >= 1 for s in ours_correct)


@pytest.mark.slow
def test_lm_eval_code_checker_agrees_except_where_it_is_fooled(scorers):
    """Row by row: our verdict, lm-eval's, and lm-eval's expected verdict stated by hand above."""
    names = list(HOSTILE) + list(CORRECT)
    cases = [(t, a) for t, a, _ in HOSTILE.values()] + list(CORRECT.values())
    expected_lm = [fooled for _, _, fooled in HOSTILE.values()] + [True] * len(CORRECT)
    ours = [s.correct for s in _score_all(scorers, cases)]
    theirs = _lm_eval_verdicts(cases)
    table = [f"{n:45s} benchlab={int(o)} lm-eval={int(t)}" for n, o, t in zip(names, ours, theirs, strict=True)]
    print("\n".join(table))
    assert theirs == expected_lm, "\n".join(table)
    agree = sum(o == t for o, t in zip(ours, theirs, strict=True))
    assert agree == len(cases) - sum(fooled for _, _, fooled in HOSTILE.values())


@pytest.mark.slow
def test_each_test_is_counted_on_its_own(scorers):
    tests = "assert add(1, 1) == 2\nassert add(2, 2) == 5\noffset = 3\nassert add(offset, 0) == 3"
    [score] = _score_all(scorers, [(tests, "def add(a, b):\n    return a + b\n")])
    assert (score.correct, score.tests_passed, score.tests_total) == (False, 2, 3)
    assert "test 2: AssertionError" in score.detail


@pytest.mark.slow
def test_setup_that_fails_fails_every_test_after_it(scorers):
    tests = "assert add(1, 1) == 2\nimport no_such_module_anywhere\nassert add(2, 2) == 4"
    [score] = _score_all(scorers, [(tests, "def add(a, b):\n    return a + b\n")])
    assert (score.tests_passed, score.tests_total) == (1, 2)


def test_humaneval_style_tests_are_one_test_per_check_call():
    tests = ("METADATA = {}\n\ndef check(candidate):\n    assert candidate(1) == 2\n"
             "    assert candidate(2) == 3\n\ncheck(inc)")
    units = split_tests(tests)
    assert [u.is_test for u in units] == [False, False, True]
    assert units[2].source == "check(inc)"
    assert split_tests(["assert f(1)", "assert f(2)"]) == (Unit("assert f(1)", True), Unit("assert f(2)", True))


def test_a_verdict_counts_only_with_this_samples_nonce_and_length():
    nonce = "ab" * 16
    other = "cd" * 16
    out = f"noise\n{MARKER} {other} 11\n{MARKER} {nonce} 10\n"
    assert read_report(out, nonce, 2) == HarnessReport((True, False))
    assert read_report(out, nonce, 3) is None
    assert read_report(f"{MARKER} {nonce} 11 trailing\n", nonce, 2) is None
    assert read_report(out, "ef" * 16, 2) is None


def test_the_program_does_not_hold_the_nonce_where_the_answer_reads_its_source():
    nonce = "0123456789abcdef" * 2
    program = build_program("x = 1", split_tests("assert x == 1"), nonce)
    # The nonce is in the harness's code (the file is deleted before the answer runs) and nowhere else.
    assert program.count(nonce) == 2
    with pytest.raises(ValueError):
        build_program("x = 1", (), "not-hex")
