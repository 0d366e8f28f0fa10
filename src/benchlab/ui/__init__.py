"""``benchlab ui``: a live, offline web dashboard of results folders (the ``serve`` extra).

:mod:`~benchlab.ui.library` finds the benchmarks and tells what changed in them,
:mod:`~benchlab.ui.views` reads what each page shows (the report's numbers through the
report's own functions), and :mod:`~benchlab.ui.app` serves the pages. Nothing here writes a
ledger or a run folder. What each page shows is described in ``docs/ui.md``.
"""

from benchlab.ui.library import Library, NotFound

__all__ = ["Library", "NotFound", "create_app"]


def create_app(library: Library, *, token: str | None = None,  # type: ignore[no-untyped-def]
               allowed_hosts: list[str] | None = None):
    """The FastAPI application serving ``library`` (see :func:`benchlab.ui.app.create_app`)."""
    from benchlab.ui.app import create_app as make

    return make(library, token=token, allowed_hosts=allowed_hosts)
