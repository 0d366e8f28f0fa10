"""A package's public names, each loaded from its module when first asked for (PEP 562).

A package whose ``__init__`` imports its own modules makes every import of one of them run the
others' imports, and two threads importing two of its modules at once can deadlock on CPython's
per-module locks (a submodule's lock is taken before its package's); CPython then hands one of
them a half-initialised module (``cannot import name ... from partially initialized module``).
A package that exports through :func:`export_lazily` imports none of its modules until a name
is asked for. With modules that import each other without a cycle (the tests check it for each
such package), concurrent first imports are then safe.
"""

from __future__ import annotations

import importlib
import sys
import types
from collections.abc import Mapping
from typing import Any


def export_lazily(package: str, where: Mapping[str, str]) -> None:
    """Have the package named ``package`` (called from its ``__init__``) load each name of
    ``where`` (public name -> the dotted module defining it) from its module on first access.

    The names named as one of the package's modules (``benchlab.stats.aggregate``, the function,
    and the module ``benchlab.stats.aggregate``; ``benchlab.report.leaderboard``, a function of
    ``benchlab.report.writer``, and the module of the leaderboard's text) stay the names: the
    import system binds each module it loads on its package, which would otherwise hide them, as
    an eager ``__init__``'s own import of the name did.
    """
    table = dict(where)
    module = sys.modules[package]

    class _Package(types.ModuleType):
        def __getattr__(self, name: str) -> Any:
            source = table.get(name)
            if source is None:
                raise AttributeError(f"module {package!r} has no attribute {name!r}")
            value = getattr(importlib.import_module(source), name)
            self.__dict__[name] = value
            return value

        def __setattr__(self, name: str, value: Any) -> None:
            if isinstance(value, types.ModuleType) and name in table and value.__name__ == f"{package}.{name}":
                return
            super().__setattr__(name, value)

        def __dir__(self) -> list[str]:
            return sorted(set(self.__dict__) | set(table))

    module.__class__ = _Package
