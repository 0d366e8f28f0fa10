"""A benchmark's life across versions: what changed between two of them and which scores moved
(:mod:`~benchlab.history.diff`), the pre-registered analysis plan
(:mod:`~benchlab.history.preregistration`), and publishing a results folder
(:mod:`~benchlab.history.export`).

The diff's names load on first use: a sweep's opening registers the analysis plan through
:mod:`~benchlab.history.preregistration`, and importing it should not load the statistics the
diff is computed with.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__all__ = ["Change", "Side", "VersionDiff", "diff_results", "diff_versions", "read_side"]

if TYPE_CHECKING:
    from benchlab.history.diff import Change, Side, VersionDiff, diff_results, diff_versions, read_side


def __getattr__(name: str) -> Any:
    if name not in __all__:
        raise AttributeError(f"module 'benchlab.history' has no attribute {name!r}")
    from benchlab.history import diff

    value = getattr(diff, name)
    globals()[name] = value
    return value
