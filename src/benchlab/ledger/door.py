"""The ledger's door for errors: what ``sqlite3`` raises inside the package leaves it as a
:class:`~benchlab.errors.LedgerError`, so no module outside the ledger handles SQLite's errors.

``ledger/__init__.py`` passes every function and class it exports through :func:`guard`. A call
from outside translates on its way out; a call the package makes of its own public parts (a
``Store`` method calling another) does not, so the package's own ``except sqlite3...`` keeps
working inside. A context manager (``transaction()``) and a generator (``series_rows()``) are
guarded too, since their errors arise after the call returned (at the commit, at each row).
"""

from __future__ import annotations

import functools
import inspect
import sqlite3
import threading
from collections.abc import Callable, Generator
from typing import Any, TypeVar

from benchlab.errors import LedgerError

_T = TypeVar("_T")
_depth = threading.local()  # how many guarded calls this thread is inside
_GUARDED = "__ledger_door__"
#: The special methods of an exported class that run ledger code: opening, entering, leaving.
_SPECIAL = ("__init__", "__enter__", "__exit__")


def translate(exc: sqlite3.Error) -> LedgerError:
    """The ledger's error for what SQLite raised (raise it ``from`` ``exc``)."""
    return LedgerError(str(exc), getattr(exc, "sqlite_errorcode", None))


class _Inside:
    """One guarded step: counts this thread in while it runs and translates at the outermost."""

    __slots__ = ()

    def __enter__(self) -> None:
        _depth.n = getattr(_depth, "n", 0) + 1

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: object) -> None:
        _depth.n -= 1
        if isinstance(exc, sqlite3.Error) and _depth.n == 0:
            raise translate(exc) from exc


_INSIDE = _Inside()


class _GuardedContext:
    """A context manager of the ledger's, translating at its entry and its exit."""

    def __init__(self, inner: Any):
        self._inner = inner

    def __enter__(self) -> Any:
        with _INSIDE:
            return self._inner.__enter__()

    def __exit__(self, *exc: Any) -> Any:
        with _INSIDE:
            return self._inner.__exit__(*exc)


def _guarded_rows(inner: Generator[_T, Any, Any]) -> Generator[_T, None, None]:
    while True:
        with _INSIDE:
            try:
                item = next(inner)
            except StopIteration:
                return
        yield item


def _guard_function(fn: Callable[..., Any]) -> Callable[..., Any]:
    if getattr(fn, _GUARDED, False):
        return fn

    @functools.wraps(fn)
    def guarded(*args: Any, **kwargs: Any) -> Any:
        with _INSIDE:
            result = fn(*args, **kwargs)
        if inspect.isgenerator(result):
            return _guarded_rows(result)
        if hasattr(result, "__enter__") and hasattr(result, "__exit__") and type(result).__module__ == "contextlib":
            return _GuardedContext(result)
        return result

    setattr(guarded, _GUARDED, True)
    return guarded


def _guard_class(cls: type[_T]) -> type[_T]:
    seen: set[str] = set()
    for base in cls.__mro__:
        if base is object:
            continue
        for name, raw in vars(base).items():
            if name in seen or (name.startswith("_") and name not in _SPECIAL):
                continue
            seen.add(name)
            if isinstance(raw, classmethod):
                setattr(cls, name, classmethod(_guard_function(raw.__func__)))
            elif isinstance(raw, staticmethod):
                setattr(cls, name, staticmethod(_guard_function(raw.__func__)))
            elif isinstance(raw, property) and raw.fget is not None:
                setattr(cls, name, property(_guard_function(raw.fget), raw.fset, raw.fdel, raw.__doc__))
            elif inspect.isfunction(raw):
                setattr(cls, name, _guard_function(raw))
    return cls


def guard(obj: _T) -> _T:
    """``obj`` (a function or a class the package exports) with SQLite's errors translated on
    their way out of the package; records, states and constants are returned as they are."""
    if inspect.isfunction(obj):
        return _guard_function(obj)  # type: ignore[return-value]
    if inspect.isclass(obj) and not issubclass(obj, BaseException) and not _is_data(obj):
        return _guard_class(obj)  # type: ignore[return-value]
    return obj


def _is_data(cls: type) -> bool:
    import dataclasses
    import enum

    return dataclasses.is_dataclass(cls) or issubclass(cls, enum.Enum | tuple)
