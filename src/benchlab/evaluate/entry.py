"""Which of the tests' names reach the answer where the answer is named like one of Python's builtins.

The tests call the answer by name (``add(2, 3)``). A name the tests read and never
bind that is not a builtin is the answer's: it can be nothing else. A builtin's name
is ambiguous: ``assert sum([1, 2]) == 3`` tests the answer's ``sum`` when ``sum`` is
the function under test, and ``assert abs(mean(xs) - 1.5) < 1e-9`` uses Python's
``abs`` as the tests' own check. ``answer + tests`` lets the answer's definition win
both times, which lets an answer defining a lying ``abs`` pass any test that checks
with ``abs``; keeping Python's builtin both times scores a wrong ``sum`` with
Python's ``sum``. Neither is right; this module decides, per item, which builtin
names the tests' calls send to the answer:

- where the item names its function under test (``entry_point``, as HumanEval's
  items do), that name, and no other, is the answer's; every other builtin name of
  the tests is Python's;
- otherwise the *candidates* are the builtin names the tests read that the answer
  binds at module level (``def sum``, ``sum = ...``, ``from math import pow``),
  exception classes aside (the tests catch the answer's by its class's name). The
  tests are judged once per way of binding the candidates (each to the answer's or
  Python's), and a test passes only where it passes every time. The way that binds
  every candidate to Python's is among them, so no definition of a builtin's name
  turns a test that fails with Python's builtins into a pass; and where the answer
  binds the function under test, the true way (it the answer's, every other
  candidate Python's) is among them, so a wrong function under test fails. The one
  way left out is Python's for all, and only where the tests call nothing but
  builtin names and the answer binds every one of them: the function under test is
  then surely among the candidates, and one that is not Python's builtin (a ``max``
  by magnitude) is judged as the answer's alone;
- tests that call nothing the answer binds statically, no name that is not a
  builtin and no candidate, test nothing of the answer: they are refused.

``choices`` returns the ways, smallest first; ``harness.judge`` judges each and keeps
a test's pass only where every judgement passed it.
"""

from __future__ import annotations

import ast
import builtins
import itertools
from collections.abc import Sequence
from dataclasses import dataclass

BUILTIN_NAMES = frozenset(vars(builtins))
# Names that cannot be a function under test. Exception classes: a class of the answer's cannot cross
# to the tests, which catch what the answer raises by its class's name (an answer's own
# ``TimeoutError`` is caught by ``except TimeoutError``), so binding one to the answer could only
# break an honest ``except``. Dunder names (``__name__``): the module's, not functions.
_NOT_UNDER_TEST = frozenset(name for name, value in vars(builtins).items()
                            if (isinstance(value, type) and issubclass(value, BaseException))
                            or name.startswith("__"))
# Candidates beyond this many are 2 ** n judgements: refused instead (an item's entry_point decides).
MAX_CANDIDATES = 3


@dataclass(frozen=True)
class Choices:
    """The ways to bind the tests' builtin names for one answer: each the set of names that reach the answer.

    ``candidates``: the builtin names in question (empty with an ``entry_point`` or without any);
    ``why``: the tests cannot be judged this way (then ``ways`` is empty).
    """

    ways: tuple[frozenset[str], ...]
    candidates: frozenset[str] = frozenset()
    why: str = ""

    def describe(self, way: frozenset[str]) -> str:
        """How ``way`` bound the candidates, for a reason shown to the user; "" where there was one way."""
        if len(self.ways) < 2:
            return ""
        parts = [f"{name} the answer's" if name in way else f"{name} Python's builtin"
                 for name in sorted(self.candidates)]
        return " (judged with " + ", ".join(parts) + ")"


def tests_free_names(trees: Sequence[ast.Module]) -> frozenset[str]:
    """The names the tests read and never bind, builtins included: what ``answer + tests`` takes from the answer."""
    bound: set[str] = set()
    read: set[str] = set()
    for tree in trees:
        for node in ast.walk(tree):
            if isinstance(node, ast.Name):
                (read if isinstance(node.ctx, ast.Load) else bound).add(node.id)
            elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                bound.add(node.name)
            elif isinstance(node, ast.arg):
                bound.add(node.arg)
            elif isinstance(node, ast.alias):
                bound.add((node.asname or node.name).split(".")[0])
            elif isinstance(node, ast.ExceptHandler | ast.MatchAs | ast.MatchStar) and node.name:
                bound.add(node.name)
    return frozenset(read - bound)


def answer_bindings(tree: ast.Module) -> frozenset[str]:
    """The names the answer's program binds in its module's namespace, as written (not built at run time).

    Function and class bodies are skipped (their names are their own) except for names
    they declare ``global``; a star import binds names no text shows, and is not counted."""
    names: set[str] = set()
    stack: list[ast.AST] = list(tree.body)
    while stack:
        node = stack.pop()
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            names.add(node.name)
            stack += [*node.decorator_list, *node.args.defaults, *(d for d in node.args.kw_defaults if d)]
            continue
        if isinstance(node, ast.ClassDef):
            names.add(node.name)
            stack += [*node.decorator_list, *node.bases, *(k.value for k in node.keywords)]
            continue
        if isinstance(node, ast.Lambda):
            stack += [*node.args.defaults, *(d for d in node.args.kw_defaults if d)]
            continue
        if isinstance(node, ast.comprehension):  # its target is the comprehension's own
            stack += [node.iter, *node.ifs]
            continue
        if isinstance(node, ast.Import | ast.ImportFrom):
            names |= {(a.asname or a.name).split(".")[0] for a in node.names if a.name != "*"}
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store | ast.Del):
            names.add(node.id)
        elif isinstance(node, ast.ExceptHandler | ast.MatchAs | ast.MatchStar) and node.name:
            names.add(node.name)
        elif isinstance(node, ast.MatchMapping) and node.rest:
            names.add(node.rest)
        stack += list(ast.iter_child_nodes(node))
    for node in ast.walk(tree):
        if isinstance(node, ast.Global):
            names |= set(node.names)
    return frozenset(names)


def _parse(tests: str | Sequence[str]) -> list[ast.Module] | None:
    try:
        return [ast.parse(s) for s in ([tests] if isinstance(tests, str) else [str(t) for t in tests])]
    except SyntaxError:
        return None


def choices(answer: str, tests: str | Sequence[str], entry_point: str | None = None) -> Choices:
    """The ways to judge ``tests`` against ``answer``: which builtin names of the tests reach the answer.

    ``entry_point``: the item's function under test, where the item names one."""
    if entry_point is not None:
        return Choices((frozenset({entry_point} & BUILTIN_NAMES),))
    trees = _parse(tests)
    try:
        answer_tree = ast.parse(answer)
    except SyntaxError:
        answer_tree = None
    if trees is None or answer_tree is None:
        return Choices((frozenset(),))  # the judge says what does not parse
    free = tests_free_names(trees)
    callable_builtins = free & (BUILTIN_NAMES - _NOT_UNDER_TEST)
    candidates = callable_builtins & answer_bindings(answer_tree)
    others = free - BUILTIN_NAMES
    if not candidates and not others:
        return Choices((), why="the tests call no name the answer defines: with Python's builtins alone "
                               "they test nothing of the answer's (an item's entry_point names its function)")
    if len(candidates) > MAX_CANDIDATES:
        return Choices((), candidates, why=(
            f"the answer defines {len(candidates)} names of Python's builtins that the tests use "
            f"({', '.join(sorted(candidates))}): more than {MAX_CANDIDATES} to judge each way; "
            "an item's entry_point names the function under test"))
    ordered = sorted(candidates)
    ways = [frozenset(c) for n in range(len(ordered) + 1) for c in itertools.combinations(ordered, n)]
    if not others and callable_builtins <= candidates:
        # The tests call only builtin names and the answer binds each: the function under test is
        # one of them, so the way with none of them the answer's is not the true one.
        ways = ways[1:]
    return Choices(tuple(ways), candidates)
