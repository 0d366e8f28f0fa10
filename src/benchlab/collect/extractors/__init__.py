"""Extractors: how a metric is read from a run that could not write benchlab's files, and their
registry.

A spec names an extractor by a key of its metric's source, ``from: {<kind>: <what>, <option>: ...}``,
checked against this registry (as ``backend:`` is against the backends'). Each module of this package
is one extractor, known by its module's name (``regex``, ``json``, ``jsonl``, ``csv``, ``lm_eval``,
``tensorboard``) and imported the first time a spec names it; it defines ``EXTRACTOR``, an
:class:`Extractor`: its name, its options (a :class:`benchlab.spec.SourceOptions` subclass, the
pydantic model that validates the whole ``from:`` mapping, with file and line, and whose text
fields get ``{task}`` and ``{config}`` filled in per run) and its reader
``(run_dir, options) -> (final value, series or None)``, which raises :class:`ExtractFailed` with
where and why. Paths in a source are relative to the run directory.

Adding an extractor
-------------------
Write ``collect/extractors/<kind>.py`` with its options model (a field named ``<kind>``, or aliased
to it, holds the value the spec writes after the kind; a ``model_validator`` checks the options
together), its reader and ``EXTRACTOR = Extractor("<kind>", Options, read)``. Nothing else changes:
the spec's check, ``{task}`` filling, the search's wording and collecting the run all take it from
here. Another package declares one by an entry point in the ``benchlab.extractors`` group
(``module:EXTRACTOR``); a test or a notebook calls :func:`register`.
"""

from __future__ import annotations

import functools
import importlib
import pkgutil
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from benchlab.errors import BenchlabError
from benchlab.spec import SourceOptions

if TYPE_CHECKING:
    import numpy as np

Series = tuple["np.ndarray", "np.ndarray"]
O = TypeVar("O", bound=SourceOptions)  # noqa: E741

#: The entry-point group other packages declare their extractors in (``name = "module:EXTRACTOR"``).
ENTRY_POINT_GROUP = "benchlab.extractors"

# CSI sequences (colours, cursor moves) and OSC sequences (titles, hyperlinks).
_ANSI = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[@-Z\\-_]")


class ExtractFailed(BenchlabError):
    """A metric could not be read; the message says where and why."""


@dataclass(frozen=True)
class Extractor(Generic[O]):
    """One way to read a metric: the key that names it in a spec's ``from:``, the model of its
    options, and the reader: ``read(run_dir, options) -> (final value, (steps, values) or None)``
    (the series when ``options.series`` asks for it), raising :class:`ExtractFailed`."""

    name: str
    options: type[O]
    read: Callable[[Path, O], tuple[float, Series | None]]


class SharedOptions(SourceOptions):
    """The options the shipped extractors read, each accepted by all of them as it always was
    (a spec that validated before still does). A new extractor declares only its own."""

    file: str | None = None
    task: str | None = None
    tag: str | None = None
    key: str | None = None
    step_key: str | None = None
    column: str | None = None
    step_column: str | None = None


_REGISTRY: dict[str, Extractor[Any]] = {}


def register(extractor: Extractor[Any]) -> Extractor[Any]:
    """Make ``extractor`` known by its name in this process (tests, notebooks)."""
    _REGISTRY[extractor.name] = extractor
    return extractor


@functools.cache
def _shipped() -> tuple[str, ...]:
    return tuple(m.name for m in pkgutil.iter_modules(__path__) if not m.name.startswith("_"))


@functools.cache
def _entry_points() -> dict[str, str]:
    from importlib.metadata import entry_points

    return {ep.name: ep.value for ep in entry_points(group=ENTRY_POINT_GROUP)}


def known_extractors() -> list[str]:
    """Every extractor name :func:`get_extractor` can find, sorted (none of them imported)."""
    return sorted({*_REGISTRY, *_shipped(), *_entry_points()})


def get_extractor(name: str) -> Extractor[Any]:
    """The extractor known as ``name``: registered in-process, shipped as a module of this package,
    or declared by an installed package's entry point (imported on first use). KeyError if none."""
    if name not in _REGISTRY:
        if name in _shipped():
            found = importlib.import_module(f"{__name__}.{name}").EXTRACTOR
        elif name in _entry_points():
            module, _, attr = _entry_points()[name].partition(":")
            found = getattr(importlib.import_module(module), attr or "EXTRACTOR")
        else:
            raise KeyError(name)
        _REGISTRY[name] = found
    return _REGISTRY[name]


# -- what the readers share ---------------------------------------------------------------------


def strip_ansi(text: str) -> str:
    """``text`` without ANSI escape sequences (colour codes and the like)."""
    return _ANSI.sub("", text)


def to_float(raw: Any, where: str) -> float:
    """``raw`` as a number, or :class:`ExtractFailed` saying ``where`` and what was found."""
    if isinstance(raw, bool):
        raise ExtractFailed(f"{where}: expected a number, got {raw!r}")
    try:
        return float(raw)
    except (TypeError, ValueError):
        raise ExtractFailed(f"{where}: expected a number, got {raw!r}") from None


def run_file(run_dir: Path, name: str) -> Path:
    """The file ``name`` of the run directory, or :class:`ExtractFailed` listing the files there."""
    path = run_dir / name
    if not path.exists():
        present = sorted(p.name for p in run_dir.iterdir()) if run_dir.exists() else []
        raise ExtractFailed(f"could not find {name} in the run directory; "
                            f"files there: {', '.join(present) or 'none'}")
    return path


def as_series(points: list[tuple[float, float]]) -> Series:
    """(steps, values) arrays of ``(step, value)`` points."""
    import numpy as np
    arr = np.asarray(points, dtype=float).reshape(-1, 2)
    return arr[:, 0].copy(), arr[:, 1].copy()
