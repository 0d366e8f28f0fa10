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
    "Comparison",
    "RunResult",
    "Spec",
    "__version__",
    "compare",
    "expand",
    "load",
    "load_spec",
    "log",
    "run",
    "summary",
]

_LAZY = {
    "BenchlabError": ("benchlab.errors", "BenchlabError"),
    "Spec": ("benchlab.spec", "Spec"),
    "load_spec": ("benchlab.spec", "load_spec"),
    "expand": ("benchlab.plan", "expand"),
    "load": ("benchlab.results", "load"),
    "run": ("benchlab.execute.api", "run"),
    "RunResult": ("benchlab.execute.api", "RunResult"),
    "compare": ("benchlab.report.comparison", "compare"),
    "Comparison": ("benchlab.report.comparison", "Comparison"),
}

if TYPE_CHECKING:
    from benchlab.errors import BenchlabError
    from benchlab.execute.api import RunResult, run
    from benchlab.plan import expand
    from benchlab.report.comparison import Comparison, compare
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
