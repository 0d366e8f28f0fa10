"""Judging a test program as a whole: the tests run in their own sandbox, the answer in another.

Where ``testplan`` cannot split a test into calls and a comparison (a loop over the
answer's results holding asserts, a helper of several statements, a ``while`` the
answer drives, a ``try`` waiting for the answer's exception, a class the tests drive
through its methods), the whole test program runs here instead:

- the **tests' sandbox** runs the tests' program, unchanged, without a line of the
  answer. Each name the tests use and never bind (the answer's ``add``, ``Solution``;
  a builtin's name only where ``entry.choices`` makes it the answer's) is bound to a
  proxy; calling it sends the arguments, as plain data, to the server;
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
import json
import keyword
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from benchlab.evaluate import entry, plain
from benchlab.json_types import JsonObject

# The exceptions an answer may raise into the tests: not these, which end a program.
_ENDS = frozenset({"BaseException", "SystemExit", "KeyboardInterrupt", "GeneratorExit"})
_REQUESTS = frozenset({"names", "call", "attr", "set", "iter", "next", "dunder", "eval"})
_KINDS = frozenset({"call", "iter", "obj"})

_ANSWER = r'''

import builtins as _builtins, json as _json, operator as _operator, os as _os

_INBOX = _os.fdopen(3, "rb")
_NS = {"__name__": "__main__", "__builtins__": _builtins}
_OBJS = []  # the answer's values that are not plain data, by handle
_MUTABLE = (list, dict, set, bytearray)
_DUNDERS = {"bool": bool, "len": len, "str": str, "repr": repr, "int": int, "float": float,
            "index": _operator.index, "getitem": _operator.getitem}


def _say(msg):
    data = (_json.dumps(msg) + "\n").encode()
    while data:
        data = data[_os.write(4, data):]


def _describe(value):
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
    if len(_OBJS) >= 100000:
        raise MemoryError
    _OBJS.append(value)
    return {"h": len(_OBJS) - 1, "k": kind}


def _arg(item):
    return _OBJS[item[1]] if item[0] == "h" else decode(item[1])


def _call(req):
    fn = _OBJS[req[1]]
    sent = {str(i): a for i, a in enumerate(req[2])}
    sent.update({"k:" + k: a for k, a in req[3].items()})
    given = {key: _arg(item) for key, item in sent.items()}
    args = [given[str(i)] for i in range(len(req[2]))]
    kwargs = {k: given["k:" + k] for k in req[3]}
    reply = {}
    try:
        reply["r"] = _describe(fn(*args, **kwargs))
    except BaseException as exc:
        reply["e"] = type(exc).__name__
    after = {}
    for key, value in given.items():
        if type(value) in _MUTABLE and sent[key][0] == "v":
            now = encode(value)
            if now != sent[key][1]:
                after[key] = now
    if after:
        reply["after"] = after
    return reply


def _names(names):
    out = {}
    for name in names:
        if name not in _NS:
            out[name] = {"missing": 1}
        elif type(_NS[name]) is type(_os):
            out[name] = {"m": str(_NS[name].__name__)}
        else:
            out[name] = _describe(_NS[name])
    return {"names": out}


def _next(it, want):
    items = []
    try:
        while len(items) < min(want, 1024):
            items.append(_describe(next(it)))
    except BaseException as exc:
        return {"items": items, "e": type(exc).__name__}
    return {"items": items}


def _serve(req):
    op = req[0]
    if op == "names":
        return _names(req[1])
    if op == "call":
        return _call(req)
    if op == "next":  # up to req[2] items at once: one round trip for many
        return _next(_OBJS[req[1]], req[2])
    if op == "attr":
        return {"r": _describe(getattr(_OBJS[req[1]], req[2]))}
    if op == "set":
        setattr(_OBJS[req[1]], req[2], _arg(req[3]))
        return {"r": {"v": ["n", None]}}
    if op == "iter":
        return {"r": _describe(iter(_OBJS[req[1]]))}
    if op == "dunder":
        return {"r": _describe(_DUNDERS[req[2]](_OBJS[req[1]], *[_arg(a) for a in req[3]]))}
    if op == "eval":
        scope = _NS if req[2] is None else dict(decode(req[2]), __builtins__=_builtins)
        return {"r": _describe(eval(req[1], scope))}
    raise ValueError(op)


def _live_answer(answer):
    _os.dup2(_os.open(_os.devnull, _os.O_WRONLY), 1)
    try:
        exec(compile(answer, "<answer>", "exec", dont_inherit=True), _NS)
        _say({"loaded": ""})
    except BaseException as exc:
        _say({"loaded": type(exc).__name__ or "?"})
        _os._exit(0)
    while True:
        line = _INBOX.readline()
        if not line:
            _os._exit(0)
        try:
            reply = _serve(_json.loads(line))
        except BaseException as exc:
            reply = {"e": type(exc).__name__}
        try:
            _say(reply)
        except BaseException as exc:
            _say({"e": type(exc).__name__})


'''

_TESTS = r'''

import ast as _ast, builtins as _builtins, importlib as _importlib, json as _json, os as _os
import pickle as _pickle, sys as _sys

_INBOX = _os.fdopen(3, "rb")
_NOW = [None]  # the test running
_MADE = {}  # exception classes made for the names of the answer's own
_CODES = []  # code objects compiled from the tests' own text
_AHEAD = {}  # an iterator's handle -> [items read ahead, reversed; the exception that ended it; how many next]
_EVAL, _EXEC, _COMPILE = _builtins.eval, _builtins.exec, _builtins.compile


class _Refused(BaseException):
    """The server failed this test already (the answer ended, or sent what is not plain data)."""


def _say(msg):
    data = (_json.dumps(msg) + "\n").encode()
    while data:
        data = data[_os.write(4, data):]


def _ask(msg):
    _say(msg)
    line = _INBOX.readline()
    if not line:
        _os._exit(0)
    return _json.loads(line)


def _refuse(why):
    _say(["poison", _NOW[0], why])
    return TypeError(why)


def _error(name):
    cls = getattr(_builtins, name, None)
    if isinstance(cls, type) and issubclass(cls, Exception):
        return cls
    return _MADE.setdefault(name, type(name, (Exception,), {}))


def _refresh(old, new):
    if type(old) is not type(new):
        return
    if type(old) is list and len(old) == len(new):
        for i, (a, b) in enumerate(zip(old, new)):
            if type(a) in (list, dict, set, bytearray) and type(a) is type(b):
                _refresh(a, b)
            else:
                old[i] = b
    elif type(old) in (list, bytearray):
        old[:] = new
    elif type(old) in (dict, set):
        old.clear()
        old.update(new)


def _value(reply, given=None):
    if "gone" in reply:
        raise _Refused(reply["gone"])
    for key, data in (reply.get("after") or {}).items():
        if given is not None and key in given:
            _refresh(given[key], decode(data))
    if "e" in reply:
        raise _error(reply["e"])("raised by the answer")
    return _unwrap(reply["r"])


def _unwrap(desc):
    return decode(desc["v"]) if "v" in desc else _Remote(desc["h"], desc["k"])


def _wrap(item):
    if type(item) is _Remote:
        return ["h", object.__getattribute__(item, "_h")]
    data = encode(item)
    if isinstance(decode(data), Failed):
        raise _refuse("hands the answer a value that is not plain data (" + type(item).__name__ + ")")
    return ["v", data]


class _Remote:
    """A value of the answer's that is not plain data: it stays in the answer's sandbox."""

    __slots__ = ("_h", "_k")

    def __init__(self, h, k):
        object.__setattr__(self, "_h", h)
        object.__setattr__(self, "_k", k)

    def _ask(self, op, *rest):
        return _value(_ask([op, _NOW[0], object.__getattribute__(self, "_h"), *rest]))

    def __call__(self, *args, **kwargs):
        given = {str(i): a for i, a in enumerate(args)}
        given.update({"k:" + k: v for k, v in kwargs.items()})
        req = ["call", _NOW[0], object.__getattribute__(self, "_h"), [_wrap(a) for a in args],
               {k: _wrap(v) for k, v in kwargs.items()}]
        return _value(_ask(req), given)

    def __getattr__(self, name):
        if name.startswith("__") and name.endswith("__"):
            raise AttributeError(name)
        return self._ask("attr", name)

    def __setattr__(self, name, item):
        self._ask("set", name, _wrap(item))

    def __iter__(self):
        return self if object.__getattribute__(self, "_k") == "iter" else self._ask("iter")

    def __next__(self):
        h = object.__getattribute__(self, "_h")
        ahead = _AHEAD.setdefault(h, [[], None, 1])
        if not ahead[0] and ahead[1] is None:
            reply = _ask(["next", _NOW[0], h, ahead[2]])
            if "gone" in reply:
                raise _Refused(reply["gone"])
            ahead[2] = min(2 * ahead[2], 1024)
            ahead[0] = [_unwrap(d) for d in reversed(reply["items"])]
            ahead[1] = reply.get("e")
        if ahead[0]:
            return ahead[0].pop()
        raise _error(ahead[1])("raised by the answer")

    def __contains__(self, item):
        return any(x is item or x == item for x in self)

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
        return self._ask("dunder", "getitem", [_wrap(key)])

    def _compared(self, *other):
        raise _refuse("compares the answer's value, which is not plain data: only its own method could")

    __eq__ = __ne__ = __lt__ = __le__ = __gt__ = __ge__ = _compared
    __hash__ = object.__hash__


def _own(src):
    return (isinstance(src, (str, bytes)) and src in _CONSTANTS) or any(src is c for c in _CODES)


def _scope(g, l):
    if g is None:
        frame = _sys._getframe(2)
        return frame.f_globals, (frame.f_locals if l is None else l)
    return g, l


def _guarded_eval(src, g=None, l=None):
    if _own(src):
        return _EVAL(src, *_scope(g, l))
    if not isinstance(src, (str, bytes)):
        raise _refuse("evaluates code it did not write")
    scope = None
    if g is not None or l is not None:
        scope = _wrap({k: v for k, v in {**(g or {}), **(l or {})}.items() if k != "__builtins__"})[1]
    text = src.decode() if isinstance(src, bytes) else src
    return _value(_ask(["eval", _NOW[0], text, scope]))


def _guarded_exec(src, g=None, l=None, **kw):
    if not _own(src):
        raise _refuse("runs code built at run time (exec), which may come from the answer")
    return _EXEC(src, *_scope(g, l), **kw)


def _guarded_compile(src, *args, **kw):
    if not _own(src):
        raise _refuse("compiles code built at run time, which may come from the answer")
    code = _COMPILE(src, *args, **kw)
    _CODES.append(code)
    return code


def _refusing(real):
    def loads(data, *a, **k):
        if not _own(data):
            raise _refuse("unpickles data built at run time, which may come from the answer")
        return real(data, *a, **k)
    return loads


def _namespace(names, own):
    _pickle.loads = _refusing(_pickle.loads)
    safe = dict(vars(_builtins))
    safe.update(eval=_guarded_eval, exec=_guarded_exec, compile=_guarded_compile)
    for name in own:  # the answer's here: where the answer lacks it, a NameError, never Python's
        safe.pop(name, None)
    ns = {"__name__": "__main__", "__builtins__": safe}
    bound = _ask(["names", None, names])
    for name, desc in (bound.get("names") or {}).items():
        if "m" in desc:
            if desc["m"] == name:
                ns[name] = _importlib.import_module(name)
        elif "missing" not in desc:
            ns[name] = _unwrap(desc)
    return ns


def _statement(stmt, ns):
    """Run one top-level statement: "" when it ran, else why not. The tests' own exit ends the program."""
    try:
        _EXEC(_COMPILE(_ast.Module([stmt], []), "<tests>", "exec", dont_inherit=True), ns)
    except SystemExit as exc:
        ok = exc.code in (None, 0, False)
        _say(["result", _NOW[0], ok, "" if ok else "the tests exited with " + repr(exc.code)[:50]])
        _say(["done", ok])
        _os._exit(0)
    except BaseException as exc:
        return str(exc) if type(exc) is _Refused else type(exc).__name__
    return ""


def _live_tests(units, names, own):
    _os.dup2(_os.open(_os.devnull, _os.O_WRONLY), 1)
    ns = _namespace(names, own)
    broken = ""
    for source, tests_of in units:
        for stmt, test in zip(_ast.parse(source).body, tests_of):
            _NOW[0] = test
            why = broken or _statement(stmt, ns)
            if why and test is None and not broken:
                broken = why + " in the tests' setup"
            _say(["result", test, not why, why])
    _say(["done", False])
    _os._exit(0)


'''


@dataclass
class Layout:
    """The tests as the tests' sandbox runs them: per source, the test each top-level statement belongs to."""

    units: list[tuple[str, list[int | None]]] = field(default_factory=list)
    tests: int = 0
    names: list[str] = field(default_factory=list)
    constants: set[str | bytes] = field(default_factory=set)
    own: frozenset[str] = frozenset()
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


def layout(tests: str | Sequence[str], count: int, own: frozenset[str] = frozenset()) -> Layout:
    """Which test each top-level statement is part of, numbered as ``testplan`` numbers them (``count`` tests).

    ``own``: names of Python's builtins that are the answer's in these tests (``entry.choices``)."""
    sources = [tests] if isinstance(tests, str) else [str(t) for t in tests]
    out = Layout(tests=count, own=own)
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
    # The names the tests read and never bind: the answer's, as in ``answer + tests``, except the
    # builtins' names, which stay Python's unless they are the answer's here.
    out.names = sorted(entry.tests_free_names(trees) - (entry.BUILTIN_NAMES - own))
    out.constants = {node.value for tree in trees for node in ast.walk(tree)
                     if isinstance(node, ast.Constant) and isinstance(node.value, str | bytes)}
    return out


def answer_program(answer: str) -> str:
    """The answer's program: the answer, then a loop answering the server's requests on descriptors 3 and 4."""
    return plain.SOURCE + _ANSWER + f"_live_answer({answer!r})\n"


def tests_program(plan: Layout) -> str:
    """The tests' program: their statements run in order, the answer's names bound to proxies."""
    return (plain.SOURCE + _TESTS + f"_CONSTANTS = {plan.constants!r}\n"
            f"_live_tests({plan.units!r}, {plan.names!r}, {sorted(plan.own)!r})\n")


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


def checked_reply(line: bytes, names: Sequence[str] | None) -> JsonObject:
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
    if "items" in data:
        items = data["items"]
        if not isinstance(items, list) or len(items) > 1024:
            raise plain.PlainDataError("not a reply")
        out["items"] = [_value(item) for item in items]
        if data.get("e") is not None:
            out["e"] = _exception(data["e"])
        return out
    after = data.get("after", {})
    if not isinstance(after, dict) or len(after) > 1000:
        raise plain.PlainDataError("not a reply")
    if after:
        out["after"] = {str(k): _value({"v": v})["v"] for k, v in after.items()}
    if data.get("e") is not None:
        out["e"] = _exception(data["e"])
        return out
    out["r"] = _value(data.get("r"))
    return out


def _exception(name: object) -> str:
    """The name of an exception the answer raised, as the tests may see it."""
    if not isinstance(name, str) or not name.isidentifier() or keyword.iskeyword(name) or len(name) > 100:
        raise plain.PlainDataError("an exception without a proper name")
    if name in _ENDS:
        raise plain.PlainDataError(f"the answer raised {name}, which ends a program")
    return name


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

    def verdict(self, why_missing: str) -> tuple[list[bool], list[str]]:
        passed = [i in self.ran and i not in self.failed for i in range(self.tests)]
        return passed, ["" if ok else self.failed.get(i, why_missing) for i, ok in enumerate(passed)]


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


async def judge_whole(sandbox: Any, answer: str, tests: str | Sequence[str], count: int,
                      own: frozenset[str] = frozenset()) -> tuple[list[bool], list[str]]:
    """Each test's verdict and why it failed ("" where it passed), the tests' program run whole
    against the answer through the server; ``own``: builtin names that are the answer's here."""
    plan = layout(tests, count, own)
    if plan.why:
        return [False] * count, ["cannot be judged apart from the answer: " + plan.why] * count
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
            return [False] * count, ["the answer's program did not say that it loaded"] * count
        if loaded:
            return [False] * count, [f"the answer raised {loaded[:100]} before the tests"] * count
        missing = await _relay(answer_live, tests_live, plan, tally, deadline)
    return tally.verdict(missing or "the tests did not run it")
