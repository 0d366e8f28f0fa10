"""Splitting an item's tests into what the answer computes and what the trusted side decides.

An assert-style test (``assert add(2, 3) == 5``, HumanEval's ``check(candidate)``)
is read with ``ast`` here, on the trusted side, and cut in three:

- **answer probes**: the calls into the answer (``add(2, 3)``), evaluated in the
  answer's sandbox. Their arguments cross as plain data when the trusted side
  can compute them (``[1, 2, 3]``), so the answer's program holds its inputs
  and never the expected side of a comparison;
- **tests probes**: what only the tests' own code computes (a helper they
  define, ``numpy.allclose``, ``unittest``'s ``assertEqual``), evaluated in a
  second sandbox that never runs a line of the answer, given the answer's
  values as plain data;
- **glue**: the comparison itself (``==``, ``<``, ``not``, ``abs``, ``len``,
  ``sorted``, ``math.isclose``...), evaluated by ``glue.py`` in this process on
  plain values, with Python's own semantics.

Loops and comprehensions over constant data are unrolled, one turn per value
(``all``/``any`` stopping where Python's would); a comprehension over the
answer's values whose body is glue is glue; the tests' helpers handed the
answer's function are inlined; an argument the answer may change in place is
read back after the call (``Probe.mutates``). A statement whose data the tests'
own code computes is planned again once ``testdata.py`` has computed it
(``Replacement``). What is left would need the answer's code and the test's
together (a loop over the answer's results holding asserts, a comprehension
over them calling code per element): it is *unjudgeable*, fails, and says so.

``plan_tests`` returns a ``Plan``: the steps in source order (setup
statements and checks) and the probes, each placed at its step.
"""

from __future__ import annotations

import ast
import builtins
import copy
from collections.abc import Sequence
from dataclasses import dataclass, field

from benchlab.evaluate.glue import GLUE_BUILTINS, LAZY, MODULE_ATTRS, PLAIN_ATTRS, PLAIN_METHODS, Glue, module

PLACEHOLDER = "__bl_"
# A loop over constant data with asserts in it is unrolled up to this many turns.
MAX_UNROLL = 500
# Builtins that run or reach code: never handed the answer's values in the tests' sandbox.
_CODE_BUILTINS = frozenset({"eval", "exec", "compile", "__import__", "open", "input", "breakpoint", "globals",
                            "locals", "vars", "getattr", "setattr", "delattr", "memoryview", "help"})
# Node types the glue evaluates (with their children).
_GLUE_NODES = (ast.List, ast.Tuple, ast.Set, ast.Dict, ast.BinOp, ast.UnaryOp, ast.BoolOp, ast.Compare,
               ast.IfExp, ast.Subscript, ast.Slice, ast.Starred)

GLUE, MODULE, TESTS, ANAME, POISON = "glue", "module", "tests", "aname", "poison"
# Builtins (and ``str.join``) that consume a generator whole: one handed a generator over constant
# data gets its elements. ``all``/``any`` over them stop where Python's would (glue.LAZY).
_CONSUMERS = frozenset({"all", "any", "sum", "list", "tuple", "set", "frozenset", "sorted", "min", "max",
                        "dict", "join"})
_IMMUTABLE = (str, bytes, int, float, complex, bool, tuple, frozenset, type(None), range)


class Unjudgeable(Exception):
    """This test's verdict cannot be computed apart from the answer's code."""


@dataclass
class Probe:
    """One expression evaluated in a sandbox. ``side`` is ``answer`` or ``tests``.

    ``inject`` maps placeholder names in ``source`` to glue expressions whose values
    the trusted side computes and sends as plain data.
    """

    pid: str
    side: str
    source: str
    step: int
    inject: dict[str, ast.expr] = field(default_factory=dict)
    bind: str = ""  # in the answer's sandbox: the names an assignment binds to the value
    # placeholder -> the tests' name it was read from, for arguments the call may change in place
    mutates: dict[str, str] = field(default_factory=dict)


@dataclass
class Step:
    """A statement of the tests, in source order.

    ``kind``: ``setup`` (a statement the trusted side may also follow: ``targets`` bound to
    ``glue``'s value, ``modules`` imported), ``check`` (``glue``'s truth, or for
    ``mode == "runs"`` that it evaluates), ``unjudgeable`` (``why``), or ``fails``
    (the tests' own code raised there: ``why``). ``test`` is the test
    it belongs to, None for top-level setup. ``in_answer``/``in_tests``: the source runs
    there too.
    """

    index: int
    kind: str
    test: int | None
    source: str = ""
    glue: ast.expr | None = None
    targets: ast.expr | None = None
    modules: dict[str, str] = field(default_factory=dict)
    mode: str = "truth"
    why: str = ""
    in_answer: bool = False
    in_tests: bool = False
    binds: frozenset[str] = frozenset()
    uses: frozenset[str] = frozenset()


@dataclass
class Replacement:
    """What stands for one top-level statement once the tests' own data is known (``testdata.py``):
    straight-line statements with that data as literals, and the error the tests' own code raised
    there, if it did."""

    statements: list[ast.stmt]
    raised: str = ""


@dataclass
class Plan:
    """The steps, the probes, how many tests, and the free names the glue takes for modules.

    ``unsplit``: the keys (test entry, top-level statement) of the statements holding a test
    that could not be split from the text alone. ``unrolled_over``: the tests' names a loop or
    comprehension was unrolled over, and the first step that did. ``answer_names``: the names of
    Python's builtins the tests' calls send to the answer (``entry.choices``).
    """

    steps: list[Step]
    probes: list[Probe]
    tests: int
    free_modules: dict[str, str]
    unsplit: frozenset[tuple[int, int]] = frozenset()
    unrolled_over: dict[str, int] = field(default_factory=dict)
    answer_names: frozenset[str] = frozenset()

    def probes_at(self, index: int) -> list[Probe]:
        return [p for p in self.probes if p.step == index]


def _bound_names(node: ast.AST) -> set[str]:
    """Names a statement binds at its own level (assignments, imports, defs, loop targets)."""
    names: set[str] = set()
    if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
        return {node.name}
    if isinstance(node, ast.Import | ast.ImportFrom):
        for alias in node.names:
            names.add((alias.asname or alias.name).split(".")[0])
        return names
    for sub in ast.walk(node):
        if isinstance(sub, ast.Name) and isinstance(sub.ctx, ast.Store | ast.Del):
            names.add(sub.id)
        elif isinstance(sub, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(sub.name)
        elif isinstance(sub, ast.Import | ast.ImportFrom):
            names |= {(a.asname or a.name).split(".")[0] for a in sub.names}
    return names


def _free_names(node: ast.AST) -> set[str]:
    """Names ``node`` reads that it does not bind itself (parameters and inner targets excluded)."""
    loaded: set[str] = set()
    local: set[str] = set()
    for sub in ast.walk(node):
        if isinstance(sub, ast.Name):
            (loaded if isinstance(sub.ctx, ast.Load) else local).add(sub.id)
        elif isinstance(sub, ast.arg):
            local.add(sub.arg)
        elif isinstance(sub, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) and sub is not node:
            local.add(sub.name)
    if isinstance(node, ast.Lambda | ast.ListComp | ast.SetComp | ast.DictComp | ast.GeneratorExp):
        return loaded - local
    if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
        return loaded - local
    return loaded - (local - _bound_names(node)) if isinstance(node, ast.stmt) else loaded - local


def literal(value: object) -> ast.expr | None:
    """``value`` as an expression the glue evaluates to an equal value of the same exact type;
    None where there is none (an object with methods, a type the glue does not build).
    What an unrolled loop's variable stands for, and the tests' own data once computed."""
    if value is None or type(value) in (bool, int, str, bytes):
        return ast.Constant(value)  # type: ignore[arg-type]
    if type(value) is float:
        if value != value or abs(value) == float("inf"):
            return ast.Call(ast.Name("float", ast.Load()), [ast.Constant(repr(value))], [])
        return ast.Constant(value)
    if type(value) is complex:
        real, imag = literal(value.real), literal(value.imag)
        return ast.Call(ast.Name("complex", ast.Load()), [real, imag], [])  # type: ignore[list-item]
    if type(value) in (list, tuple, set, frozenset):
        items = [literal(v) for v in value]  # type: ignore[attr-defined]
        if any(i is None for i in items):
            return None
        if type(value) is list:
            return ast.List(items, ast.Load())  # type: ignore[arg-type]
        if type(value) is tuple:
            return ast.Tuple(items, ast.Load())  # type: ignore[arg-type]
        display: list[ast.expr] = [ast.List(items, ast.Load())] if items else []  # type: ignore[arg-type]
        return ast.Call(ast.Name(type(value).__name__, ast.Load()), display, [])
    if type(value) is dict:
        keys = [literal(k) for k in value]  # type: ignore[attr-defined]
        values = [literal(v) for v in value.values()]  # type: ignore[attr-defined]
        if any(x is None for x in keys + values):
            return None
        return ast.Dict(keys, values)  # type: ignore[arg-type]
    return None


class _Replace(ast.NodeTransformer):
    """Replaces the names it is given, where read, by a copy of an expression."""

    def __init__(self, mapping: dict[str, ast.expr]) -> None:
        self.mapping = mapping

    def visit_Name(self, name: ast.Name) -> ast.expr:
        if name.id in self.mapping and isinstance(name.ctx, ast.Load):
            return copy.deepcopy(self.mapping[name.id])
        return name


def _contains_assert(node: ast.AST) -> bool:
    return any(isinstance(sub, ast.Assert) for sub in ast.walk(node))


class _Planner:
    def __init__(self, answer_names: frozenset[str] = frozenset()) -> None:
        self.answer_names = answer_names  # builtin names that are the answer's here, not Python's
        self.kinds: dict[str, str] = {}
        self.tainted_glue: set[str] = set()
        self.defs: dict[str, ast.FunctionDef] = {}
        self.modules: dict[str, str] = {}  # a name bound by the tests' import -> the module
        self.steps: list[Step] = []
        self.probes: list[Probe] = []
        self.closure: dict[int, set[str]] = {}  # step -> names an answer probe there needs from the tests
        self.free_modules: dict[str, str] = {}
        self.pure_values: dict[str, object] = {}  # the tests' names bound to constant data, known now
        self.computed: set[str] = set()  # the tests' names bound to data only their own code computes
        self.test = 0
        self.inlining = 0
        self.inlined = 0
        self.unrolled_over: dict[str, int] = {}  # a name the plan took turns from -> the first step that did
        self.top: tuple[int, int] = (0, 0)
        self.unsplit: set[tuple[int, int]] = set()
        self.notes: dict[tuple[int, int], str] = {}

    # -- names --------------------------------------------------------------------------------

    def kind(self, name: str) -> str:
        if name in self.kinds:
            return self.kinds[name]
        if name in self.answer_names:
            return "answer"
        if name in GLUE_BUILTINS:
            return "builtin"
        if name in vars(builtins):
            return TESTS
        if name in MODULE_ATTRS:
            return "free_module"
        return "answer"

    def is_tainted_name(self, name: str) -> bool:
        k = self.kind(name)
        return k in ("answer", ANAME, POISON) or (k == GLUE and name in self.tainted_glue)

    def tainted(self, node: ast.AST) -> bool:
        return any(self.is_tainted_name(n) for n in _free_names(node))

    def pure(self, node: ast.AST) -> bool:
        """Computable here before the answer runs: glue over literals and the tests' glue-bound names."""
        for sub in ast.walk(node):
            if isinstance(sub, ast.Name):
                k = self.kind(sub.id)
                if not (k in ("builtin", MODULE) or (k == GLUE and sub.id not in self.tainted_glue)):
                    return False
            elif isinstance(sub, ast.Call):
                if any(isinstance(a, ast.Lambda) for a in sub.args) or any(k.arg == "key" for k in sub.keywords):
                    return False
                f = sub.func
                if isinstance(f, ast.Name):
                    if self.kind(f.id) != "builtin":
                        return False
                elif isinstance(f, ast.Attribute):
                    if isinstance(f.value, ast.Name) and self.kind(f.value.id) == MODULE:
                        if f.attr not in MODULE_ATTRS.get(self.modules[f.value.id], ()):
                            return False
                    elif f.attr not in PLAIN_METHODS:
                        return False
                else:
                    return False
            elif isinstance(sub, ast.Attribute):
                if isinstance(sub.value, ast.Name) and self.kind(sub.value.id) == MODULE:
                    if sub.attr not in MODULE_ATTRS.get(self.modules[sub.value.id], ()):
                        return False
                elif sub.attr not in PLAIN_ATTRS and sub.attr not in PLAIN_METHODS:
                    return False
            elif not isinstance(sub, (*_GLUE_NODES, ast.Constant, ast.Call, ast.keyword, ast.expr_context,
                                      ast.operator, ast.unaryop, ast.boolop, ast.cmpop)):
                return False
        return True

    # -- probes -------------------------------------------------------------------------------

    def _probe(self, side: str, node: ast.expr, inject: dict[str, ast.expr] | None = None,
               mutates: dict[str, str] | None = None) -> ast.Name:
        pid = f"{PLACEHOLDER}{len(self.probes)}"
        self.probes.append(Probe(pid, side, ast.unparse(node), len(self.steps), inject or {}, mutates=mutates or {}))
        return ast.Name(pid, ast.Load())

    def tests_probe(self, node: ast.expr, inject: dict[str, ast.expr] | None = None) -> ast.Name:
        for name in _free_names(node):
            if self.kind(name) == "free_module":
                self.free_modules[name] = name
        return self._probe("tests", node, inject)

    def _answer_side(self, node: ast.expr) -> None:
        """``node`` runs in the answer's sandbox: it may read the answer's names and the tests' own."""
        needed = self.closure.setdefault(len(self.steps), set())
        for name in _free_names(node):
            k = self.kind(name)
            if k == POISON:
                raise Unjudgeable(f"{name} is computed from the answer in a way that cannot be split")
            if k == GLUE and name in self.tainted_glue:
                raise Unjudgeable(f"{name} is judged here from the answer's values and cannot be sent back to it")
            if k == TESTS and name in self.computed:
                # Computed again in the answer's sandbox, it could differ from the tests' own (random, time).
                raise Unjudgeable(f"{name} is data the tests compute, which cannot be sent to the answer")
            if k in (GLUE, TESTS, MODULE):
                needed.add(name)

    def answer_call(self, node: ast.Call) -> ast.Name:
        """A call into the answer: its plain-data arguments cross as values, the rest as source."""
        node = copy.deepcopy(node)
        inject: dict[str, ast.expr] = {}
        mutates: dict[str, str] = {}

        def place(arg: ast.expr) -> ast.expr:
            if not self.tainted(arg) and self.pure(arg):
                name = f"{PLACEHOLDER}{len(self.probes)}_{len(inject)}"
                inject[name] = arg
                if isinstance(arg, ast.Name) and self.kind(arg.id) == GLUE and not isinstance(
                        self.pure_values.get(arg.id, []), _IMMUTABLE):
                    # The call may change it in place: the tests read it afterwards as the answer left it.
                    mutates[name] = arg.id
                return ast.Name(name, ast.Load())
            self._answer_side(arg)
            return arg

        node.args = [ast.Starred(place(a.value), ast.Load()) if isinstance(a, ast.Starred) else place(a)
                     for a in node.args]
        for kw in node.keywords:
            kw.value = place(kw.value)
        self._answer_side(node.func)
        return self._probe("answer", node, inject, mutates)

    def answer_value(self, node: ast.expr) -> ast.Name:
        self._answer_side(node)
        return self._probe("answer", node)

    def tests_call(self, node: ast.Call) -> tuple[ast.expr, bool]:
        """A call of the tests' own code: in the tests' sandbox, the answer's values given as data."""
        if not self.tainted(node):
            return self.tests_probe(node), False
        func = node.func
        if isinstance(func, ast.Name) and func.id in _CODE_BUILTINS:
            raise Unjudgeable(f"{func.id}() would run the answer's values as code")
        if self.tainted(func):
            raise Unjudgeable("a call whose function comes from the answer")
        node = copy.deepcopy(node)
        inject: dict[str, ast.expr] = {}

        def place(arg: ast.expr) -> ast.expr:
            if not self.tainted(arg):
                return arg
            glue, _ = self.expr(arg)
            name = f"{PLACEHOLDER}{len(self.probes)}_{len(inject)}"
            inject[name] = glue
            return ast.Name(name, ast.Load())

        node.args = [ast.Starred(place(a.value), ast.Load()) if isinstance(a, ast.Starred) else place(a)
                     for a in node.args]
        for kw in node.keywords:
            kw.value = place(kw.value)
        return self.tests_probe(node, inject), False

    # -- expressions --------------------------------------------------------------------------

    def expr(self, node: ast.expr) -> tuple[ast.expr, bool]:
        """The glue form of ``node`` (probes replaced by placeholders) and whether it depends on the answer."""
        if isinstance(node, ast.Constant):
            return node, False
        if isinstance(node, ast.Name):
            return self.name(node)
        if isinstance(node, ast.Call):
            return self.call(node)
        if isinstance(node, ast.Attribute):
            return self.attribute(node)
        if isinstance(node, _GLUE_NODES):
            tainted = False
            new = copy.copy(node)
            for fname, value in ast.iter_fields(node):
                if isinstance(value, ast.expr):
                    child, t = self.expr(value)
                    tainted |= t
                    setattr(new, fname, child)
                elif isinstance(value, list):
                    items = []
                    for item in value:
                        if isinstance(item, ast.expr):
                            item, t = self.expr(item)
                            tainted |= t
                        items.append(item)
                    setattr(new, fname, items)
            return new, tainted
        if isinstance(node, ast.ListComp | ast.SetComp | ast.DictComp) and (
                unrolled := self.unroll_comprehension(node)) is not None:
            return self.expr(unrolled)
        if isinstance(node, ast.ListComp | ast.SetComp | ast.DictComp | ast.GeneratorExp) and self.tainted(node):
            return self.glue_comprehension(node)
        if self.tainted(node):
            raise Unjudgeable(f"a {type(node).__name__} over the answer's values")
        return self.tests_probe(node), False

    def name(self, node: ast.Name) -> tuple[ast.expr, bool]:
        k = self.kind(node.id)
        if k == POISON:
            raise Unjudgeable(f"{node.id} is computed from the answer in a way that cannot be split")
        if k in (GLUE, ANAME):
            return node, k == ANAME or node.id in self.tainted_glue
        if k in (MODULE, "builtin"):
            return node, False
        if k == "free_module":
            self.free_modules[node.id] = node.id
            return node, False
        if k == TESTS:
            return self.tests_probe(node), False
        return self.answer_value(node), True

    def _subject(self, node: ast.expr) -> bool:
        """``node`` names the answer's own code: a name of the answer's, or a call or attribute of one."""
        while isinstance(node, ast.Call | ast.Attribute):
            node = node.func if isinstance(node, ast.Call) else node.value
        return isinstance(node, ast.Name) and self.kind(node.id) in ("answer", ANAME)

    def call(self, node: ast.Call) -> tuple[ast.expr, bool]:
        func = node.func
        takes_code = any(isinstance(a, ast.Lambda) for a in node.args) or any(
            k.arg == "key" or isinstance(k.value, ast.Lambda) for k in node.keywords)
        if isinstance(func, ast.Name):
            k = self.kind(func.id)
            if k == "builtin" and not takes_code:
                return self.glue_call(node)
            if k in (TESTS, POISON) and (k == POISON or self.tainted(node)):
                inlined = self.inline_expr(node)
                if inlined is not None:
                    self.inlining += 1
                    try:
                        return self.expr(inlined)
                    finally:
                        self.inlining -= 1
            if k in ("answer", ANAME):
                return self.answer_call(node), True
            if k == POISON:
                raise Unjudgeable(f"{func.id} is computed from the answer in a way that cannot be split")
            if k == GLUE and func.id in self.tainted_glue:
                raise Unjudgeable(f"{func.id} comes from the answer")
            return self.tests_call(node)
        if isinstance(func, ast.Attribute):
            base = func.value
            if isinstance(base, ast.Name) and self.kind(base.id) in (MODULE, "free_module"):
                module = self.modules.get(base.id, base.id)
                if func.attr in MODULE_ATTRS.get(module, ()) and not takes_code:
                    if self.kind(base.id) == "free_module":
                        self.free_modules[base.id] = base.id
                    return self.glue_call(node)
                if self.kind(base.id) == "free_module":
                    raise Unjudgeable(f"{base.id}.{func.attr} of a module only the answer imported")
                return self.tests_call(node)
            if func.attr in PLAIN_METHODS and not takes_code:
                return self.glue_call(node)
            if self._subject(base):
                return self.answer_call(node), True
            return self.tests_call(node)
        if self._subject(func):
            return self.answer_call(node), True
        return self.tests_call(node)

    def glue_call(self, node: ast.Call) -> tuple[ast.expr, bool]:
        lazy = ""
        if isinstance(node.func, ast.Name | ast.Attribute) and any(
                isinstance(a, ast.GeneratorExp) for a in node.args):
            consumer = node.func.id if isinstance(node.func, ast.Name) else node.func.attr
            if consumer in _CONSUMERS:
                # A generator a builtin consumes whole: its elements, one expression per turn.
                node = copy.copy(node)
                node.args = [self.unroll_comprehension(a) or a if isinstance(a, ast.GeneratorExp) else a
                             for a in node.args]
                if consumer in ("all", "any") and len(node.args) == 1 and isinstance(node.args[0], ast.Tuple):
                    lazy = LAZY[consumer]
        new = copy.copy(node)
        tainted = False
        if isinstance(node.func, ast.Attribute):
            base, t = self.expr(node.func.value)
            tainted |= t
            new.func = ast.Attribute(base, node.func.attr, ast.Load())
        args: list[ast.expr] = []
        for arg in node.args:
            if isinstance(arg, ast.Starred):
                value, t = self.expr(arg.value)
                args.append(ast.Starred(value, ast.Load()))
            else:
                value, t = self.expr(arg)
                args.append(value)
            tainted |= t
        keywords = []
        for kw in node.keywords:
            value, t = self.expr(kw.value)
            keywords.append(ast.keyword(kw.arg, value))
            tainted |= t
        new.args, new.keywords = args, keywords
        if lazy:
            new.func = ast.Name(lazy, ast.Load())
        return new, tainted

    def attribute(self, node: ast.Attribute) -> tuple[ast.expr, bool]:
        base = node.value
        if isinstance(base, ast.Name) and self.kind(base.id) in (MODULE, "free_module"):
            module = self.modules.get(base.id, base.id)
            if node.attr in MODULE_ATTRS.get(module, ()):
                if self.kind(base.id) == "free_module":
                    self.free_modules[base.id] = base.id
                return node, False
            if self.kind(base.id) == "free_module":
                raise Unjudgeable(f"{base.id}.{node.attr} of a module only the answer imported")
            return self.tests_probe(node), False
        if node.attr in PLAIN_ATTRS:
            value, t = self.expr(base)
            return ast.Attribute(value, node.attr, ast.Load()), t
        if self._subject(base):
            return self.answer_value(node), True
        if self.tainted(node):
            raise Unjudgeable(f"attribute {node.attr} of a value computed from the answer")
        return self.tests_probe(node), False

    # -- statements ---------------------------------------------------------------------------

    def add_step(self, step: Step) -> Step:
        if step.kind == "unjudgeable" and self.top[0] >= 0:
            self.unsplit.add(self.top)
            if self.top in self.notes:
                step.why += f" ({self.notes[self.top]})"
        self.steps.append(step)
        return step

    def setup(self, stmt: ast.stmt, test: int | None) -> None:
        index = len(self.steps)
        source = ast.unparse(stmt)
        binds = frozenset(_bound_names(stmt))
        uses = frozenset(_free_names(stmt))
        if isinstance(stmt, ast.Import | ast.ImportFrom):
            modules: dict[str, str] = {}
            for alias in stmt.names:
                bound = (alias.asname or alias.name).split(".")[0]
                if isinstance(stmt, ast.Import) and alias.name in MODULE_ATTRS:
                    self.kinds[bound] = MODULE
                    self.modules[bound] = alias.name
                    modules[bound] = alias.name
                else:
                    # ``from m import f`` and every other module: the tests' sandbox computes with them.
                    self.kinds[bound] = TESTS
                self.computed.discard(bound)
            self.add_step(Step(index, "setup", test, source, modules=modules, in_answer=True, in_tests=True,
                               binds=binds, uses=uses))
            return
        tainted = self.tainted(stmt)
        targets = stmt.targets[0] if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 else None
        simple = targets is not None and all(
            isinstance(t, ast.Name) for t in (targets.elts if isinstance(targets, ast.Tuple | ast.List) else [targets]))
        for name in binds:
            self.defs.pop(name, None)
        if isinstance(stmt, ast.FunctionDef):
            # Kept even when it reads the answer's names (HumanEval's ``check`` calling the function by
            # its own name): a call of it is inlined, and the split decides on its body.
            self.defs[stmt.name] = stmt
        if simple and isinstance(stmt, ast.Assign) and (tainted or self.pure(stmt.value)):
            try:
                glue, value_tainted = self.expr(stmt.value)
            except Unjudgeable:
                glue = None
                self.probes = [p for p in self.probes if p.step != index]
            if glue is not None:
                last = self.probes[-1] if self.probes else None
                pure_answer = (value_tainted and isinstance(glue, ast.Name) and last is not None
                               and last.pid == glue.id and last.side == "answer" and last.step == index)
                if pure_answer and last is not None and targets is not None:
                    last.bind = ast.unparse(targets)
                self.add_step(Step(index, "setup", test, source, glue=glue, targets=targets,
                                   in_tests=not value_tainted, binds=binds, uses=uses))
                for name in binds:
                    self.pure_values.pop(name, None)
                if not value_tainted and isinstance(targets, ast.Name):
                    try:
                        self.pure_values[targets.id] = self.constant(stmt.value)
                    except Exception:  # noqa: BLE001 - not known before the run: the walk computes it
                        pass
                for name in binds:
                    self.kinds[name] = ANAME if pure_answer else GLUE
                    self.computed.discard(name)
                    if value_tainted:
                        self.tainted_glue.add(name)
                    else:
                        self.tainted_glue.discard(name)
                return
        for name in binds:
            self.pure_values.pop(name, None)
        # A statement the glue does not follow: the tests' sandbox runs it when it needs nothing of the answer.
        self.add_step(Step(index, "setup", test, source, in_tests=not tainted, binds=binds, uses=uses))
        definition = isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)
        for name in binds:
            self.kinds[name] = POISON if tainted else TESTS
            self.tainted_glue.discard(name)
            if definition:
                self.computed.discard(name)
            else:
                self.computed.add(name)

    def check(self, node: ast.expr, test: int, mode: str) -> None:
        index = len(self.steps)
        try:
            glue, _ = self.expr(node)
        except Unjudgeable as exc:
            self.probes = [p for p in self.probes if p.step != index]
            self.add_step(Step(index, "unjudgeable", test, why=str(exc)))
            return
        self.add_step(Step(index, "check", test, glue=glue, mode=mode))

    def statement(self, stmt: ast.stmt, test: int | None) -> None:
        """One statement: a check (an assert, or a call the test runs) or setup."""
        if isinstance(stmt, ast.Assert):
            self.check(stmt.test, test if test is not None else self.new_test(), "truth")
        elif isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant):
            return  # a docstring
        elif isinstance(stmt, ast.Expr):
            own = test if test is not None else self.new_test()
            inlined = self.inline(stmt.value)
            if inlined is None:
                self.check(stmt.value, own, "runs")
            else:
                for inner in inlined:
                    self.statement(inner, own)
        elif isinstance(stmt, ast.For) and _contains_assert(stmt) and (turns := self.unroll(stmt)) is not None:
            own = test if test is not None else self.new_test()
            for inner in turns:
                self.statement(inner, own)
        elif not isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) and (
                _contains_assert(stmt) or (isinstance(stmt, ast.Raise) and test is not None)):
            own = test if test is not None else self.new_test()
            self.add_step(Step(len(self.steps), "unjudgeable", own,
                               why=f"a {type(stmt).__name__.lower()} statement holding asserts"))
        else:
            self.setup(stmt, test)

    def constant(self, node: ast.expr, unrolls: bool = False) -> object:
        """The value of a pure expression over constants and the tests' constant names, computed now.
        ``unrolls``: the plan takes turns from it, which holds while the answer changes none of its names."""
        names = {n for n in _free_names(node)}
        if not self.pure(node) or not names <= set(self.pure_values) | set(GLUE_BUILTINS) | set(self.modules):
            raise ValueError("not constant")
        if unrolls:
            for name in names & set(self.pure_values):
                self.unrolled_over.setdefault(name, len(self.steps))
        env: dict[str, object] = {**GLUE_BUILTINS, **{n: module(m) for n, m in self.modules.items()}}
        env.update(self.pure_values)
        return Glue(env, {}).eval(node)

    def unroll(self, loop: ast.For) -> list[ast.stmt] | None:
        """A ``for`` loop over constant data, as its turns: the body with the loop's names replaced by
        each value's literal. None where it cannot be (a ``break``, an ``else``, a value with no literal)."""
        if loop.orelse or any(isinstance(s, ast.Break | ast.Continue) for s in ast.walk(loop)):
            return None
        targets = loop.target.elts if isinstance(loop.target, ast.Tuple | ast.List) else [loop.target]
        if not all(isinstance(t, ast.Name) for t in targets):
            return None
        names = [t.id for t in targets if isinstance(t, ast.Name)]
        if any(isinstance(s, ast.Name) and s.id in names and not isinstance(s.ctx, ast.Load)
               for stmt in loop.body for s in ast.walk(stmt)):
            return None
        try:
            values = list(self.constant(loop.iter, unrolls=True))  # type: ignore[call-overload]
        except Exception:  # noqa: BLE001 - not constant data: the loop stays whole
            return None
        if len(values) > MAX_UNROLL:
            return None
        turns: list[ast.stmt] = []
        for value in values:
            parts = [value] if len(names) == 1 and not isinstance(loop.target, ast.Tuple | ast.List) else value
            try:
                literals = [literal(v) for v in parts]
            except TypeError:
                return None
            if len(literals) != len(names) or any(lit is None for lit in literals):
                return None
            replace = _Replace(dict(zip(names, literals, strict=True)))  # type: ignore[arg-type]
            turns += [ast.fix_missing_locations(replace.visit(copy.deepcopy(s))) for s in loop.body]
        return turns

    def unroll_comprehension(self, node: ast.expr) -> ast.expr | None:
        """A comprehension over constant data as a display of its elements (a generator as a tuple),
        each with the comprehension's names replaced by that turn's literals; None where it cannot be."""
        if not isinstance(node, ast.ListComp | ast.SetComp | ast.DictComp | ast.GeneratorExp):
            return None
        elements: list[ast.expr] = []
        values: list[ast.expr] = []

        def turn(generators: list[ast.comprehension], mapping: dict[str, ast.expr]) -> None:
            if not generators:
                replace = _Replace(mapping)
                if isinstance(node, ast.DictComp):
                    elements.append(replace.visit(copy.deepcopy(node.key)))
                    values.append(replace.visit(copy.deepcopy(node.value)))
                else:
                    elements.append(replace.visit(copy.deepcopy(node.elt)))
                if len(elements) > MAX_UNROLL:
                    raise ValueError("too many turns")
                return
            gen = generators[0]
            targets = gen.target.elts if isinstance(gen.target, ast.Tuple | ast.List) else [gen.target]
            if gen.is_async or not all(isinstance(t, ast.Name) for t in targets):
                raise ValueError("not a plain comprehension")
            names = [t.id for t in targets if isinstance(t, ast.Name)]
            iterable = _Replace(mapping).visit(copy.deepcopy(gen.iter))
            items = list(self.constant(iterable, unrolls=True))  # type: ignore[call-overload]
            if len(items) > MAX_UNROLL:
                raise ValueError("too many turns")
            for item in items:
                parts = [item] if not isinstance(gen.target, ast.Tuple | ast.List) else list(item)
                literals = [literal(v) for v in parts]
                if len(literals) != len(names) or any(lit is None for lit in literals):
                    raise ValueError("a value with no literal")
                inner: dict[str, ast.expr] = {**mapping, **dict(zip(names, literals, strict=True))}  # type: ignore[arg-type]
                if all(self.constant(_Replace(inner).visit(copy.deepcopy(c))) for c in gen.ifs):
                    turn(generators[1:], inner)

        try:
            turn(list(node.generators), {})
        except Exception:  # noqa: BLE001 - not over constant data: the comprehension stays whole
            return None
        if isinstance(node, ast.DictComp):
            return ast.fix_missing_locations(ast.Dict(elements, values))  # type: ignore[arg-type]
        if isinstance(node, ast.SetComp):
            return ast.fix_missing_locations(ast.Set(elements) if elements else ast.Call(
                ast.Name("set", ast.Load()), [], []))
        kind = ast.List if isinstance(node, ast.ListComp) else ast.Tuple
        return ast.fix_missing_locations(kind(elements, ast.Load()))

    def glue_comprehension(self, node: ast.ListComp | ast.SetComp | ast.DictComp | ast.GeneratorExp,
                           ) -> tuple[ast.expr, bool]:
        """A comprehension over the answer's values whose body is glue alone (``all(x > 0 for x in f(3))``):
        evaluated here, over the data; one whose body needs code per element is unjudgeable."""
        generators = node.generators
        if any(g.is_async for g in generators):
            raise Unjudgeable("an async comprehension")
        first, tainted = self.expr(generators[0].iter)
        targets = {n for g in generators for n in _bound_names(g.target)}
        saved = {n: self.kinds.get(n) for n in targets}
        saved_tainted = targets & self.tainted_glue
        probes = len(self.probes)
        try:
            for name in targets:
                self.kinds[name] = GLUE
                self.tainted_glue.add(name)
            new = copy.copy(node)
            new.generators = []
            for i, gen in enumerate(generators):
                iterable = first if i == 0 else self.expr(gen.iter)[0]
                ifs = [self.expr(c)[0] for c in gen.ifs]
                new.generators.append(ast.comprehension(gen.target, iterable, ifs, 0))
            if isinstance(new, ast.DictComp):
                new.key, new.value = self.expr(node.key)[0], self.expr(node.value)[0]  # type: ignore[union-attr]
            else:
                new.elt = self.expr(node.elt)[0]  # type: ignore[union-attr]
            if len(self.probes) != probes:
                raise Unjudgeable(f"a {type(node).__name__} over the answer's values that calls code per element")
        finally:
            for name, kind in saved.items():
                if kind is None:
                    self.kinds.pop(name, None)
                else:
                    self.kinds[name] = kind
            self.tainted_glue -= targets - saved_tainted
        return new, True

    def inline(self, node: ast.expr) -> list[ast.stmt] | None:
        """HumanEval's ``check(candidate)``: the body of the tests' ``check`` with its parameters replaced."""
        fn = self.helper(node)
        if fn is None or any(isinstance(sub, ast.Return | ast.Yield | ast.YieldFrom | ast.Global | ast.Nonlocal)
                             for sub in ast.walk(fn)):
            return None
        assert isinstance(node, ast.Call)
        rename = _Replace(dict(zip([a.arg for a in fn.args.args], node.args, strict=True)))
        return [rename.visit(copy.deepcopy(s)) for s in fn.body]

    def helper(self, node: ast.expr) -> ast.FunctionDef | None:
        """The tests' own function ``node`` calls, where its call can be replaced by its body."""
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in self.defs
                and self.kinds.get(node.func.id) in (TESTS, POISON) and not node.keywords):
            return None
        fn = self.defs[node.func.id]
        if (fn.args.vararg or fn.args.kwarg or fn.args.kwonlyargs or fn.args.defaults or fn.decorator_list
                or fn.args.posonlyargs or len(fn.args.args) != len(node.args)
                or any(isinstance(a, ast.Starred) for a in node.args)):
            return None
        return fn

    def inline_expr(self, node: ast.Call) -> ast.expr | None:
        """A helper handed the answer's function whose body is one ``return``: the returned expression
        with its parameters replaced (each argument a name, a constant or a lambda, so nothing runs twice)."""
        fn = self.helper(node)
        if fn is None or self.inlining > 20 or self.inlined > MAX_UNROLL:
            return None
        self.inlined += 1  # helpers calling helpers twice each: bounded in all, not only in depth
        body = [s for s in fn.body if not (isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant))]
        if len(body) != 1 or not isinstance(body[0], ast.Return) or body[0].value is None:
            return None
        if not all(isinstance(a, ast.Name | ast.Constant | ast.Lambda) for a in node.args):
            return None
        inner = {n for n in _free_names(fn) if n not in {a.arg for a in fn.args.args}}
        if any(isinstance(a, ast.Name) and a.id in inner for a in node.args):
            return None  # a parameter replaced by a name the body also reads freely: leave it alone
        rename = _Replace(dict(zip([a.arg for a in fn.args.args], node.args, strict=True)))
        return ast.fix_missing_locations(rename.visit(copy.deepcopy(body[0].value)))

    def new_test(self) -> int:
        self.test += 1
        return self.test - 1


def plan_tests(tests: str | Sequence[str], replacements: dict[tuple[int, int], Replacement] | None = None,
               notes: dict[tuple[int, int], str] | None = None, answer_names: frozenset[str] = frozenset()
               ) -> Plan:
    """The plan of an item's tests (a string of statements, or a list with one test per entry).

    In a string each top-level ``assert`` and expression statement is a test; the
    other statements are setup. Tests that do not parse are one unjudgeable test.
    ``replacements`` (from ``testdata.rewrite``) stand for the top-level statements they
    are keyed by, in the same test; ``notes`` say why a statement has none. ``answer_names``: names
    of Python's builtins that are the answer's in these tests (a call of one is an answer probe).
    """
    planner = _Planner(answer_names)
    planner.notes = dict(notes or {})
    sources = [tests] if isinstance(tests, str) else [str(t) for t in tests]
    for si, source in enumerate(sources):
        try:
            tree = ast.parse(source)
        except SyntaxError as exc:
            planner.top = (-1, -1)
            planner.add_step(Step(len(planner.steps), "unjudgeable", planner.new_test(),
                                  why=f"the tests do not parse: {exc.msg} (line {exc.lineno})"))
            continue
        own = None if isinstance(tests, str) else planner.new_test()
        for ti, stmt in enumerate(tree.body):
            planner.top = (si, ti)
            replacement = (replacements or {}).get((si, ti))
            if replacement is None:
                planner.statement(stmt, own)
                continue
            test = own if own is not None else planner.new_test()
            for inner in replacement.statements:
                planner.statement(inner, test)
            if replacement.raised:
                planner.add_step(Step(len(planner.steps), "fails", test,
                                      why=f"{replacement.raised} in the tests' own code"))
    if planner.test == 0:
        planner.top = (-1, -1)
        planner.add_step(Step(len(planner.steps), "unjudgeable", planner.new_test(), why="the tests hold no test"))
    _place_answer_setup(planner)
    return Plan(planner.steps, planner.probes, planner.test, planner.free_modules, frozenset(planner.unsplit),
                planner.unrolled_over, answer_names)


def _place_answer_setup(planner: _Planner) -> None:
    """The tests' statements the answer's sandbox runs: imports, and what a call into the answer
    is handed as source (a function of the tests', a lambda's free names), with their own needs."""
    needed: set[str] = set()
    for step in reversed(planner.steps):
        needed |= planner.closure.get(step.index, set())
        if step.kind != "setup" or not step.in_tests:
            continue
        if step.modules or step.source.startswith(("import ", "from ")) or step.binds & needed:
            step.in_answer = True
            needed |= set(step.uses)
