"""The tests' own data, computed before the split: a pre-pass in the tests' sandbox.

Some tests compute the data they hand the answer (HumanEval/32 draws
coefficients from ``random.Random(42)``), loop over data they computed, or
wrap their checks in a helper (``check(candidate)``) whose body mixes both.
``testplan.py`` cannot split such a statement from the text alone: the value of
``coeffs`` is not known until the tests' code has run. This module runs it.

1. ``expand`` inlines the tests' statement-level helpers (``check(candidate)``)
   and describes each top-level statement as a tree of statements, each with the
   names it reads and binds.
2. ``program`` is the **tests' sandbox**'s program (never a line of the answer):
   it walks those statements in order, as Python would, keeping a set of the
   names that depend on the answer (names the tests never bound, and what is
   computed from them, and what was handed to the answer, which may change it in
   place). A statement that depends on none of them runs there; ``for``/``while``
   and ``if`` over the tests' own data run there too, turn by turn; every other
   statement (and every ``assert``) is *recorded* instead of run: its position,
   with the plain-data values of the tests' names it reads at that moment.
3. ``rewrite`` turns the record into straight-line statements: for each recorded
   statement, ``name = <literal>`` for each value that changed, then the statement.
   ``testplan.plan_tests`` splits those as it splits any test: the literals cross
   to the answer as arguments, the comparisons stay on the trusted side.

What the tests' sandbox sends is data only (``plain.py``); the statements the
split sees are the tests' own, in the order they ran. A name a recorded
statement reads that is not plain data (an object with methods) cannot be
written as a literal: that statement keeps the old verdict (it fails, with why).
"""

from __future__ import annotations

import ast
import copy
import json
from collections.abc import Sequence
from dataclasses import dataclass, field

from benchlab.evaluate import plain
from benchlab.evaluate.testplan import Replacement, _bound_names, _free_names, _Replace, literal
from benchlab.json_types import JsonObject

# Bounds on the pre-pass: statements recorded, loop turns walked.
MAX_RECORDED = 5000
MAX_TURNS = 200_000

Key = tuple[int, int]  # (test entry, top-level statement)


@dataclass
class Top:
    """One top-level statement of the tests: its key, and its statements after inlining helpers."""

    key: Key
    statements: list[ast.stmt]


@dataclass
class Expanded:
    """The tests as the pre-pass walks them: the tops, and every statement by its number."""

    tops: list[Top]
    numbered: list[ast.stmt] = field(default_factory=list)


def _passes(stmt: ast.AST) -> set[str]:
    """Names handed whole to a call: what the callee may change in place."""
    names: set[str] = set()
    for sub in ast.walk(stmt):
        if isinstance(sub, ast.Call):
            names |= {a.id for a in sub.args if isinstance(a, ast.Name)}
            names |= {k.value.id for k in sub.keywords if isinstance(k.value, ast.Name)}
            if isinstance(sub.func, ast.Attribute) and isinstance(sub.func.value, ast.Name):
                names.add(sub.func.value.id)
    return names


def _inlinable(fn: ast.FunctionDef, call: ast.Call) -> bool:
    params = [a.arg for a in fn.args.args]
    if (fn.args.vararg or fn.args.kwarg or fn.args.kwonlyargs or fn.args.defaults or fn.args.posonlyargs
            or fn.decorator_list or call.keywords or len(params) != len(call.args)
            or any(isinstance(a, ast.Starred) for a in call.args)):
        return False
    for sub in ast.walk(fn):
        if isinstance(sub, ast.Return | ast.Yield | ast.YieldFrom | ast.Global | ast.Nonlocal):
            return False
        if isinstance(sub, ast.Name) and sub.id in params and not isinstance(sub.ctx, ast.Load):
            return False
    return True


def _expand(stmt: ast.stmt, defs: dict[str, ast.FunctionDef], depth: int = 0) -> list[ast.stmt]:
    """``stmt``, with a call of the tests' own helper (as a statement) replaced by its body."""
    if (depth < 10 and isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call)
            and isinstance(stmt.value.func, ast.Name) and stmt.value.func.id in defs
            and _inlinable(defs[stmt.value.func.id], stmt.value)):
        fn = defs[stmt.value.func.id]
        rename = _Replace(dict(zip([a.arg for a in fn.args.args], stmt.value.args, strict=True)))
        body = [ast.fix_missing_locations(rename.visit(copy.deepcopy(s))) for s in fn.body]
        return [inner for s in body for inner in _expand(s, defs, depth + 1)]
    if isinstance(stmt, ast.For | ast.While | ast.If):
        stmt = copy.copy(stmt)
        stmt.body = [inner for s in stmt.body for inner in _expand(s, defs, depth)]
        stmt.orelse = [inner for s in stmt.orelse for inner in _expand(s, defs, depth)]
    return [stmt]


def expand(tests: str | Sequence[str]) -> Expanded:
    """The tests' top-level statements, keyed as ``plan_tests`` keys them, helpers inlined."""
    sources = [tests] if isinstance(tests, str) else [str(t) for t in tests]
    expanded = Expanded([])
    defs: dict[str, ast.FunctionDef] = {}
    for si, source in enumerate(sources):
        try:
            tree = ast.parse(source)
        except SyntaxError:
            continue
        for ti, stmt in enumerate(tree.body):
            expanded.tops.append(Top((si, ti), _expand(stmt, defs)))
            for name in _bound_names(stmt):
                defs.pop(name, None)
            if isinstance(stmt, ast.FunctionDef):
                defs[stmt.name] = stmt
    return expanded


def _describe(stmt: ast.stmt, numbered: list[ast.stmt]) -> dict:
    """The tree the tests' sandbox walks: what each statement is, reads, binds and hands to calls."""
    number = len(numbered)
    numbered.append(stmt)
    node: dict = {"i": number, "uses": sorted(_free_names(stmt)), "binds": sorted(_bound_names(stmt)),
                  "passes": sorted(_passes(stmt)), "src": ast.unparse(stmt)}
    loops_alone = not any(isinstance(s, ast.Break | ast.Continue) for s in ast.walk(stmt))
    if isinstance(stmt, ast.Import | ast.ImportFrom | ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
        node["k"] = "code"
    elif isinstance(stmt, ast.Assert):
        node["k"] = "check"
    elif isinstance(stmt, ast.For) and not stmt.orelse and loops_alone:
        node.update(k="for", target=ast.unparse(stmt.target), tnames=sorted(_bound_names(stmt.target)),
                    iter=ast.unparse(stmt.iter), iuses=sorted(_free_names(stmt.iter)),
                    body=[_describe(s, numbered) for s in stmt.body])
    elif isinstance(stmt, ast.While) and not stmt.orelse and loops_alone:
        node.update(k="while", test=ast.unparse(stmt.test), tuses=sorted(_free_names(stmt.test)),
                    body=[_describe(s, numbered) for s in stmt.body])
    elif isinstance(stmt, ast.If) and loops_alone:
        node.update(k="if", test=ast.unparse(stmt.test), tuses=sorted(_free_names(stmt.test)),
                    body=[_describe(s, numbered) for s in stmt.body],
                    orelse=[_describe(s, numbered) for s in stmt.orelse])
    else:
        node["k"] = "simple"
    return node


# The tests' sandbox's program: plain.py's functions, then this walker, then the tree.
_RECORDER = r'''

def _record(tree, max_recorded, max_turns, answers):
    import builtins, json, os
    out = os.dup(1)
    os.dup2(os.open(os.devnull, os.O_WRONLY), 1)
    ns = {"__name__": "__main__", "__builtins__": __builtins__}
    tainted = set(answers)  # builtin names that are the answer's here: never run with Python's
    sent = {}
    events, raised = [], {}
    turns = [0]

    class Stop(Exception):
        pass

    def is_tainted(uses):
        return any(u in tainted or (u not in ns and not hasattr(builtins, u)) for u in uses)

    immutable = (int, float, complex, str, bytes, bool, type(None), tuple, frozenset, range)

    def taint(node):
        # What it binds depends on the answer; what it hands a call the answer may change in place.
        passed = [n for n in node["passes"] if n in ns and type(ns[n]) not in immutable]
        for name in list(node["binds"]) + passed:
            tainted.add(name)
            sent.pop(name, None)

    def clean(names):
        for name in names:
            tainted.discard(name)

    def record(top, node, verbatim=False):
        if len(events) >= max_recorded:
            raise Stop("more than %d statements to record" % max_recorded)
        values = {}
        if not verbatim:
            for name in node["uses"]:
                if name not in ns or name in tainted:
                    continue
                value = ns[name]
                code = callable(value) or type(value) is type(os)
                data = ["code"] if code else encode(value)
                if sent.get(name) != data:
                    values[name] = data
                    sent[name] = data
        events.append([top, node["i"], None if verbatim else values])

    def turn():
        turns[0] += 1
        if turns[0] > max_turns:
            raise Stop("more than %d loop turns" % max_turns)

    def walk(top, nodes):
        for node in nodes:
            kind = node["k"]
            if kind == "code":
                exec(node["src"], ns)
                clean(node["binds"])
                if is_tainted(node["uses"]):
                    taint({"binds": node["binds"], "passes": []})
                record(top, node, verbatim=True)
            elif kind == "check":
                record(top, node)
                if is_tainted(node["uses"]):
                    taint({"binds": [], "passes": node["passes"]})
            elif kind == "for" and not is_tainted(node["iuses"]):
                for item in eval(node["iter"], ns):
                    turn()
                    ns["__bl_item"] = item
                    exec(node["target"] + " = __bl_item", ns)
                    clean(node["tnames"])
                    walk(top, node["body"])
            elif kind == "while" and not is_tainted(node["tuses"]):
                while eval(node["test"], ns):
                    turn()
                    walk(top, node["body"])
                    if is_tainted(node["tuses"]):
                        raise Stop("a loop whose condition the answer changes")
            elif kind == "if" and not is_tainted(node["tuses"]):
                walk(top, node["body"] if eval(node["test"], ns) else node["orelse"])
            elif kind == "simple" and not is_tainted(node["uses"]):
                exec(node["src"], ns)
                clean(node["binds"])
                for name in node["binds"]:
                    sent.pop(name, None)
            else:
                record(top, node)
                taint(node)

    aborted = ""
    for top, nodes in tree:
        sent.clear()  # each top the split may take apart says all it reads
        try:
            walk(top, nodes)
        except Stop as exc:
            aborted = str(exc)
            break
        except BaseException as exc:
            raised[top] = type(exc).__name__
    os.write(out, (json.dumps({"events": events, "raised": raised, "aborted": aborted}) + "\n").encode())
    os._exit(0)


_record(json.loads(__TREE__), __MAX_RECORDED__, __MAX_TURNS__, __ANSWERS__)
'''


def program(expanded: Expanded, answer_names: frozenset[str] = frozenset()) -> str:
    """The tests' sandbox's program that walks ``expanded`` and reports what it recorded.

    ``answer_names``: names of Python's builtins that are the answer's in these tests; what
    reads them depends on the answer, as what reads any name the tests never bind does."""
    expanded.numbered.clear()
    tree = [[index, [_describe(s, expanded.numbered) for s in top.statements]]
            for index, top in enumerate(expanded.tops)]
    # The tests' text goes in last: a placeholder's name written in it stays as written.
    return (plain.SOURCE + "\nimport json\n" + _RECORDER.replace("__MAX_RECORDED__", str(MAX_RECORDED))
            .replace("__MAX_TURNS__", str(MAX_TURNS)).replace("__ANSWERS__", repr(sorted(answer_names)))
            .replace("__TREE__", repr(json.dumps(tree))))


@dataclass
class Recording:
    """What the tests' sandbox sent: per top, the recorded statements; the tops whose own code raised."""

    events: dict[int, list[tuple[int, JsonObject | None]]]
    raised: dict[int, str]
    why: str = ""


def read(stdout: str, why_not: str) -> Recording:
    """The recording on the last line of ``stdout`` (the tests' sandbox: data, checked as such)."""
    try:
        data = json.loads(stdout.strip().splitlines()[-1])
        events: dict[int, list[tuple[int, JsonObject | None]]] = {}
        for top, number, values in data["events"]:
            if type(top) is not int or type(number) is not int or not (values is None or isinstance(values, dict)):
                raise ValueError("an event")
            events.setdefault(top, []).append((number, values))
        raised = {int(k): str(v)[:100] for k, v in data["raised"].items()}
        return Recording(events, raised, str(data.get("aborted") or ""))
    except (ValueError, IndexError, KeyError, TypeError, RecursionError):
        return Recording({}, {}, "the tests' own code did not report its data: " + why_not)


def rewrite(expanded: Expanded, recording: Recording, wanted: set[Key]) -> tuple[dict[Key, Replacement],
                                                                                  dict[Key, str]]:
    """The straight-line statements that stand for each wanted top, and why a top could not be rewritten."""
    replacements: dict[Key, Replacement] = {}
    notes: dict[Key, str] = {}
    code_names: set[str] = set()
    for index, top in enumerate(expanded.tops):
        if top.key not in wanted:
            code_names |= {n for s in top.statements for n in _bound_names(s)}
            continue
        if recording.why:
            notes[top.key] = recording.why
            continue
        statements: list[ast.stmt] = []
        why = ""
        for number, values in recording.events.get(index, []):
            if number >= len(expanded.numbered):
                why = "the tests' sandbox named a statement that does not exist"
                break
            stmt = expanded.numbered[number]
            for name, data in (values or {}).items():
                if data == ["code"]:
                    if name not in code_names:
                        why = f"the tests' {name} is code, not data"
                    continue
                try:
                    value = plain.decode(data)
                except (plain.PlainDataError, RecursionError):
                    value = plain.Failed("unreadable")
                expr = None if isinstance(value, plain.Failed) else literal(value)
                if expr is None:
                    why = f"the tests' {name} is not plain data" + (
                        f" ({value.why})" if isinstance(value, plain.Failed) else "")
                    break
                statements.append(ast.fix_missing_locations(ast.Assign([ast.Name(name, ast.Store())], expr)))
            if why:
                break
            statements.append(copy.deepcopy(stmt))
            if values is None:
                code_names |= _bound_names(stmt)
        if why:
            notes[top.key] = why
            continue
        replacements[top.key] = Replacement(statements, recording.raised.get(index, ""))
    return replacements, notes
