"""Test programs as benchmark authors write them, each with a correct and a wrong answer.

``SHAPES`` maps a shape's name to ``(tests, correct answer, wrong answer)``. The
correct answer must score 1 and the wrong one 0, whatever the shape; a shape that
scores a correct answer 0 as "cannot be judged" is a gap of the scorer. The last
shapes test a function named like one of Python's builtins (``def sum``): the
tests' calls of that name reach the answer's, not Python's.
Used by ``tests/evaluate/test_code_whole_program.py`` and ``bench/code_shapes.py``.
"""

from __future__ import annotations

SORT_OK = "def my_sort(xs):\n    return sorted(xs)\n"
# An insertion sort under the builtin's name, for the shapes that test a function called sorted.
SORTED_OK = ("def sorted(xs):\n    out = []\n    for x in xs:\n        i = 0\n"
             "        while i < len(out) and out[i] < x:\n            i += 1\n"
             "        out.insert(i, x)\n    return out\n")
MAX_OK = ("def max(xs):\n    best = xs[0]\n    for x in xs:\n        if x > best:\n            best = x\n"
          "    return best\n")
SUM_OK = "def sum(xs):\n    total = 0\n    for x in xs:\n        total += x\n    return total\n"
SORT_BAD = "def my_sort(xs):\n    return list(xs)\n"

SHAPES: dict[str, tuple[object, str, str]] = {
    "HumanEval check(candidate)": (
        "def check(candidate):\n    assert candidate(2, 3) == 5\n    assert candidate(-1, 1) == 0\n\ncheck(add)\n",
        "def add(a, b):\n    return a + b\n", "def add(a, b):\n    return a - b\n"),
    "MBPP test_list": (
        ["assert add(2, 3) == 5", "assert add(0, 0) == 0", "assert add(-2, 2) == 0"],
        "def add(a, b):\n    return a + b\n", "def add(a, b):\n    return a * b\n"),
    "LiveCodeBench functional (Solution class)": (
        "import json\ninputs = json.loads('[[2, 7, 11, 15], 9]')\n"
        "assert Solution().twoSum(*inputs) == [0, 1]\n",
        "class Solution:\n    def twoSum(self, nums, target):\n        seen = {}\n"
        "        for i, x in enumerate(nums):\n            if target - x in seen:\n"
        "                return [seen[target - x], i]\n            seen[x] = i\n",
        "class Solution:\n    def twoSum(self, nums, target):\n        return [0, 0]\n"),
    "loop with asserts over the answer's results": (
        "res = my_sort([5, 3, 9, 1, 1, 4])\nfor i in range(len(res) - 1):\n    assert res[i] <= res[i + 1]\n"
        "assert len(res) == 6\n", SORT_OK, "def my_sort(xs):\n    return xs[::-1]\n"),
    "loop over the answer's result, calling it again": (
        "for word in split_words('a bb ccc'):\n    assert count_len(word) == len(word)\n",
        "def split_words(s):\n    return s.split()\ndef count_len(w):\n    return len(w)\n",
        "def split_words(s):\n    return s.split()\ndef count_len(w):\n    return 1\n"),
    "while loop driven by the answer": (
        "n, steps = 27, 0\nwhile n != 1:\n    n = collatz_next(n)\n    steps += 1\nassert steps == 111\n",
        "def collatz_next(n):\n    return n // 2 if n % 2 == 0 else 3 * n + 1\n",
        "def collatz_next(n):\n    return n // 2 if n % 2 == 0 else 3 * n - 1 if n > 1 else 1\n"),
    "helper of several statements returning a verdict": (
        "def is_permutation_sorted(f, xs):\n    out = f(list(xs))\n    if sorted(out) != sorted(xs):\n"
        "        return False\n    return all(a <= b for a, b in zip(out, out[1:]))\n\n"
        "assert is_permutation_sorted(my_sort, [3, 1, 2])\nassert is_permutation_sorted(my_sort, [])\n",
        SORT_OK, SORT_BAD),
    "helper of several statements with asserts inside": (
        "def check_sorted(f, xs):\n    out = f(list(xs))\n    assert sorted(out) == sorted(xs)\n"
        "    for a, b in zip(out, out[1:]):\n        assert a <= b\n\ncheck_sorted(my_sort, [4, 2, 8, 1])\n",
        SORT_OK, SORT_BAD),
    "eval of the answer's output": (
        "assert eval(to_expr([2, 3, 4])) == 9\nassert eval(to_expr([])) == 0\n",
        "def to_expr(xs):\n    return '+'.join(map(str, xs)) or '0'\n",
        "def to_expr(xs):\n    return '*'.join(map(str, xs)) or '0'\n"),
    "string processing of the answer's output": (
        "out = render(3)\nlines = out.splitlines()\nassert len(lines) == 3\nfor i, line in enumerate(lines):\n"
        "    assert line == '*' * (i + 1)\n",
        "def render(n):\n    return '\\n'.join('*' * (i + 1) for i in range(n))\n",
        "def render(n):\n    return '\\n'.join('*' * n for i in range(n))\n"),
    "seeded randomized property test": (
        "import random\nrng = random.Random(7)\nfor _ in range(30):\n"
        "    xs = [rng.randint(-9, 9) for _ in range(rng.randint(0, 8))]\n    assert my_sort(xs) == sorted(xs)\n",
        SORT_OK, SORT_BAD),
    "seeded property test over the answer's result": (
        "import random\nrng = random.Random(3)\nfor _ in range(20):\n"
        "    xs = [rng.randint(0, 50) for _ in range(6)]\n    out = my_sort(xs)\n"
        "    assert all(out[i] <= out[i + 1] for i in range(len(out) - 1)) and sorted(out) == sorted(xs)\n",
        SORT_OK, SORT_BAD),
    "in-place mutation": (
        "xs = [3, 1, 2]\nsort_in_place(xs)\nassert xs == [1, 2, 3]\n",
        "def sort_in_place(xs):\n    xs.sort()\n", "def sort_in_place(xs):\n    xs.reverse()\n"),
    "class-based answer with state": (
        "s = Stack()\ns.push(1)\ns.push(2)\nassert s.pop() == 2\nassert s.size() == 1\n",
        "class Stack:\n    def __init__(self):\n        self.items = []\n    def push(self, x):\n"
        "        self.items.append(x)\n    def pop(self):\n        return self.items.pop()\n"
        "    def size(self):\n        return len(self.items)\n",
        "class Stack:\n    def __init__(self):\n        self.items = []\n    def push(self, x):\n"
        "        self.items.append(x)\n    def pop(self):\n        return self.items.pop(0)\n"
        "    def size(self):\n        return len(self.items)\n"),
    "generator answer": (
        "assert list(countdown(3)) == [3, 2, 1]\n",
        "def countdown(n):\n    while n > 0:\n        yield n\n        n -= 1\n",
        "def countdown(n):\n    while n >= 0:\n        yield n\n        n -= 1\n"),
    "infinite generator read with next()": (
        "g = fib()\nassert [next(g) for _ in range(6)] == [0, 1, 1, 2, 3, 5]\n",
        "def fib():\n    a, b = 0, 1\n    while True:\n        yield a\n        a, b = b, a + b\n",
        "def fib():\n    a, b = 1, 1\n    while True:\n        yield a\n        a, b = b, a + b\n"),
    "floats with tolerance": (
        "import math\nassert math.isclose(mean([1, 2, 4]), 7 / 3, rel_tol=1e-9)\n"
        "assert abs(area(1.0) - 3.14159) < 1e-4\n",
        "import math\ndef mean(xs):\n    return sum(xs) / len(xs)\ndef area(r):\n    return math.pi * r * r\n",
        "def mean(xs):\n    return sum(xs) // len(xs)\ndef area(r):\n    return 3.14 * r * r\n"),
    "expected exception": (
        "try:\n    safe_div(1, 0)\nexcept ValueError:\n    pass\nelse:\n    assert False, 'no ValueError'\n"
        "assert safe_div(6, 3) == 2\n",
        "def safe_div(a, b):\n    if b == 0:\n        raise ValueError('b is 0')\n    return a / b\n",
        "def safe_div(a, b):\n    return a / b if b else 0\n"),
    "a function the answer returns": (
        "add3 = make_adder(3)\nassert add3(4) == 7\nassert make_adder(0)(5) == 5\n",
        "def make_adder(n):\n    return lambda x: x + n\n", "def make_adder(n):\n    return lambda x: x * n\n"),
    "unittest.TestCase run by the tests": (
        "import unittest\nclass T(unittest.TestCase):\n    def test_add(self):\n"
        "        self.assertEqual(add(1, 2), 3)\n"
        "    def test_neg(self):\n        self.assertEqual(add(-1, -2), -3)\n\n"
        "result = unittest.TextTestRunner(stream=open('/dev/null', 'w')).run("
        "unittest.defaultTestLoader.loadTestsFromTestCase(T))\nassert result.wasSuccessful()\n",
        "def add(a, b):\n    return a + b\n", "def add(a, b):\n    return abs(a) + abs(b)\n"),
    "tests comparing with a reference implementation in a loop": (
        "def ref(n):\n    return sum(i * i for i in range(n + 1))\n\nfor n in range(0, 40, 3):\n"
        "    got = sum_squares(n)\n    if got != ref(n):\n        raise AssertionError((n, got))\n"
        "assert sum_squares(1) == 1\n",
        "def sum_squares(n):\n    return n * (n + 1) * (2 * n + 1) // 6\n",
        "def sum_squares(n):\n    return n * (n + 1) * (2 * n + 1) // 6 + (n == 30)\n"),
    "function under test named like a builtin: sum": (
        "assert sum([1, 2, 3]) == 6\nassert sum([]) == 0\n", SUM_OK, "def sum(xs):\n    return 0\n"),
    "function under test named like a builtin: max": (
        "assert max([3, 9, 2]) == 9\nassert max([-1]) == -1\n",
        MAX_OK,
        "def max(xs):\n    return xs[0]\n"),
    "function under test named like a builtin: sorted": (
        "assert sorted([3, 1, 2]) == [1, 2, 3]\nassert sorted([]) == []\n", SORTED_OK,
        "def sorted(xs):\n    return list(xs)\n"),
    "function under test named like a builtin: len": (
        "assert len('abc') == 3\nassert len([]) == 0\n",
        "def len(xs):\n    n = 0\n    for _ in xs:\n        n += 1\n    return n\n",
        "def len(xs):\n    return 0\n"),
    "function under test named like a builtin: abs": (
        "assert abs(-4) == 4\nassert abs(2.5) == 2.5\n", "def abs(x):\n    return -x if x < 0 else x\n",
        "def abs(x):\n    return x\n"),
    "HumanEval check(candidate) of a function named like a builtin": (
        "def check(candidate):\n    assert candidate([1, 2, 3]) == 6\n"
        "    assert abs(candidate([0.5, 0.25]) - 0.75) < 1e-9\n\ncheck(sum)\n",
        SUM_OK, "def sum(xs):\n    return 0\n"),
    "function named like a builtin, unlike the builtin (max by magnitude)": (
        "assert max([-7, 3]) == -7\nassert max([2, -1]) == 2\n",
        "def max(xs):\n    best = xs[0]\n    for x in xs:\n        if x * x > best * best:\n            best = x\n"
        "    return best\n",
        MAX_OK),
    "loop with asserts over the result of a function named like a builtin": (
        "res = sorted([5, 3, 9, 1])\nfor i in range(len(res) - 1):\n    assert res[i] <= res[i + 1]\n"
        "assert len(res) == 4\n", SORTED_OK, "def sorted(xs):\n    return list(xs)\n"),
    "a helper named like a builtin beside the function under test": (
        "assert abs(mean([1, 2]) - 1.5) < 1e-9\nassert abs(mean([4]) - 4) < 1e-9\n",
        "def abs(x):\n    return x if x >= 0 else -x\ndef mean(xs):\n    return sum(xs) / len(xs)\n",
        "def abs(x):\n    return 0\ndef mean(xs):\n    return 0\n"),
}
