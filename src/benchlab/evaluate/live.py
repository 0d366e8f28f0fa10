"""Judging a test program as a whole: the tests run in their own sandbox, the answer in another.

Where ``testplan`` cannot split a test into calls and a comparison (a loop over the
answer's results holding asserts, a helper of several statements, a ``while`` the
answer drives, a ``try`` waiting for the answer's exception, a class the tests drive
through its methods), the whole test program runs here instead:

- the **tests' sandbox** runs the tests' program, unchanged, without a line of the
  answer. Each name the tests use and never bind (the answer's ``add``, ``Solution``)
  is bound to a proxy; calling it sends the arguments, as plain data, to the server;
- the **server** (this module) hands each request to the **answer's sandbox**, which
  holds the answer and nothing of the tests, reads its reply, checks that every value
  in it is plain data (``plain.decode``: exact built-ins, bounded), and hands it back;
- the tests' program gets the value rebuilt as exact built-ins and decides with its
  own code; the verdict of each test crosses to the server as plain data.

What the answer returns that is not plain data (an object of its class, a function,
a generator) stays in the answer's sandbox: the tests hold a proxy, which they can
call, read attributes of, iterate, and ask ``bool``, ``len``, ``str``, ``repr``,
``int``, ``float`` and items of (each a request, answered with plain data); any
comparison of it (``==``, ``<``, ``in``, hashing aside) fails its test, since it
would run the answer's method with the tests' expected value.

Code built at run time does not run in the tests' sandbox: ``eval`` of a string that
is not written in the tests (``eval(to_expr(xs))``) is evaluated in the answer's
sandbox, and ``exec``, ``compile`` and ``pickle.loads`` of such data
fail their test. See docs/evaluation-service.md for what the verdict rests on.
"""

from __future__ import annotations

import ast
import asyncio
import builtins
import json
import keyword
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from benchlab.evaluate import plain

# The exceptions an answer may raise into the tests: not these, which end a program.
_ENDS = frozenset({"BaseException", "SystemExit", "KeyboardInterrupt", "GeneratorExit"})
_REQUESTS = frozenset({"names", "call", "attr", "set", "iter", "next", "dunder", "eval"})
_KINDS = frozenset({"call", "iter", "obj"})

_ANSWER = r'''

def _live_answer(answer):
    import builtins, json, operator, os
    dumps, loads, write, exit_now = json.dumps, json.loads, os.write, os._exit
    inbox = os.fdopen(3, "rb")
    os.dup2(os.open(os.devnull, os.O_WRONLY), 1)
    ns = {"__name__": "__main__", "__builtins__": builtins}
    objs = []
    mutable = (list, dict, set, bytearray)
    dunders = {"bool": bool, "len": len, "str": str, "repr": repr, "int": int, "float": float,
               "index": operator.index, "getitem": operator.getitem}

    def say(msg):
        data = (dumps(msg) + "\n").encode()
        while data:
            data = data[write(4, data):]

    def describe(value):
        t = type(value)
        if hasattr(t, "__next__") and hasattr(t, "__iter__"):
            kind = "iter"
        elif callable(value):
            kind = "call"
        else:
            data = encode(value)
            if not isinstance(decode(data), Failed):
                return {"v": data}
            kind = "obj"
        if len(objs) >= 100000:
            raise MemoryError
        objs.append(value)
        return {"h": len(objs) - 1, "k": kind}

    def arg(item):
        return objs[item[1]] if item[0] == "h" else decode(item[1])

    def call(req):
        fn = objs[req[1]]
        args = [arg(a) for a in req[2]]
        kwargs = {k: arg(a) for k, a in req[3].items()}
        sent = {str(i): a for i, a in enumerate(req[2])}
        sent.update({"k:" + k: a for k, a in req[3].items()})
        given = {str(i): v for i, v in enumerate(args)}
        given.update({"k:" + k: v for k, v in kwargs.items()})
        reply = {}
        try:
            reply["r"] = describe(fn(*args, **kwargs))
        except BaseException as exc:
            reply["e"] = type(exc).__name__
        after = {}
        for key, value in given.items():
            if type(value) in mutable and sent[key][0] == "v":
                now = encode(value)
                if now != sent[key][1]:
                    after[key] = now
        if after:
            reply["after"] = after
        return reply

    def serve(req):
        op = req[0]
        if op == "names":
            out = {}
            for name in req[1]:
                if name not in ns:
                    out[name] = {"missing": 1}
                elif type(ns[name]) is type(os):
                    out[name] = {"m": str(ns[name].__name__)}
                else:
                    out[name] = describe(ns[name])
            return {"names": out}
        if op == "call":
            return call(req)
        if op == "attr":
            return {"r": describe(getattr(objs[req[1]], req[2]))}
        if op == "set":
            setattr(objs[req[1]], req[2], arg(req[3]))
            return {"r": {"v": ["n", None]}}
        if op == "iter":
            return {"r": describe(iter(objs[req[1]]))}
        if op == "next":
            return {"r": describe(next(objs[req[1]]))}
        if op == "dunder":
            return {"r": describe(dunders[req[2]](objs[req[1]], *[arg(a) for a in req[3]]))}
        if op == "eval":
            scope = ns if req[2] is None else dict(decode(req[2]), __builtins__=builtins)
            return {"r": describe(eval(req[1], scope))}
        raise ValueError(op)

    try:
        exec(compile(answer, "<answer>", "exec", dont_inherit=True), ns)
        say({"loaded": ""})
    except BaseException as exc:
        say({"loaded": type(exc).__name__ or "?"})
        exit_now(0)
    while True:
        line = inbox.readline()
        if not line:
            exit_now(0)
        try:
            reply = serve(loads(line))
        except BaseException as exc:
            reply = {"e": type(exc).__name__}
        try:
            say(reply)
        except BaseException as exc:
            say({"e": type(exc).__name__})


_live_answer(__ANSWER__)
'''

_TESTS = r'''

def _live_tests(units, names, constants):
    import ast, builtins, importlib, json, os, pickle, sys
    dumps, loads, write, exit_now = json.dumps, json.loads, os.write, os._exit
    inbox = os.fdopen(3, "rb")
    os.dup2(os.open(os.devnull, os.O_WRONLY), 1)
    now = [None]
    made = {}
    codes = set()
    real_eval, real_exec, real_compile = builtins.eval, builtins.exec, builtins.compile

    class Refused(BaseException):
        """The server failed this test already (the answer ended, or sent what is not plain data)."""

    def say(msg):
        data = (dumps(msg) + "\n").encode()
        while data:
            data = data[write(4, data):]

    def ask(msg):
        say(msg)
        line = inbox.readline()
        if not line:
            exit_now(0)
        return loads(line)

    def refuse(why):
        say(["poison", now[0], why])
        return TypeError(why)

    def error(name):
        cls = getattr(builtins, name, None)
        if isinstance(cls, type) and issubclass(cls, Exception):
            return cls
        return made.setdefault(name, type(name, (Exception,), {}))

    def refresh(old, new):
        if type(old) is not type(new):
            return
        if type(old) is list and len(old) == len(new):
            for i, (a, b) in enumerate(zip(old, new)):
                if type(a) in (list, dict, set, bytearray) and type(a) is type(b):
                    refresh(a, b)
                else:
                    old[i] = b
        elif type(old) in (list, bytearray):
            old[:] = new
        elif type(old) in (dict, set):
            old.clear()
            old.update(new)

    def value(reply, given=None):
        if "gone" in reply:
            raise Refused(reply["gone"])
        for key, data in (reply.get("after") or {}).items():
            if given is not None and key in given:
                refresh(given[key], decode(data))
        if "e" in reply:
            raise error(reply["e"])("raised by the answer")
        desc = reply["r"]
        return decode(desc["v"]) if "v" in desc else Remote(desc["h"], desc["k"])

    def wrap(item):
        if type(item) is Remote:
            return ["h", object.__getattribute__(item, "_h")]
        data = encode(item)
        if isinstance(decode(data), Failed):
            raise refuse("hands the answer a value that is not plain data (" + type(item).__name__ + ")")
        return ["v", data]

    class Remote:
        __slots__ = ("_h", "_k")

        def __init__(self, h, k):
            object.__setattr__(self, "_h", h)
            object.__setattr__(self, "_k", k)

        def _ask(self, op, *rest):
            return value(ask([op, now[0], object.__getattribute__(self, "_h"), *rest]))

        def __call__(self, *args, **kwargs):
            given = {str(i): a for i, a in enumerate(args)}
            given.update({"k:" + k: v for k, v in kwargs.items()})
            req = ["call", now[0], object.__getattribute__(self, "_h"), [wrap(a) for a in args],
                   {k: wrap(v) for k, v in kwargs.items()}]
            return value(ask(req), given)

        def __getattr__(self, name):
            if name.startswith("__") and name.endswith("__"):
                raise AttributeError(name)
            return self._ask("attr", name)

        def __setattr__(self, name, item):
            self._ask("set", name, wrap(item))

        def __iter__(self):
            return self if object.__getattribute__(self, "_k") == "iter" else self._ask("iter")

        def __next__(self):
            return self._ask("next")

        def __bool__(self):
            return self._ask("dunder", "bool", [])

        def __len__(self):
            return self._ask("dunder", "len", [])

        def __str__(self):
            return self._ask("dunder", "str", [])

        def __repr__(self):
            return self._ask("dunder", "repr", [])

        def __int__(self):
            return self._ask("dunder", "int", [])

        def __float__(self):
            return self._ask("dunder", "float", [])

        def __index__(self):
            return self._ask("dunder", "index", [])

        def __getitem__(self, key):
            return self._ask("dunder", "getitem", [wrap(key)])

        def _compared(self, *other):
            raise refuse("compares the answer's value, which is not plain data: only its own method could")

        __eq__ = __ne__ = __lt__ = __le__ = __gt__ = __ge__ = __contains__ = _compared
        __hash__ = object.__hash__

    def own(src):
        return (isinstance(src, (str, bytes)) and src in constants) or id(src) in codes

    def scope_of(g, l):
        if g is None:
            frame = sys._getframe(2)
            return frame.f_globals, (frame.f_locals if l is None else l)
        return g, l

    def guarded_eval(src, g=None, l=None):
        if own(src):
            return real_eval(src, *scope_of(g, l))
        if not isinstance(src, (str, bytes)):
            raise refuse("evaluates code it did not write")
        scope = None
        if g is not None or l is not None:
            names = {k: v for k, v in {**(g or {}), **(l or {})}.items() if k != "__builtins__"}
            scope = wrap(names)[1]
        text = src.decode() if isinstance(src, bytes) else src
        return value(ask(["eval", now[0], text, scope]))

    def guarded_exec(src, g=None, l=None, **kw):
        if not own(src):
            raise refuse("runs code built at run time (exec), which may come from the answer")
        return real_exec(src, *scope_of(g, l), **kw)

    def guarded_compile(src, *args, **kw):
        if not own(src):
            raise refuse("compiles code built at run time, which may come from the answer")
        code = real_compile(src, *args, **kw)
        codes.add(id(code))
        constants_kept.append(code)
        return code

    def refusing(real):
        def loads(data, *a, **k):
            if not own(data):
                raise refuse("unpickles data built at run time, which may come from the answer")
            return real(data, *a, **k)
        return loads

    constants_kept = []
    pickle.loads = refusing(pickle.loads)
    safe = dict(vars(builtins))
    safe.update(eval=guarded_eval, exec=guarded_exec, compile=guarded_compile)
    ns = {"__name__": "__main__", "__builtins__": safe}
    bound = ask(["names", None, names])
    for name, desc in (bound.get("names") or {}).items():
        if "m" in desc:
            if desc["m"] == name:
                ns[name] = importlib.import_module(name)
        elif "missing" not in desc:
            ns[name] = decode(desc["v"]) if "v" in desc else Remote(desc["h"], desc["k"])
    broken = ""
    for source, tests_of in units:
        tree = ast.parse(source)
        for stmt, test in zip(tree.body, tests_of):
            now[0] = test
            if broken:
                say(["result", test, False, broken])
                continue
            try:
                real_exec(real_compile(ast.Module([stmt], []), "<tests>", "exec", dont_inherit=True), ns)
            except SystemExit as exc:
                if exc.code in (None, 0, False):
                    say(["result", test, True, ""])
                    say(["done", True])
                    exit_now(0)
                say(["result", test, False, "the tests exited with " + repr(exc.code)[:50]])
                say(["done", False])
                exit_now(0)
            except BaseException as exc:
                why = str(exc) if type(exc) is Refused else type(exc).__name__
                if test is None:
                    broken = why + " in the tests' setup"
                say(["result", test, False, why])
            else:
                say(["result", test, True, ""])
    say(["done", False])
    exit_now(0)


_live_tests(__UNITS__, __NAMES__, __CONSTANTS__)
'''


@dataclass
class Layout:
    """The tests as the tests' sandbox runs them: per source, the test each top-level statement belongs to."""

    units: list[tuple[str, list[int | None]]] = field(default_factory=list)
    tests: int = 0
    names: list[str] = field(default_factory=list)
    constants: set[str | bytes] = field(default_factory=set)
    why: str = ""


def _is_test(stmt: ast.stmt) -> bool:
    """A top-level statement ``testplan`` counts as a test (an assert, a call, a statement holding asserts)."""
    if isinstance(stmt, ast.Assert):
        return True
    if isinstance(stmt, ast.Expr):
        return not isinstance(stmt.value, ast.Constant)
    if isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
        return False
    return any(isinstance(node, ast.Assert) for node in ast.walk(stmt))


def _free_names(trees: list[ast.Module]) -> list[str]:
    """The names the tests read and never bind, builtins aside: the answer's, as in ``answer + tests``."""
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
    return sorted(read - bound - set(dir(builtins)))


def layout(tests: str | Sequence[str], count: int) -> Layout:
    """Which test each top-level statement is part of, numbered as ``testplan`` numbers them (``count`` tests)."""
    sources = [tests] if isinstance(tests, str) else [str(t) for t in tests]
    out = Layout(tests=count)
    trees = []
    for si, source in enumerate(sources):
        try:
            tree = ast.parse(source)
        except SyntaxError as exc:
            return Layout(tests=count, why=f"the tests do not parse: {exc.msg} (line {exc.lineno})")
        trees.append(tree)
        if isinstance(tests, str):
            marks: list[int | None] = []
            for stmt in tree.body:
                marks.append(sum(m is not None for m in marks) if _is_test(stmt) else None)
            if all(m is None for m in marks):
                marks = [0] * len(marks)  # no test of its own: the whole program is one
            out.units.append((source, marks))
        else:
            out.units.append((source, [si] * len(tree.body)))
    found = len(sources) if not isinstance(tests, str) else max(1, sum(_is_test(s) for s in trees[0].body))
    if found != count:
        return Layout(tests=count, why=f"the tests hold {found} tests as a program, {count} as statements")
    out.names = _free_names(trees)
    out.constants = {node.value for tree in trees for node in ast.walk(tree)
                     if isinstance(node, ast.Constant) and isinstance(node.value, str | bytes)}
    return out


def answer_program(answer: str) -> str:
    return plain.SOURCE + _ANSWER.replace("__ANSWER__", repr(answer))


def tests_program(plan: Layout) -> str:
    return (plain.SOURCE + _TESTS.replace("__UNITS__", repr(plan.units)).replace("__NAMES__", repr(plan.names))
            .replace("__CONSTANTS__", repr(plan.constants)))


def _value(desc: object, names: bool = False) -> dict:
    """A checked copy of one value the answer's sandbox described; PlainDataError where it is not plain data."""
    if not isinstance(desc, dict) or len(desc) > 2:
        raise plain.PlainDataError("not a value")
    if "v" in desc and len(desc) == 1:
        value = plain.decode(desc["v"])
        if isinstance(value, plain.Failed):  # decode gives one for a container holding one too
            raise plain.PlainDataError(value.why)
        return {"v": plain.encode(value)}
    if len(desc) == 2 and type(desc.get("h")) is int and desc["h"] >= 0 and desc.get("k") in _KINDS:
        return {"h": desc["h"], "k": desc["k"]}
    if names and isinstance(desc.get("m"), str) and len(desc["m"]) < 200:
        return {"m": desc["m"]}
    if names and desc == {"missing": 1}:
        return {"missing": 1}
    raise plain.PlainDataError("not a value")


def checked_reply(line: bytes, names: Sequence[str] | None) -> dict:
    """The answer's reply, rebuilt from plain data; PlainDataError (or ValueError) where it is anything else."""
    data = json.loads(line)
    if not isinstance(data, dict):
        raise plain.PlainDataError("not a reply")
    out: dict[str, Any] = {}
    if names is not None:
        given = data.get("names")
        if not isinstance(given, dict):
            raise plain.PlainDataError("not a reply")
        out["names"] = {n: _value(given.get(n, {"missing": 1}), names=True) for n in names}
        return out
    after = data.get("after", {})
    if not isinstance(after, dict) or len(after) > 1000:
        raise plain.PlainDataError("not a reply")
    if after:
        out["after"] = {str(k): _value({"v": v})["v"] for k, v in after.items()}
    name = data.get("e")
    if name is not None:
        if not isinstance(name, str) or not name.isidentifier() or keyword.iskeyword(name) or len(name) > 100:
            raise plain.PlainDataError("an exception without a proper name")
        if name in _ENDS:
            raise plain.PlainDataError(f"the answer raised {name}, which ends a program")
        out["e"] = name
        return out
    out["r"] = _value(data.get("r"))
    return out


@dataclass
class _Tally:
    """What the server knows of each test: it ran and passed, it failed (why)."""

    tests: int
    ran: set[int] = field(default_factory=set)
    failed: dict[int, str] = field(default_factory=dict)

    def fail(self, test: object, why: str) -> None:
        if type(test) is int and 0 <= test < self.tests:
            self.failed.setdefault(test, why)
        elif test is None:  # in the tests' setup, which every test after it builds on
            for i in range(self.tests):
                self.failed.setdefault(i, why + " (in the tests' setup)")

    def note(self, msg: list) -> None:
        if msg[0] == "poison" and len(msg) == 3:
            self.fail(msg[1], str(msg[2])[:200])
        elif msg[0] == "result" and len(msg) == 4 and type(msg[1]) is int:
            if msg[2] is True:
                self.ran.add(msg[1])
            else:
                self.fail(msg[1], str(msg[3])[:200])

    def verdict(self, why_missing: str) -> tuple[tuple[bool, ...], str]:
        passed = tuple(i in self.ran and i not in self.failed for i in range(self.tests))
        for i, ok in enumerate(passed):
            if not ok:
                return passed, f"test {i + 1}: {self.failed.get(i, why_missing)}"
        return passed, ""


async def _relay(answer: Any, tests: Any, plan: Layout, tally: _Tally, deadline: float) -> str:
    """Carry the tests' requests to the answer and its checked replies back, until the tests are done.

    Returns why the tests' program ended without reporting every test ("" when it did)."""
    loop = asyncio.get_running_loop()
    gone = ""
    while True:
        line = await tests.receive(deadline - loop.time())
        if line is None:
            return "the tests' program ended before it reported (" + (gone or "timed out or failed") + ")"
        try:
            msg = json.loads(line)
            op = msg[0]
        except (ValueError, IndexError, TypeError, KeyError):
            return "the tests' program sent what is not a message"
        if op == "done":
            return ""
        if op not in _REQUESTS:
            tally.note(msg)
            continue
        reply: dict[str, Any]
        if gone:
            reply = {"gone": gone}
        else:
            answer.send(json.dumps([op, *msg[2:]]).encode())
            raw = await answer.receive(deadline - loop.time())
            if raw is None:
                gone = "the answer's sandbox ended, timed out, or sent a reply over the size cap"
                reply = {"gone": gone}
            else:
                try:
                    reply = checked_reply(raw, msg[2] if op == "names" else None)
                except (ValueError, RecursionError, TypeError) as exc:
                    reply = {"gone": f"the answer's reply was refused: {str(exc)[:100]}"}
        if "gone" in reply:
            tally.fail(msg[1], reply["gone"])
        tests.send(json.dumps(reply).encode())


async def judge_whole(sandbox: Any, answer: str, tests: str | Sequence[str], count: int
                      ) -> tuple[tuple[bool, ...], str]:
    """Each test's verdict, the tests' program run whole against the answer through the server,
    and why the first that failed did."""
    plan = layout(tests, count)
    if plan.why:
        return (False,) * count, "test 1: cannot be judged apart from the answer: " + plan.why
    tally = _Tally(count)
    loop = asyncio.get_running_loop()
    async with sandbox.pair(answer_program(answer), tests_program(plan)) as (answer_live, tests_live):
        # Both programs end at their time limit, counted from now; this bounds the waiting here.
        deadline = loop.time() + sandbox.limits.timeout_secs + 5
        first = await answer_live.receive(deadline - loop.time())
        try:
            loaded = json.loads(first or b"null")["loaded"]
        except (ValueError, TypeError, KeyError):
            loaded = None
        if not isinstance(loaded, str) or (loaded and not loaded.isidentifier()):
            return (False,) * count, "the answer's program did not say that it loaded"
        if loaded:
            return (False,) * count, f"the answer raised {loaded[:100]} before the tests"
        missing = await _relay(answer_live, tests_live, plan, tally, deadline)
    return tally.verdict(missing or "the tests did not run it")
