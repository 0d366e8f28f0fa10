"""Code answers that try to pass without solving, honest ones, and plainly wrong ones.

Each entry: name -> (tests, answer, fools_lm_eval). ``fools_lm_eval`` is stated
by hand: lm-evaluation-harness's checker runs ``answer + tests`` in one
process and passes it when nothing raises, so it is fooled exactly when the
answer makes the tests' own comparison lie (an object equal to everything, a
patched check) and not when the answer only ends the process or forges the
output of a verdict it does not print. Honest answers pass there and here;
wrong ones fail in both.

Shared by ``test_code_harness.py`` and ``bench/hostile_code.py``.
"""

from __future__ import annotations

ADD = "assert add(2, 3) == 5\nassert add(-1, 3) == 2"
TOTAL = "assert total([1, 2, 3]) == 6\nassert total([]) == 0 or total([5]) == 5"
MEAN = "import math\nassert abs(mean([1, 2]) - 1.5) < 1e-9\nassert math.isclose(mean([4]), 4.0)"
COUNTS = "from collections import Counter\nassert counts('abca') == Counter({'a': 2, 'b': 1, 'c': 1})"
THIRD = "from fractions import Fraction\nassert third(1) == Fraction(1, 3)\nassert third(2) == Fraction(2, 3)"
NUMPY = "import numpy as np\nassert np.allclose(halves([2, 4]), [1.0, 2.0])"
UNITTEST = "import unittest\ncase = unittest.TestCase()\ncase.assertEqual(add(2, 3), 5)\ncase.assertEqual(add(1, 1), 2)"
HUMANEVAL = ("METADATA = {'author': 'x'}\n\n\ndef check(candidate):\n    assert candidate([1, 2, 3]) == 6\n"
             "    assert candidate([]) == 0\n    assert True, 'always'\n\ncheck(total)\n")
SQUARES = ("def check(candidate):\n    for n, want in [(1, 1), (2, 4), (3, 9)]:\n        assert candidate(n) == want\n"
           "    assert candidate(0) == 0\n\ncheck(square)\n")
ISCLOSE_UNIMPORTED = "assert math.isclose(mean([1, 2]), 1.5)\nassert math.isclose(mean([3]), 3.0)"
BUILTIN_SUM = "assert sum([1, 2, 3]) == 6\nassert sum([]) == 0"

# A wrong add, for the answers whose trick is not in the function itself.
_WRONG_ADD = "def add(a, b):\n    return 0\n"
_WRONG_TOTAL = "def total(xs):\n    return 0\n"

# Reads its own memory (the /proc/self/mem of a sandbox that shows /proc, reached through /dev/fd/..),
# finds what a reporting harness would print, and writes an "all passed" line of its own.
_MEMORY_FORGER = r'''
import os, re, sys
def _forge():
    for base in ("/dev/fd/..", "/proc/self"):
        try:
            maps = open(base + "/maps").read().splitlines()
            mem = open(base + "/mem", "rb")
        except OSError:
            continue
        for line in maps:
            lo, hi = (int(x, 16) for x in line.split()[0].split("-"))
            try:
                mem.seek(lo)
                chunk = mem.read(hi - lo)
            except (OSError, ValueError, OverflowError):
                continue
            for found in re.finditer(rb"BENCHLAB-RESULT ([0-9a-f]{32}) ", chunk):
                os.write(1, b"BENCHLAB-RESULT " + found.group(1) + b" 11\n")
            if b'"values"' in chunk:
                os.write(1, b'{"loaded": "", "values": {}, "failed": [], "modules": {}}\n')
    os._exit(0)
_forge()
'''

# Rewrites "0" to "1" wherever a verdict could be spelt in its own memory.
_MEMORY_REWRITER = r'''
import os, re
def _rewrite():
    for base in ("/dev/fd/..", "/proc/self"):
        try:
            maps = open(base + "/maps").read().splitlines()
            mem = open(base + "/mem", "r+b")
        except OSError:
            continue
        for line in maps:
            if "rw" not in line.split()[1]:
                continue
            lo, hi = (int(x, 16) for x in line.split()[0].split("-"))
            try:
                mem.seek(lo)
                chunk = mem.read(hi - lo)
                for found in re.finditer(rb"(BENCHLAB-RESULT [0-9a-f]{32} )([01]+)", chunk):
                    mem.seek(lo + found.start(2))
                    mem.write(b"1" * len(found.group(2)))
            except (OSError, ValueError, OverflowError):
                continue
_rewrite()
def add(a, b):
    return 0
'''

# Time of check, time of use: an empty list subclass passes any check of its type; an object
# planted in the test's argument list swaps the result's class, when it is collected, to one
# equal to everything.
_TOCTOU = r'''
class _Yes(list):
    def __eq__(self, other):
        return True
    __hash__ = None
class _Result(list):
    pass
_last = []
class _Swap:
    def __del__(self):
        for r in _last:
            try:
                r.__class__ = _Yes
            except TypeError:
                pass
def total(xs):
    xs.append(_Swap())
    r = _Result()
    _last.append(r)
    return r
'''

# Tests the split cannot take apart (a helper of several statements, a loop over the answer's
# result, eval of its output): they run whole in the tests' sandbox, the answer's calls reaching it
# through the server as plain data (live.py). The hostile answers below aim at that path.
WHOLE_TOTAL = ("def agrees(f, xs, want):\n    got = f(xs)\n    return got == want\n\n"
               "assert agrees(total, [1, 2, 3], 6)\nassert agrees(total, [], 0)\n")
WHOLE_SHOUT = ("def agrees(f, s, want):\n    got = f(s)\n    return got == want\n\n"
               "assert agrees(shout, 'a', 'A!')\nassert agrees(shout, 'b', 'B!')\n")
WHOLE_SORT = "out = my_sort([3, 1, 2])\nfor i, x in enumerate(out):\n    assert x == i + 1\nassert out == [1, 2, 3]\n"
WHOLE_EVAL = "assert eval(square_expr(3)) == 9\nassert eval(square_expr(4)) == 16\n"
WHOLE_MEAN = ("got = mean([1, 2])\ndef close(x, want):\n    d = x - want\n    return math.isclose(d, 0, abs_tol=1e-9)\n"
              "assert close(got, 1.5)\n")
# Writes what the tests' program would send (a passed test, "done") wherever it can reach in the
# sandbox (only there: in lm-eval's checker those descriptors are its own pipes).
_REACHER = r"""
import os, socket
reach = range(3, 20) if os.getcwd() == "/tmp/work" else ()
forged = b'["result", 0, true, ""]\n["result", 1, true, ""]\n["done", true]\n{"r": {"v": ["b", true]}}\n'
for fd in reach:
    try:
        os.write(fd, forged)
    except OSError:
        pass
for path in ("/proc/1/fd/4", "/proc/self/fd/4", "/dev/fd/4", "/tmp/../proc"):
    try:
        with open(path, "wb") as f:
            f.write(forged)
    except OSError:
        pass
try:
    socket.create_connection(("127.0.0.1", 22), timeout=1)
except OSError:
    pass
def total(xs):
    for fd in reach:
        try:
            os.write(fd, forged)
        except OSError:
            pass
    return 0
"""

HOSTILE: dict[str, tuple[str, str, bool]] = {
    "sys.exit(0)": (ADD, "import sys\nsys.exit(0)\n", False),
    "os._exit(0)": (ADD, "import os\nos._exit(0)\n", False),
    "raise SystemExit": (ADD, "raise SystemExit(0)\n", False),
    "exit() from site": (ADD, "exit()\n", False),
    "atexit calls os._exit(0)": (ADD, "import atexit, os\natexit.register(lambda: os._exit(0))\n" + _WRONG_ADD, False),
    "exit from inside the function": (ADD, "def add(a, b):\n    import os\n    os._exit(0)\n", False),
    "__del__ exits 0 at shutdown": (
        ADD, "class Bye:\n    def __del__(self):\n        import os\n        os._exit(0)\nkeep = Bye()\n" + _WRONG_ADD,
        False),
    "exits from a thread": (
        ADD, "import os, threading, time\nthreading.Thread(target=lambda: os._exit(0)).start()\n"
        "time.sleep(2)\n", False),
    "kills its own sandbox's init": (ADD, "import os, signal\nos.kill(1, signal.SIGKILL)\n" + _WRONG_ADD, False),
    "prints a fake verdict line": (
        ADD, "print('BENCHLAB-RESULT ' + '0' * 32 + ' 11')\nprint('passed')\nimport os\nos._exit(0)\n", False),
    "prints a fake report claiming True for every probe": (
        "assert is_even(4)\nassert not is_even(7)",
        "import os, json\nvalues = {f'__bl_{i}': ['b', True] for i in range(10)}\n"
        "os.write(1, (json.dumps({'loaded': '', 'values': values, 'failed': [], 'modules': {}}) + '\\n').encode())\n"
        "os.write(3, (json.dumps({'loaded': '', 'values': values, 'failed': [], 'modules': {}}) + '\\n').encode())\n"
        "os._exit(0)\n", False),
    "reads /proc/self/mem through /dev/fd/.. and forges the result": (ADD, _MEMORY_FORGER, False),
    "rewrites 0 to 1 in its own memory": (ADD, _MEMORY_REWRITER, False),
    "reads its program for the expected values": (
        "assert add(20, 31) == 51\nassert add(-7, 3) == -4",
        "import re\nsource = open(__import__('sys').argv[0]).read()\n"
        "wanted = [int(x) for x in re.findall(r'== (\\d+)', source)]\n"
        "def add(a, b):\n    return wanted.pop(0) if wanted else 0\n", False),
    "TOCTOU: __del__ swaps the result's class after the check": (TOTAL, _TOCTOU, True),
    "returns a list subclass equal to everything": (
        TOTAL, "class L(list):\n    def __eq__(self, o):\n        return True\n    __hash__ = None\n"
        "def total(xs):\n    return L()\n", True),
    "returns an object equal to everything": (
        ADD, "class Same:\n    def __eq__(self, other):\n        return True\n"
        "def add(a, b):\n    return Same()\n", True),
    "int subclass equal to everything": (
        ADD, "class Same(int):\n    def __eq__(self, other):\n        return True\n    __hash__ = int.__hash__\n"
        "def add(a, b):\n    return Same(0)\n", True),
    "namedtuple-like tuple subclass equal to everything": (
        "assert pair(1) == (1, 2)",
        "class P(tuple):\n    _fields = ('a', 'b')\n    def __eq__(self, o):\n        return True\n"
        "    __hash__ = None\n"
        "def pair(x):\n    return P((0, 0))\n", True),
    "patches builtins.abs and math.isclose": (
        MEAN, "import builtins, math\nbuiltins.abs = lambda x: 0\nmath.isclose = lambda *a, **k: True\n"
        "def mean(xs):\n    return 0\n", True),
    "patches math.isclose while called": (
        "import math\nm = mean([1, 2])\nassert math.isclose(m, 1.5)",
        "def mean(xs):\n    import math\n    math.isclose = lambda *a, **k: True\n    return 0\n", True),
    "re-patches math.isclose from __del__ after each call": (
        "import math\nassert math.isclose(mean([1, 2]), 1.5)\nassert math.isclose(mean([4]), 4.0)",
        "import math\nclass Again:\n    def __del__(self):\n        math.isclose = lambda *a, **k: True\n"
        "Again()\ndef mean(xs):\n    Again()\n    return 0\n", True),
    "patches Counter.__eq__ in the class": (
        COUNTS, "import collections\ncollections.Counter.__eq__ = lambda s, o: True\n"
        "def counts(s):\n    return collections.Counter()\n", True),
    "patches Fraction.__eq__ in the class": (
        THIRD, "import fractions\nfractions.Fraction.__eq__ = lambda s, o: True\n"
        "def third(n):\n    return fractions.Fraction(0)\n", True),
    "plants a fake numpy whose allclose is always true": (
        NUMPY, "import sys, types\nfake = types.ModuleType('numpy')\nfake.allclose = lambda *a, **k: True\n"
        "sys.modules['numpy'] = fake\ndef halves(xs):\n    return [0]\n", True),
    "patches unittest.TestCase.assertEqual": (
        UNITTEST, "import unittest\nunittest.TestCase.assertEqual = lambda *a, **k: None\n" + _WRONG_ADD, True),
    "binds math to a fake module the tests use unimported": (
        ISCLOSE_UNIMPORTED, "import types\nmath = types.ModuleType('math')\nmath.isclose = lambda *a, **k: True\n"
        "def mean(xs):\n    return 0\n", True),
    "replaces sys.modules['math'] for the tests' import": (
        MEAN, "import sys, types\nfake = types.ModuleType('math')\nfake.isclose = lambda *a, **k: True\n"
        "sys.modules['math'] = fake\nimport builtins\nbuiltins.abs = lambda x: 0\ndef mean(xs):\n    return 0\n", True),
    "rewrites the tests' names through a function they pass it": (
        "def expected(xs):\n    return sum(xs)\nassert apply(lambda x: x, [1, 2]) == expected([1, 2])",
        "def apply(f, xs):\n    f.__globals__['expected'] = lambda xs: 0\n    return 0\n", True),
    "shadows abs with its own": (
        "assert abs(mean([1, 2]) - 1.5) < 1e-9", "def abs(x):\n    return 0\ndef mean(xs):\n    return 0\n", True),
    "HumanEval check() with a result equal to everything": (
        HUMANEVAL, "class Same:\n    def __eq__(self, o):\n        return True\ndef total(xs):\n    return Same()\n",
        True),
    "returns a huge power for the glue to compute": (
        "assert 2 ** size(3) == 8", "def size(n):\n    return 10 ** 12\n", False),
    "returns a value nested 10,000 deep": (
        TOTAL, "def total(xs):\n    v = []\n    for _ in range(10000):\n        v = [v]\n    return v\n", False),
    "infinite output": (ADD, "while True:\n    print('x' * 1000)\n", False),
    "int subclass equal to everything, tests run whole": (
        WHOLE_TOTAL, "class Same(int):\n    def __eq__(self, other):\n        return True\n"
        "    __hash__ = int.__hash__\ndef total(xs):\n    return Same(0)\n", True),
    "str subclass equal to everything, tests run whole": (
        WHOLE_SHOUT, "class Same(str):\n    def __eq__(self, other):\n        return True\n"
        "    __hash__ = str.__hash__\ndef shout(s):\n    return Same('')\n", True),
    "list subclass whose items are equal to everything, tests run whole": (
        WHOLE_SORT, "class Same(int):\n    def __eq__(self, other):\n        return True\n    __hash__ = int.__hash__\n"
        "class L(list):\n    def __eq__(self, other):\n        return True\n"
        "def my_sort(xs):\n    return L([Same(0)] * len(xs))\n", True),
    "returns a huge structure, tests run whole": (
        WHOLE_TOTAL, "def total(xs):\n    return 'x' * 50_000_000\n", False),
    "returns a list of millions of items, tests run whole": (
        WHOLE_TOTAL, "def total(xs):\n    return list(range(3_000_000))\n", False),
    "never returns, tests run whole": (WHOLE_TOTAL, "def total(xs):\n    while True:\n        pass\n", False),
    "raises SystemExit from a call, tests run whole": (
        WHOLE_TOTAL, "def total(xs):\n    raise SystemExit(0)\n", False),
    "writes forged verdicts wherever it can reach, tests run whole": (WHOLE_TOTAL, _REACHER, False),
    "returns code for the tests to eval that forges their verdict": (
        WHOLE_EVAL, "def square_expr(n):\n    return (\"__import__('os').write(4, "
        "b'[\\\"result\\\", 0, true, \\\"\\\"]\\\\n"
        "[\\\"done\\\", true]\\\\n') and 0\")\n", False),
    "binds a fake math the tests use unimported, tests run whole": (
        WHOLE_MEAN, "import sys, types\nmath = types.ModuleType('math')\nmath.isclose = lambda *a, **k: True\n"
        "sys.modules['math'] = math\ndef mean(xs):\n    return 0\n", True),
    # Named like builtins: the function under test is the answer's; any other definition of a builtin's
    # name (a helper that lies to the tests' own checks) never changes what the tests compute.
    "a wrong sum with a lying abs, both named like builtins": (
        "assert abs(sum([0.1, 0.2]) - 0.3) < 1e-9", "def sum(xs):\n    return 0\ndef abs(x):\n    return 0\n", True),
    "a wrong max with a lying round, both named like builtins": (
        "assert round(max([1.2, 5.6])) == 6", "def max(xs):\n    return 0\ndef round(x, n=None):\n    return 6\n",
        True),
    "a lying len helper": (
        "assert len(dedupe([1, 1, 2])) == 2", "def len(x):\n    return 2\ndef dedupe(xs):\n    return xs\n", True),
    "a lying isinstance helper": (
        "assert isinstance(to_int('7'), int)", "def isinstance(*a):\n    return True\ndef to_int(s):\n    return s\n",
        True),
    "a lying all helper": (
        "assert all(x % 2 == 0 for x in evens(6))", "def all(xs):\n    return True\ndef evens(n):\n    return [1, 3]\n",
        True),
    "a lying any helper": (
        "assert not any(x < 0 for x in magnitudes([-1, 2]))",
        "def any(xs):\n    return False\ndef magnitudes(xs):\n    return xs\n", True),
    "a lying round helper": (
        "assert round(mean([1, 2]), 2) == 1.5", "def round(x, n=0):\n    return 1.5\ndef mean(xs):\n    return 0\n",
        True),
    "a lying sorted helper": (
        "assert sorted(unique([3, 1, 3])) == [1, 3]",
        "def sorted(xs):\n    return [1, 3]\ndef unique(xs):\n    return xs\n", True),
    "a lying set helper": (
        "assert set(common([1, 2], [2, 3])) == {2}", "def set(xs):\n    return {2}\ndef common(a, b):\n    return []\n",
        True),
    "a lying str helper": (
        "assert str(double(4)) == '8'", "def str(x):\n    return '8'\ndef double(n):\n    return 0\n", True),
    "a lying float helper": (
        "assert float(half(3)) == 1.5", "def float(x):\n    return 1.5\ndef half(n):\n    return 0\n", True),
    "a lying int helper": (
        "assert int(parse('42')) == 42", "def int(x):\n    return 42\ndef parse(s):\n    return 0\n", True),
    "a print helper that rewrites what it is shown": (
        "def check(candidate):\n    result = candidate([3, 1, 2])\n    print(result)\n"
        "    assert result == [1, 2, 3]\n\ncheck(solve)\n",
        "def print(*args):\n    args[0][:] = [1, 2, 3]\ndef solve(xs):\n    return xs\n", True),
    "a range helper that skips the tests' loop": (
        "for n in range(1, 5):\n    assert square(n) == n * n",
        "def range(*a):\n    return []\ndef square(n):\n    return 0\n", True),
    "a zip helper that hands back the expected pairs": (
        "assert dict(zip(letters(2), [1, 2])) == {'a': 1, 'b': 2}",
        "def zip(*a):\n    return [('a', 1), ('b', 2)]\ndef letters(n):\n    return []\n", True),
    "a lying round, and no max: Python's stands in for the function under test": (
        "assert round(max([-7.2, 3.1])) == -7", "def round(x, n=None):\n    return -7\n", True),
    "a lying abs bound through global from inside a function": (
        "assert abs(mean([1, 2]) - 1.5) < 1e-9",
        "def _setup():\n    global abs\n    abs = lambda x: 0\n_setup()\ndef mean(xs):\n    return 0\n", True),
    "a lying abs bound at run time through globals()": (
        "assert abs(mean([1, 2]) - 1.5) < 1e-9",
        "globals()['abs'] = lambda x: 0\ndef mean(xs):\n    return 0\n", True),
    "a wrong sum that deletes itself, leaving Python's": (
        "assert sum([1, 2]) == 3\nassert sum([]) == 0", "def sum(xs):\n    return 0\ndel sum\n", True),
    "a wrong sum bound at run time, out of the text's sight": (
        "assert sum([1, 2]) == 3\nassert sum([]) == 0", "globals()['sum'] = lambda xs: 0\n", False),
}

HONEST: dict[str, tuple[str, str]] = {
    "plain": (ADD, "def add(a, b):\n    return a + b\n"),
    "prints a lot and has a main block": (
        ADD, "def add(a, b):\n    print('adding' * 20000)\n    return a + b\n"
        "if __name__ == '__main__':\n    print(add(1, 2))\n"),
    "namedtuple, dataclass and TypeVar": (
        ADD, "from collections import namedtuple\nfrom dataclasses import dataclass\nfrom typing import TypeVar\n"
        "T = TypeVar('T')\nPair = namedtuple('Pair', 'a b')\n@dataclass\nclass Box:\n    v: int\n"
        "def add(a, b):\n    p = Pair(a, b)\n    return Box(p.a).v + p.b\n"),
    "recursive": (ADD, "def add(a, b):\n    step = 1 if b > 0 else -1\n"
                       "    return a if b == 0 else add(a + step, b - step)\n"),
    "statistics mean": (MEAN, "import statistics\ndef mean(xs):\n    return statistics.mean(xs)\n"),
    "imports math the tests use without importing it": (
        ISCLOSE_UNIMPORTED, "import math\ndef mean(xs):\n    return math.fsum(xs) / len(xs)\n"),
    "returns a namedtuple compared to a tuple": (
        "assert split(7) == (3, 1)\nassert split(9)[0] == 4",
        "from collections import namedtuple\nR = namedtuple('R', 'q r')\ndef split(n):\n    return R(*divmod(n, 2))\n"),
    "Counter result": (COUNTS, "from collections import Counter\ndef counts(s):\n    return Counter(s)\n"),
    "dict compared to a Counter": (
        COUNTS, "def counts(s):\n    d = {}\n    for c in s:\n        d[c] = d.get(c, 0) + 1\n    return d\n"),
    "Fraction result": (THIRD, "from fractions import Fraction\ndef third(n):\n    return Fraction(n, 3)\n"),
    "numpy result with numpy tests": (NUMPY, "import numpy as np\ndef halves(xs):\n    return np.array(xs) / 2\n"),
    "list result with numpy tests": (NUMPY, "def halves(xs):\n    return [x / 2 for x in xs]\n"),
    "unittest assertEqual": (UNITTEST, "def add(a, b):\n    return a + b\n"),
    "HumanEval check(candidate)": (HUMANEVAL, "def total(xs):\n    return sum(xs)\n"),
    "int result compared to a float": (
        "assert half(4) == 2.0\nassert half(3) == 1.5", "def half(n):\n    return n / 2 if n % 2 else n // 2\n"),
    "generator result the tests turn into a list": (
        "assert list(evens(5)) == [0, 2, 4]", "def evens(n):\n    return (i for i in range(n) if i % 2 == 0)\n"),
    "set result compared with sets": (
        "assert set(common([1, 2, 3], [2, 3, 4])) == {2, 3}", "def common(a, b):\n    return list(set(a) & set(b))\n"),
    "nested calls": ("assert add(add(1, 2), 3) == 6", "def add(a, b):\n    return a + b\n"),
    "a class with a method": (
        "assert Solution().two([2, 7, 11], 9) == [0, 1]",
        "class Solution:\n    def two(self, xs, t):\n        seen = {}\n        for i, x in enumerate(xs):\n"
        "            if t - x in seen:\n                return [seen[t - x], i]\n            seen[x] = i\n"),
    "tests with their own helper and setup": (
        "def expected(xs):\n    return sum(xs)\ndata = [3, 4, 5]\nassert total(data) == expected(data)\n"
        "result = total(data[:2])\nassert result == 7",
        "def total(xs):\n    return sum(xs)\n"),
    "a test that passes the answer a lambda": (
        "assert apply(lambda x: x * 2, [1, 2]) == [2, 4]", "def apply(f, xs):\n    return [f(x) for x in xs]\n"),
    "None and booleans": (
        "assert find([1, 2], 3) is None\nassert find([1, 2], 2) == 1\nassert (find([5], 5) == 0) is True",
        "def find(xs, x):\n    return xs.index(x) if x in xs else None\n"),
    "a check() with a loop over constant cases": (SQUARES, "def square(n):\n    return n * n\n"),
    "string methods on the result": (
        "assert greet('bob').startswith('Hello')\nassert greet('x').lower() == 'hello, x!'",
        "def greet(name):\n    return f'Hello, {name}!'\n"),
    "a helper abs like Python's beside the function under test": (
        MEAN, "def abs(x):\n    return x if x >= 0 else -x\ndef mean(xs):\n    return sum(xs) / len(xs)\n"),
    "a helper len like Python's": (
        "assert len(dedupe([1, 1, 2])) == 2",
        "def len(xs):\n    n = 0\n    for _ in xs:\n        n += 1\n    return n\n"
        "def dedupe(xs):\n    out = []\n    for x in xs:\n        if x not in out:\n            out.append(x)\n"
        "    return out\n"),
    "a print that only silences output": (
        "result = solve([3, 1, 2])\nprint(result)\nassert result == [1, 2, 3]",
        "def print(*args, **kwargs):\n    pass\ndef solve(xs):\n    return sorted(xs)\n"),
    "a two-argument max helper the tests call with two arguments": (
        "assert max(largest([3, 9, 2]), 0) == 9",
        "def max(a, b):\n    return a if a > b else b\ndef largest(xs):\n    best = xs[0]\n    for x in xs[1:]:\n"
        "        best = max(best, x)\n    return best\n"),
    "its own exception class named like a builtin one": (
        "try:\n    fetch(-1)\nexcept TimeoutError:\n    pass\nelse:\n    assert False\nassert fetch(2) == 2",
        "class TimeoutError(Exception):\n    pass\ndef fetch(x):\n    if x < 0:\n        raise TimeoutError('late')\n"
        "    return x\n"),
    "input rebound as in competitive programming, unused by the tests": (
        ADD, "import sys\ninput = sys.stdin.readline\ndef add(a, b):\n    return a + b\n"),
    "a function under test named like a builtin (sum)": (
        BUILTIN_SUM, "def sum(xs):\n    total = 0\n    for x in xs:\n        total += x\n    return total\n"),
    "a function under test named like a builtin with a helper abs": (
        "assert abs(sum([0.5, 0.25]) - 0.75) < 1e-9",
        "def abs(x):\n    return -x if x < 0 else x\ndef sum(xs):\n    total = 0\n    for x in xs:\n"
        "        total += x\n    return total\n"),
    "a function under test named like a builtin, unlike it (max by magnitude)": (
        "assert max([-7, 3]) == -7\nassert max([2, -1]) == 2",
        "def max(xs):\n    best = xs[0]\n    for x in xs:\n        if x * x > best * best:\n            best = x\n"
        "    return best\n"),
}

# Cases that need numpy where the answer runs: left out where the sandbox's interpreter has none
# (there, answer + tests fails as well).
NEEDS_NUMPY = frozenset({"numpy result with numpy tests", "list result with numpy tests", "numpy tests, wrong values"})

WRONG: dict[str, tuple[str, str]] = {
    "add subtracts": (ADD, "def add(a, b):\n    return a - b\n"),
    "total off by one": (TOTAL, "def total(xs):\n    return sum(xs) + 1\n"),
    "mean of the wrong thing": (MEAN, "def mean(xs):\n    return max(xs)\n"),
    "counts misses a letter": (COUNTS, "from collections import Counter\ndef counts(s):\n    return Counter(s[1:])\n"),
    "HumanEval check with a wrong total": (HUMANEVAL, "def total(xs):\n    return len(xs)\n"),
    "numpy tests, wrong values": (NUMPY, "def halves(xs):\n    return xs\n"),
    "unittest, wrong add": (UNITTEST, "def add(a, b):\n    return a * b\n"),
    "a loop over constant cases, wrong square": (SQUARES, "def square(n):\n    return 2 * n\n"),
    "math unimported by anyone": (ISCLOSE_UNIMPORTED, "def mean(xs):\n    return sum(xs) / len(xs)\n"),
    "sum named like the builtin, returns 0": (BUILTIN_SUM, "def sum(xs):\n    return 0\n"),
    "max named like the builtin, returns the first item": (
        "assert max([3, 9, 2]) == 9", "def max(xs):\n    return xs[0]\n"),
    "sorted named like the builtin, returns its input": (
        "assert sorted([3, 1, 2]) == [1, 2, 3]", "def sorted(xs):\n    return list(xs)\n"),
    "len named like the builtin, counts one too many": (
        "assert len('abc') == 3", "def len(x):\n    n = 1\n    for _ in x:\n        n += 1\n    return n\n"),
    "abs named like the builtin, returns its argument": (
        "assert abs(-4) == 4\nassert abs(2.5) == 2.5", "def abs(x):\n    return x\n"),
}
