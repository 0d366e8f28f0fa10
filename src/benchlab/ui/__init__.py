"""``benchlab ui``: a live, offline web dashboard of results folders (the ``serve`` extra).

:mod:`~benchlab.ui.library` finds the benchmarks and tells what changed in them,
:mod:`~benchlab.ui.views` reads what each page shows (the report's numbers through the
report's own functions; :mod:`~benchlab.ui.first_tables` computes the first ones in a process
of their own while the server starts), and :mod:`~benchlab.ui.app` serves the pages. Nothing here writes a
ledger or a run folder. What each page shows is described in ``docs/ui.md``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from benchlab.names.exports import export_lazily

if TYPE_CHECKING:
    from benchlab.ui.first_tables import FirstTables
    from benchlab.ui.library import Library, NotFound

# Nothing imported until asked for: `benchlab ui` starts its first-tables worker
# (benchlab.ui.first_tables) before it loads the rest.
_WHERE = {"Library": "benchlab.ui.library", "NotFound": "benchlab.ui.library"}
export_lazily(__name__, _WHERE)

__all__ = ["Library", "NotFound", "create_app"]


def create_app(library: Library, *, token: str | None = None,  # type: ignore[no-untyped-def]
               allowed_hosts: list[str] | None = None, first_tables: FirstTables | None = None):
    """The FastAPI application serving ``library`` (see :func:`benchlab.ui.app.create_app`)."""
    from benchlab.ui.app import create_app as make

    return make(library, token=token, allowed_hosts=allowed_hosts, first_tables=first_tables)
