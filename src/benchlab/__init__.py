"""benchlab: every config on every task over many seeds, kept, compared with statistical rigour.

``from benchlab import log`` stays import-light (standard library only), so a
training script pays nothing for it; the heavier names load on first use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from benchlab.runlog import log, summary

__version__ = "0.1.0"

__all__ = [
    "BenchlabError",
    "Spec",
    "__version__",
    "expand",
    "load",
    "load_spec",
    "log",
    "summary",
]

_LAZY = {
    "BenchlabError": ("benchlab.errors", "BenchlabError"),
    "Spec": ("benchlab.spec", "Spec"),
    "load_spec": ("benchlab.spec", "load_spec"),
    "expand": ("benchlab.plan", "expand"),
    "load": ("benchlab.results", "load"),
}

if TYPE_CHECKING:
    from benchlab.errors import BenchlabError
    from benchlab.plan import expand
    from benchlab.results import load
    from benchlab.spec import Spec, load_spec


def __getattr__(name: str) -> Any:
    try:
        module_name, attr = _LAZY[name]
    except KeyError:
        raise AttributeError(f"module 'benchlab' has no attribute {name!r}") from None
    import importlib

    value = getattr(importlib.import_module(module_name), attr)
    globals()[name] = value
    return value
