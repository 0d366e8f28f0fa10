"""How a value becomes words of a shell command, and numbers that keep their spelling.

One rule for every value substituted into a command, whether it comes from a
``{param}`` placeholder or a ``${variable}``:

- a string is one shell word, quoted where the shell would split or expand it
  (``a b`` -> ``'a b'``; ``''`` stays an explicit empty word);
- a number is written as the user wrote it where that is known (``-s steps=1e2``
  stays ``1e2``), else as Python writes it;
- ``true``/``false`` for booleans;
- a list is its items as separate words, each quoted on its own; an empty list
  and ``null`` are no words at all, so a flag can be left out;
- a mapping is one word of compact JSON.
"""

from __future__ import annotations

import json
import re
import shlex
from typing import Any

# A YAML 1.2 float that YAML 1.1 (PyYAML) reads as a string: an exponent without a dot.
EXPONENT_FLOAT = re.compile(r"[-+]?(?:[0-9][0-9_]*(?:\.[0-9_]*)?|\.[0-9_]+)[eE][-+]?[0-9]+\Z")


class WrittenFloat(float):
    """A float that remembers how it was written (``1e2``), to render it that way."""

    written: str

    def __new__(cls, value: float, written: str) -> WrittenFloat:
        obj = super().__new__(cls, value)
        obj.written = written
        return obj

    def __getnewargs__(self) -> tuple[float, str]:  # type: ignore[override]  # copies keep the spelling
        return float(self), self.written

    def __str__(self) -> str:
        return self.written

    def __format__(self, format_spec: str) -> str:
        return self.written if not format_spec else float(self).__format__(format_spec)


class WrittenInt(int):
    """An int that remembers how it was written (``1_000``, ``0x10``), to render it that way."""

    written: str

    def __new__(cls, value: int, written: str) -> WrittenInt:
        obj = super().__new__(cls, value)
        obj.written = written
        return obj

    def __getnewargs__(self) -> tuple[int, str]:  # type: ignore[override]
        return int(self), self.written

    def __str__(self) -> str:
        return self.written

    def __format__(self, format_spec: str) -> str:
        return self.written if not format_spec else int(self).__format__(format_spec)


def as_written(value: Any, text: str) -> Any:
    """``value`` (a number parsed from ``text``) wrapped to keep ``text`` where the two differ."""
    text = text.strip()
    if isinstance(value, bool) or not isinstance(value, int | float):
        return value
    if str(value) == text:
        return value
    return WrittenInt(value, text) if isinstance(value, int) else WrittenFloat(value, text)


_SCALARS = (str, int, float, bool, type(None))


def plain(value: Any) -> Any:
    """``value`` with every remembered spelling dropped (for storage, YAML and JSON files)."""
    if value.__class__ is dict and all(v.__class__ in _SCALARS for v in value.values()):
        return dict(value)  # the common case: nothing to drop
    if isinstance(value, WrittenFloat):
        return float(value)
    if isinstance(value, WrittenInt):
        return int(value)
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [plain(v) for v in value]
    return value


def canonical(value: Any) -> Any:
    """``value`` as it enters a run id: a number keeps its spelling (``1e-3`` and ``0.001`` are
    different commands), so it is hashed as the text it renders as."""
    if isinstance(value, WrittenFloat | WrittenInt):
        return value.written
    if isinstance(value, dict):
        return {k: canonical(v) for k, v in value.items()}
    if isinstance(value, list):
        return [canonical(v) for v in value]
    return value


def text_of(value: Any, format_spec: str = "") -> str:
    """``value`` as one piece of text, unquoted (environment values, names, messages)."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, dict | list):
        return json.dumps(plain(value), separators=(",", ":"))
    return format(value, format_spec)


def shell_words(value: Any, format_spec: str = "") -> str:
    """``value`` as shell words, following the rules in this module's docstring."""
    if value is None:
        return ""
    if isinstance(value, list | tuple):
        return " ".join(shlex.quote(text_of(v, format_spec)) for v in value if v is not None)
    return shlex.quote(text_of(value, format_spec))
