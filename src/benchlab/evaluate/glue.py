"""The trusted side's evaluator: a test's comparison, over plain values, in the server's process.

``Glue.eval`` evaluates the part of a test that ``testplan.py`` kept here
(comparisons, arithmetic, subscripts, ``not``/``and``/``or``, and a fixed set
of pure functions: ``abs``, ``len``, ``sorted``, ``math.isclose``...) over
values that are exact built-ins, rebuilt by ``plain.decode`` or computed here.
Python's own operators do the work, so ``1 == 1.0``, ``[1] == (1,)`` and
``Counter`` equality are what they are in ``answer + tests``; nothing of the
answer's (a class, a method, a patched module) is ever called.

The values may come from a hostile answer, so the operations that could make
this process spend unbounded memory or time (``**``, ``<<``, repetition,
materialising a huge ``range``, ``math.factorial``) are bounded: past the
bound they raise ``GlueError`` and the check fails.
"""

from __future__ import annotations

import ast
import builtins
import cmath
import collections
import decimal
import fractions
import math
import operator
import statistics
import string
from collections.abc import Callable
from typing import Any

from benchlab.evaluate.plain import Failed

# Results and operands past these fail the check rather than hold the server.
MAX_LENGTH = 10_000_000
MAX_BITS = 1_000_000
# Turns of the comprehensions evaluated here for one item, all together (about a second's work).
MAX_TURNS = 50_000

# A namespace of the glue: names to Python values (plain data, the modules and pure functions above).
Namespace = dict[str, object]

_BUILTIN_NAMES = ("abs", "all", "any", "bin", "bool", "bytes", "chr", "complex", "dict", "divmod", "enumerate",
                  "float", "frozenset", "hex", "int", "isinstance", "len", "list", "max", "min", "oct", "ord",
                  "pow", "range", "reversed", "round", "set", "sorted", "str", "sum", "tuple", "type", "zip")
GLUE_BUILTINS: Namespace = {name: getattr(builtins, name) for name in _BUILTIN_NAMES}
# ``all``/``any`` of a generator the plan unrolled into a tuple of its elements: evaluated one element
# at a time and stopping where Python's would, so an element past that point (a call that raised) does
# not decide the verdict, as it would not in ``answer + tests``.
LAZY = {"all": "__bl_all", "any": "__bl_any"}

_MODULES = {"math": math, "cmath": cmath, "string": string, "collections": collections,
            "fractions": fractions, "decimal": decimal, "statistics": statistics}
# What of each module the glue may use: pure functions of values, and constants.
MODULE_ATTRS: dict[str, frozenset[str]] = {
    "math": frozenset(n for n in dir(math) if not n.startswith("_")),
    "cmath": frozenset(n for n in dir(cmath) if not n.startswith("_")),
    "string": frozenset({"ascii_letters", "ascii_lowercase", "ascii_uppercase", "digits", "hexdigits",
                         "octdigits", "punctuation", "printable", "whitespace"}),
    "collections": frozenset({"Counter", "OrderedDict", "deque"}),
    "fractions": frozenset({"Fraction"}),
    "decimal": frozenset({"Decimal"}),
    "statistics": frozenset({"mean", "median", "mode", "fmean", "median_low", "median_high", "pstdev",
                             "pvariance", "stdev", "variance"}),
}
_PLAIN_TYPES = (str, bytes, list, tuple, dict, set, frozenset, int, float, complex, collections.Counter,
                collections.OrderedDict, collections.deque, range)
# Methods of plain values that compute without changing them and without calling back into code.
_METHODS = {
    str: {"lower", "upper", "strip", "lstrip", "rstrip", "split", "rsplit", "startswith", "endswith", "count",
          "find", "rfind", "index", "rindex", "isdigit", "isalpha", "isalnum", "isspace", "isupper", "islower",
          "istitle", "isdecimal", "isnumeric", "join", "replace", "splitlines", "title", "capitalize",
          "swapcase", "casefold", "partition", "rpartition", "encode"},
    bytes: {"decode", "startswith", "endswith", "count", "find", "hex", "split", "strip", "lower", "upper"},
    list: {"count", "index", "copy"},
    tuple: {"count", "index"},
    dict: {"keys", "values", "items", "get", "copy"},
    collections.Counter: {"keys", "values", "items", "get", "copy", "most_common", "total", "elements"},
    collections.OrderedDict: {"keys", "values", "items", "get", "copy"},
    set: {"issubset", "issuperset", "union", "intersection", "difference", "symmetric_difference",
          "isdisjoint", "copy"},
    frozenset: {"issubset", "issuperset", "union", "intersection", "difference", "symmetric_difference",
                "isdisjoint", "copy"},
    collections.deque: {"count", "index", "copy"},
    int: {"bit_length", "bit_count", "conjugate"},
    float: {"is_integer", "hex", "conjugate", "as_integer_ratio"},
    complex: {"conjugate"},
    range: {"count", "index"},
}
PLAIN_METHODS: frozenset[str] = frozenset(m for names in _METHODS.values() for m in names)
PLAIN_ATTRS: frozenset[str] = frozenset({"real", "imag", "numerator", "denominator", "start", "stop", "step"})

_BINOPS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv,
           ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod, ast.Pow: operator.pow,
           ast.LShift: operator.lshift, ast.RShift: operator.rshift, ast.BitAnd: operator.and_,
           ast.BitOr: operator.or_, ast.BitXor: operator.xor}
_UNARY: dict[type, Any] = {ast.Not: operator.not_, ast.USub: operator.neg, ast.UAdd: operator.pos,
                           ast.Invert: operator.invert}
_COMPARE = {ast.Eq: operator.eq, ast.NotEq: operator.ne, ast.Lt: operator.lt, ast.LtE: operator.le,
            ast.Gt: operator.gt, ast.GtE: operator.ge, ast.Is: operator.is_, ast.IsNot: operator.is_not,
            ast.In: lambda a, b: a in b, ast.NotIn: lambda a, b: a not in b}


class GlueError(Exception):
    """A check's comparison could not be evaluated (a failed probe, a bound exceeded, an unknown name)."""


def _size(value: object) -> int:
    if isinstance(value, range):
        return len(value)
    if isinstance(value, str | bytes | list | tuple | dict | set | frozenset):
        return len(value)
    return 0


def _bits(value: object) -> int:
    if isinstance(value, fractions.Fraction):
        return value.numerator.bit_length() + value.denominator.bit_length()
    return value.bit_length() if isinstance(value, int) else 0


def _guard_binop(op: type, left: object, right: object) -> None:
    if op is ast.Mult:
        for seq, times in ((left, right), (right, left)):
            if isinstance(times, int) and _size(seq) * max(times, 0) > MAX_LENGTH:
                raise GlueError("a repetition too long to compute")
        if _bits(left) + _bits(right) > MAX_BITS:
            raise GlueError("a product too large to compute")
    elif op is ast.Pow and isinstance(left, int | fractions.Fraction) and isinstance(right, int):
        if right > 0 and max(_bits(left), 1) * right > MAX_BITS and abs(left) != 1 and left != 0:
            raise GlueError("a power too large to compute")
    elif op is ast.LShift and isinstance(right, int) and right > MAX_BITS:
        raise GlueError("a shift too large to compute")


def _guard_call(fn: object, args: tuple, kwargs: dict) -> None:
    for arg in (*args, *kwargs.values()):
        if isinstance(arg, range) and len(arg) > MAX_LENGTH and fn is not len:
            raise GlueError("a range too long to compute with")
        if isinstance(arg, int) and fn in (math.factorial, math.comb, math.perm) and arg > 100_000:
            raise GlueError("an argument too large for " + getattr(fn, "__name__", "?"))
    if fn is pow and len(args) == 2:
        _guard_binop(ast.Pow, args[0], args[1])
    if fn in (str, repr) and args and _bits(args[0]) > 10_000 * 3.33:
        raise GlueError("an integer too large to write out")


class Glue:
    """Evaluates glue expressions; ``env`` maps the names of the tests the glue follows to values,
    ``values`` the probes' placeholders to what the sandboxes sent (decoded)."""

    def __init__(self, env: Namespace | collections.ChainMap, values: Namespace,
                 budget: list[int] | None = None, on_read: Callable[[str], None] | None = None) -> None:
        self.env = env
        self.values = values
        # Told each placeholder as it is read, in Python's order of evaluation (the harness then
        # rebinds the arguments that call changed in place, before the rest of the expression reads them).
        self.on_read = on_read
        # Comprehension turns left, shared by every Glue made from this one: nesting cannot multiply them.
        self.budget = budget if budget is not None else [MAX_TURNS]

    def eval(self, node: ast.expr) -> Any:
        method = getattr(self, "_" + type(node).__name__, None)
        if method is None:
            raise GlueError(f"cannot evaluate a {type(node).__name__} here")
        return method(node)

    def _Constant(self, node: ast.Constant) -> Any:
        return node.value

    def _Name(self, node: ast.Name) -> Any:
        if node.id in self.values:
            value = self.values[node.id]
            if self.on_read is not None:
                self.on_read(node.id)
        elif node.id in self.env:
            value = self.env[node.id]
        else:
            raise GlueError(f"name {node.id} is not defined")
        if isinstance(value, Failed):
            raise GlueError(value.why)
        return value

    def _items(self, nodes: list[ast.expr]) -> list:
        out: list = []
        for item in nodes:
            if isinstance(item, ast.Starred):
                value = self.eval(item.value)
                if _size(value) > MAX_LENGTH:
                    raise GlueError("a sequence too long to unpack")
                out.extend(value)
            else:
                out.append(self.eval(item))
        return out

    def _List(self, node: ast.List) -> list:
        return self._items(node.elts)

    def _Tuple(self, node: ast.Tuple) -> tuple:
        return tuple(self._items(node.elts))

    def _Set(self, node: ast.Set) -> set:
        return set(self._items(node.elts))

    def _Dict(self, node: ast.Dict) -> dict:
        out: dict = {}
        for key, value in zip(node.keys, node.values, strict=True):
            if key is None:
                out.update(self.eval(value))
            else:
                out[self.eval(key)] = self.eval(value)
        return out

    def _BinOp(self, node: ast.BinOp) -> Any:
        left, right = self.eval(node.left), self.eval(node.right)
        op = type(node.op)
        if op not in _BINOPS:
            raise GlueError(f"operator {op.__name__} is not evaluated here")
        _guard_binop(op, left, right)
        return _BINOPS[op](left, right)

    def _UnaryOp(self, node: ast.UnaryOp) -> Any:
        return _UNARY[type(node.op)](self.eval(node.operand))

    def _BoolOp(self, node: ast.BoolOp) -> Any:
        value: Any = None
        for item in node.values:
            value = self.eval(item)
            if isinstance(node.op, ast.And) and not value:
                return value
            if isinstance(node.op, ast.Or) and value:
                return value
        return value

    def _Compare(self, node: ast.Compare) -> bool:
        left = self.eval(node.left)
        result: Any = True
        for op, right_node in zip(node.ops, node.comparators, strict=True):
            right = self.eval(right_node)
            result = _COMPARE[type(op)](left, right)
            if not result:
                return result
            left = right
        return result

    def _turns(self, generators: list[ast.comprehension], scope: collections.ChainMap) -> Any:
        """A comprehension's turns over plain values: yields, per turn, the Glue of the innermost scope
        (one layer per ``for``, its names rebound each turn)."""
        if not generators:
            yield Glue(scope, self.values, self.budget, self.on_read)
            return
        gen = generators[0]
        items = Glue(scope, self.values, self.budget, self.on_read).eval(gen.iter)
        if _size(items) > MAX_LENGTH:
            raise GlueError("a sequence too long to iterate here")
        layer = scope.new_child()
        test = Glue(layer, self.values, self.budget, self.on_read)
        for item in items:
            self.budget[0] -= 1
            if self.budget[0] < 0:
                raise GlueError("comprehensions too long to compute here")
            _bind(layer, gen.target, item)
            if all(test.eval(c) for c in gen.ifs):
                yield from self._turns(generators[1:], layer)

    def _comprehension(self, node: ast.ListComp | ast.SetComp | ast.GeneratorExp) -> Any:
        scope = collections.ChainMap({}, self.env)
        return (inner.eval(node.elt) for inner in self._turns(node.generators, scope))

    def _ListComp(self, node: ast.ListComp) -> list:
        return list(self._comprehension(node))

    def _SetComp(self, node: ast.SetComp) -> set:
        return set(self._comprehension(node))

    def _GeneratorExp(self, node: ast.GeneratorExp) -> Any:
        # Lazy as Python's: ``any``/``all`` over it stop where they would in ``answer + tests``.
        return self._comprehension(node)

    def _DictComp(self, node: ast.DictComp) -> dict:
        scope = collections.ChainMap({}, self.env)
        return {inner.eval(node.key): inner.eval(node.value) for inner in self._turns(node.generators, scope)}

    def _IfExp(self, node: ast.IfExp) -> Any:
        return self.eval(node.body) if self.eval(node.test) else self.eval(node.orelse)

    def _Subscript(self, node: ast.Subscript) -> Any:
        return self.eval(node.value)[self.eval(node.slice)]

    def _Slice(self, node: ast.Slice) -> slice:
        def part(n: ast.expr | None) -> Any:
            return None if n is None else self.eval(n)

        return slice(part(node.lower), part(node.upper), part(node.step))

    def _Attribute(self, node: ast.Attribute) -> Any:
        base = self.eval(node.value)
        if isinstance(base, type(math)):
            if node.attr not in MODULE_ATTRS.get(base.__name__, ()):
                raise GlueError(f"{base.__name__}.{node.attr} is not evaluated here")
            return getattr(base, node.attr)
        if node.attr in PLAIN_ATTRS and type(base) in (int, float, complex, bool, fractions.Fraction, range):
            return getattr(base, node.attr)
        raise GlueError(f"attribute {node.attr} of a {type(base).__name__} is not evaluated here")

    def _lazy(self, every: bool, node: ast.Call) -> bool:
        if len(node.args) != 1 or not isinstance(node.args[0], ast.Tuple):
            raise GlueError("an unrolled all/any takes one tuple")
        for item in node.args[0].elts:
            if bool(self.eval(item)) != every:
                return not every
        return every

    def _Call(self, node: ast.Call) -> Any:
        if isinstance(node.func, ast.Name) and node.func.id in LAZY.values():
            return self._lazy(node.func.id == LAZY["all"], node)
        args = tuple(self._items(node.args))
        kwargs = {}
        for kw in node.keywords:
            if kw.arg is None:
                kwargs.update(self.eval(kw.value))
            else:
                kwargs[kw.arg] = self.eval(kw.value)
        func = node.func
        if isinstance(func, ast.Attribute):
            base = self.eval(func.value)
            if isinstance(base, type(math)):
                fn = self._Attribute(func)
            else:
                kind = type(base)
                if kind not in _METHODS or func.attr not in _METHODS[kind]:
                    raise GlueError(f"{kind.__name__}.{func.attr} is not evaluated here")
                if func.attr in ("join", "replace") and sum(_size(a) for a in (base, *args)) > MAX_LENGTH // 10:
                    raise GlueError("a string too long to compute with")
                if func.attr == "replace" and len(args) >= 2 and (
                        _size(base) + (_size(base) + 1) * _size(args[1]) > MAX_LENGTH):
                    raise GlueError("a string too long to compute")
                return getattr(kind, func.attr)(base, *args, **kwargs)
        else:
            fn = self.eval(func)
        if not (fn in GLUE_BUILTINS.values() or any(fn is getattr(m, a, None) for m in _MODULES.values()
                                                     for a in MODULE_ATTRS.get(m.__name__, ()))):
            raise GlueError(f"{getattr(fn, '__name__', type(fn).__name__)} is not called here")
        _guard_call(fn, args, kwargs)
        return fn(*args, **kwargs)


def _bind(scope: collections.ChainMap, target: ast.expr, value: Any) -> None:
    if isinstance(target, ast.Name):
        scope[target.id] = value
        return
    if not isinstance(target, ast.Tuple | ast.List) or any(isinstance(t, ast.Starred) for t in target.elts):
        raise GlueError(f"cannot bind a {type(target).__name__} here")
    items = list(value) if _size(value) <= MAX_LENGTH else []
    if len(items) != len(target.elts):
        raise GlueError("unpacking a value of another length")
    for part, item in zip(target.elts, items, strict=True):
        _bind(scope, part, item)


def module(name: str) -> Any:
    """The glue's own import of a module it may use (``math``...)."""
    return _MODULES[name]


def truth(value: Any) -> bool:
    """A check's verdict: Python's truth of a value the glue computed."""
    return bool(value)
