"""The program a code answer is judged by, and how its verdict is read back.

A code sample is correct only when every test ran to its end and passed.
The exit code proves nothing: an answer runs first and may end the process
(``sys.exit``, ``os._exit``, an ``atexit`` hook, a signal) before any test.
So the sandbox runs a harness, not ``answer + tests``:

1. Before the answer's first line the harness installs an audit hook (which
   no Python code can remove) refusing what could reach or rewrite the harness:
   frames (``sys._getframe`` outside three standard-library callers that only
   read a module name, ``tb_frame``, ``gi_frame``), ``gc`` object walks,
   tracing and profiling, further audit hooks, ``ctypes`` and the C test
   modules, new processes, signals to other processes, anything under
   ``/proc``, a path that is not a plain string, and new Python signal
   handlers (a handler would receive the harness's frame). It forbids
   new threads and processes at the kernel level (``RLIMIT_NPROC`` 0), deletes
   its own source file, and points the answer's stdout at /dev/null so that
   nothing the answer prints can push the verdict out of the captured output.
2. The answer runs in a namespace of its own. Each test (a top-level
   ``assert`` or call of the item's ``tests``; the other statements are setup)
   then runs in a fresh namespace holding the answer's functions, wrapped, and
   the builtins as they were before the answer ran. After the answer's code and
   after every call into it, the modules the tests use and the builtins are put
   back as they were, and a value returned to a test must be plain data (no
   class of the answer's that redefines comparison, hashing or truth), so an
   answer can neither patch what a test checks with nor return an object that
   equals everything.
3. After the last test the harness writes one line to the output it kept,
   ``BENCHLAB-RESULT <nonce> <bits>``: the nonce is drawn per sample by the
   server and appears nowhere the answer can read it (it is a constant of the
   harness's code, whose frames and code objects the hook hides, and the
   source file is gone); ``bits`` has one ``1`` or ``0`` per test. Then it
   leaves with ``os._exit``, so no hook of the answer's runs after the verdict.

Anything that stops the harness early (an exit of any kind, a kill, a
timeout, a crash) leaves no such line, and the sample scores 0.

What this does not claim: an answer that rewrites the interpreter's memory
could still forge the line. Every route to that memory a Python program has
without native code is closed above (``ctypes`` and ``/proc/self/mem``
included); the sandbox bounds the rest.
"""

from __future__ import annotations

import ast
import re
import secrets
from collections.abc import Sequence
from dataclasses import dataclass

MARKER = "BENCHLAB-RESULT"
_WHY = "BENCHLAB-WHY"


@dataclass(frozen=True)
class Unit:
    """One top-level statement of an item's tests: a test (``assert`` or a call) or setup."""

    source: str
    is_test: bool


@dataclass(frozen=True)
class HarnessReport:
    """What the harness proved: one verdict per test, and why the first failing one failed."""

    passed: tuple[bool, ...]
    why: str = ""

    @property
    def all_passed(self) -> bool:
        return bool(self.passed) and all(self.passed)


def split_tests(tests: str | Sequence[str]) -> tuple[Unit, ...]:
    """The units of an item's ``tests``: a list is one test per entry; a string is split by statement.

    In a string, each top-level ``assert`` and each top-level expression (a
    ``check(candidate)`` call) is a test; imports, definitions and assignments
    are setup that the following tests need. Tests that do not parse are one
    unit, which fails as a syntax error in the sandbox.
    """
    if not isinstance(tests, str):
        return tuple(Unit(str(t), True) for t in tests)
    try:
        tree = ast.parse(tests)
    except SyntaxError:
        return (Unit(tests, True),)
    units = []
    for node in tree.body:
        source = ast.get_source_segment(tests, node) or ast.unparse(node)
        # Setup keeps its column-0 form; a decorated definition starts at its first decorator.
        if getattr(node, "decorator_list", None):
            first = node.decorator_list[0]  # type: ignore[attr-defined]
            lines = tests.splitlines()
            source = "\n".join(lines[first.lineno - 1 : node.end_lineno])
        units.append(Unit(source, isinstance(node, ast.Assert | ast.Expr)))
    if not any(u.is_test for u in units):
        return (Unit(tests, True),)
    return tuple(units)


def new_nonce() -> str:
    """A fresh per-sample secret: 32 hex digits."""
    return secrets.token_hex(16)


def build_program(answer: str, units: Sequence[Unit], nonce: str) -> str:
    """The harness program that runs ``answer``, then each unit, and reports under ``nonce``."""
    if not re.fullmatch(r"[0-9a-f]{16,64}", nonce):
        raise ValueError("nonce must be 16 to 64 lowercase hex digits")
    pairs = tuple((u.source, u.is_test) for u in units)
    return (
        _TEMPLATE.replace("__MARKER__", f"{MARKER} {nonce} ")
        .replace("__WHY__", f"{_WHY} {nonce} ")
        .replace("__ANSWER__", repr(answer))
        .replace("__UNITS__", repr(pairs))
    )


def read_report(stdout: str, nonce: str, tests: int) -> HarnessReport | None:
    """The harness's verdict in ``stdout``, or None when it never wrote one for ``tests`` tests.

    Only a line carrying this sample's nonce counts; the answer cannot know it,
    so a line it printed itself never matches.
    """
    found = re.search(rf"(?m)^{MARKER} {nonce} ([01]+)$", stdout)
    if found is None or len(found.group(1)) != tests:
        return None
    why = re.search(rf"(?m)^{_WHY} {nonce} (.*)$", stdout)
    return HarnessReport(tuple(c == "1" for c in found.group(1)), why.group(1) if why else "")


# The harness itself. It must never look a name up in a namespace the answer can
# reach once the answer has run: everything it uses is bound to a local first.
_TEMPLATE = r'''
import sys as _sys


def _harness(answer, units):
    sys_ = _sys
    sys_.modules["__main__"].__dict__.pop("_harness", None)
    import builtins, gc, os, resource, signal, _signal
    # What tests commonly import, loaded now so that they are put back after each call.
    import bisect, collections, copy, dataclasses, decimal, enum, fractions, functools, heapq  # noqa
    import itertools, math, operator, random, re, statistics, string, typing  # noqa
    write, exit_now, dup, dup2, open_fd, unlink = os.write, os._exit, os.dup, os.dup2, os.open, os.unlink
    BaseExc, compile_, exec_, type_, isinstance_, len_ = BaseException, compile, exec, type, isinstance, len
    str_, tuple_, dict_, list_, id_, getattr_, vars_ = str, tuple, dict, list, id, getattr, vars
    frozenset_, set_, range_, bytes_, int_, object_ = frozenset, set, range, bytes, int, object
    callable_, AttributeError_, TypeError_, OSError_, ValueError_ = (
        callable, AttributeError, TypeError, OSError, ValueError)
    module_type = type_(os)
    gc_disable = gc.disable
    sig_signal, sig_get, sig_dfl = signal.signal, signal.getsignal, signal.SIG_DFL
    catchable = tuple_(s for s in signal.valid_signals() if s not in (signal.SIGKILL, signal.SIGSTOP))
    try:
        unlink(os.path.abspath(__file__))
    except OSError:
        exit_now(3)
    out = dup(1)
    dup2(open_fd(os.devnull, os.O_WRONLY), 1)

    # Code objects whose own sys._getframe call only reads a module's __name__.
    frame_readers = frozenset_(id_(c) for c in (typing._caller.__code__, collections.namedtuple.__code__,
                                                 enum.EnumType._create_.__code__))
    real_getframe = sys_._getframe
    hidden_attrs = frozenset_(("tb_frame", "gi_frame", "cr_frame", "ag_frame", "f_code"))
    banned_imports = frozenset_(("ctypes", "_ctypes", "_posixsubprocess", "_testcapi", "_testinternalcapi",
                                 "_testmultiphase", "_xxsubinterpreters", "_xxinterpchannels",
                                 "_signal", "cffi", "_cffi_backend"))
    banned_events = frozenset_(("sys.settrace", "sys.setprofile", "sys._current_frames",
                                "sys._current_exceptions", "sys.addaudithook", "gc.get_objects",
                                "gc.get_referrers", "gc.get_referents", "os.fork", "os.forkpty",
                                "os.posix_spawn", "os.exec", "os.spawn", "os.system", "subprocess.Popen",
                                "os.kill", "os.killpg", "signal.pthread_kill", "pty.spawn",
                                "os.symlink", "os.link", "sys.monitoring.register_callback"))
    busy = [False]

    class Refused(RuntimeError):
        pass

    def hook(event, args):
        if busy[0]:
            return
        if event in banned_events:
            raise Refused(event)
        if event == "import" and args[0].split(".")[0] in banned_imports:
            raise Refused("import " + args[0])
        if event == "object.__getattr__" and args[1] in hidden_attrs:
            raise Refused(args[1])
        if event in ("open", "os.chdir", "os.listdir", "os.scandir"):
            path = args[0]
            if path is None or isinstance_(path, int_):
                return
            if type_(path) is bytes_:
                path = path.decode("utf-8", "replace")
            if type_(path) is not str_ or "proc" in path.split("/"):
                raise Refused(event)
        if event == "sys._getframe":
            busy[0] = True
            try:
                allowed = id_(real_getframe(1).f_code) in frame_readers
            finally:
                busy[0] = False
            if not allowed:
                raise Refused(event)

    # Python signal handlers would receive the harness's frames: none may be set from now on.
    def no_handlers(*args, **kwargs):
        raise Refused("signal handlers are not available")

    signal.signal = no_handlers
    _signal.signal = no_handlers

    # The state every test starts from, kept in tuples the answer cannot edit.
    saved_modules = tuple_((m, tuple_(vars_(m).items())) for m in list_(sys_.modules.values())
                           if type_(m) is module_type)
    saved_sys_modules = tuple_(sys_.modules.items())
    saved_paths = (tuple_(sys_.meta_path), tuple_(sys_.path_hooks), tuple_(sys_.path))
    saved_builtins = tuple_(vars_(builtins).items())
    handlers = tuple_((s, sig_get(s)) for s in catchable)

    def restore():
        gc_disable()
        for s, h in handlers:
            try:
                if sig_get(s) is not h:
                    sig_signal(s, h if h is not None else sig_dfl)
            except (OSError_, ValueError_, TypeError_):
                pass
        modules = sys_.modules
        for name, module in saved_sys_modules:
            if modules.get(name) is not module:
                modules[name] = module
        sys_.meta_path[:], sys_.path_hooks[:], sys_.path[:] = (list_(p) for p in saved_paths)
        for module, items in saved_modules:
            d = vars_(module)
            for key, value in items:
                if d.get(key, d) is not value:
                    d[key] = value

    plain = frozenset_((int_, float, complex, str_, bytes_, bool, type_(None), range_, bytearray,
                        decimal.Decimal, fractions.Fraction))
    mappings = frozenset_((dict_, collections.Counter, collections.defaultdict, collections.OrderedDict))
    sequences = frozenset_((list_, tuple_, set_, frozenset_, collections.deque))
    # Dunder names a class standing for plain data may define: none changes what it compares equal to.
    harmless = frozenset_(("__init__", "__new__", "__repr__", "__str__", "__doc__", "__module__",
                           "__qualname__", "__dict__", "__weakref__", "__slots__", "__annotations__",
                           "__match_args__", "__getnewargs__", "__orig_bases__", "__parameters__",
                           "__reduce__", "__reduce_ex__", "__getstate__", "__setstate__", "__copy__",
                           "__deepcopy__", "__init_subclass__", "__class_getitem__", "__format__"))
    getset = type_(vars_(type_)["__dict__"])

    def check_value(value, depth):
        if depth > 100:
            raise TypeError_("a value nested deeper than 100 levels")
        t = type_(value)
        if t in plain:
            return
        if t in mappings:
            for k, v in list_(dict_.items(value)):
                check_value(k, depth + 1)
                check_value(v, depth + 1)
            return
        if t in sequences:
            for v in list_(value):
                check_value(v, depth + 1)
            return
        if type_(t) is not type_:
            raise TypeError_("returned an object whose class has a metaclass")
        # A Python class (a namedtuple, a small record) may stand for data as long as it
        # leaves equality, ordering, truth, arithmetic and attribute access as they are.
        base = None
        for klass in t.__mro__:
            if klass is object_:
                continue
            if klass in plain or klass in mappings or klass in sequences:
                base = base or klass
                continue
            if not (klass.__flags__ & (1 << 9)):  # a built-in type (Py_TPFLAGS_HEAPTYPE unset)
                raise TypeError_("returned a " + klass.__name__)
            for name, attr in list_(vars_(klass).items()):
                if name[:2] == "__" and name[-2:] == "__" and name not in harmless:
                    raise TypeError_("returned an object of a class that defines " + name)
                if name == "__dict__" and type_(attr) is not getset:
                    raise TypeError_("returned an object of a class that defines __dict__")
        if base is not None and base not in plain:
            for v in list_(base.__iter__(value)):
                check_value(v, depth + 1)
                if base in mappings:
                    check_value(base.__getitem__(value, v), depth + 1)
        try:
            own = object_.__getattribute__(value, "__dict__")
        except AttributeError_:
            return
        for v in list_(dict_.values(own)):
            check_value(v, depth + 1)

    # The tests' namespace: a function a test hands to the answer carries it (__globals__), so it is
    # put back after every call too.
    test_builtins = dict_(saved_builtins)
    test_globals = {"__name__": "__main__", "__builtins__": test_builtins}

    def wrap(fn):
        def call(*args, **kwargs):
            names = tuple_(dict_.items(test_globals))
            try:
                result = fn(*args, **kwargs)
            finally:
                restore()
                dict_.clear(test_builtins)
                dict_.update(test_builtins, saved_builtins)
                dict_.clear(test_globals)
                dict_.update(test_globals, names)
                test_globals["__builtins__"] = test_builtins
            check_value(result, 0)
            return result
        return call

    compiled = tuple_((compile_(source, "<tests>", "exec", dont_inherit=True, optimize=0), is_test)
                      for source, is_test in units)
    answer_code = None
    why = ""
    try:
        answer_code = compile_(answer, "<answer>", "exec", dont_inherit=True)
    except BaseExc as exc:
        why = "the answer does not compile: " + type_(exc).__name__
    try:
        resource.setrlimit(resource.RLIMIT_NPROC, (0, 0))
    except (OSError, ValueError):
        exit_now(3)
    sys_.addaudithook(hook)
    namespace = {"__name__": "__answer__", "__builtins__": builtins}
    loaded = False
    if answer_code is not None:
        try:
            exec_(answer_code, namespace)
            loaded = True
        except BaseExc as exc:
            why = "the answer raised " + type_(exc).__name__ + " before the tests"
        restore()
    if loaded:
        for key, value in list_(dict_.items(namespace)):
            if type_(key) is not str_ or key[:2] == "__" or key in test_builtins:
                continue
            if type_(value) is not module_type:
                test_globals[key] = wrap(value) if callable_(value) else value
    bits = ""
    broken = not loaded
    for code, is_test in compiled:
        if broken:
            if is_test:
                bits = bits + "0"
            continue
        restore()
        dict_.clear(test_builtins)
        dict_.update(test_builtins, saved_builtins)
        try:
            exec_(code, test_globals)
            ok = True
        except BaseExc as exc:
            ok = False
            if not why:
                why = "test " + str_(len_(bits) + 1) + ": " + type_(exc).__name__
        restore()
        if is_test:
            bits = bits + ("1" if ok else "0")
        elif not ok:
            broken = True
    clean = "".join([c if " " <= c <= "~" else "?" for c in why[:300]])
    write(out, ("\n__WHY__" + clean + "\n__MARKER__" + bits + "\n").encode())
    exit_now(0)


_harness(__ANSWER__, __UNITS__)
'''
