"""The `benchlab` command. Each module in this package adds its commands to ``app``.

Adding a command never touches this file: every ``benchlab.cli.cmd_*`` module is
imported at start-up and registers its commands on ``benchlab.cli.app.app``.
Command modules import heavy libraries inside their functions, so that
``benchlab --help`` and ``benchlab run`` start fast.
"""

from __future__ import annotations

import importlib
import pkgutil
import sys

from benchlab.cli.app import app, debug_enabled, err_console, polish_help


def _register() -> None:
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
        if info.name.startswith("cmd_"):
            importlib.import_module(f"{__name__}.{info.name}")
    polish_help(app)


def main(argv: list[str] | None = None) -> None:
    """Entry point of the console script: runs the app, turning benchlab errors into exit codes."""
    from rich.markup import escape

    from benchlab.errors import BenchlabError, LedgerError

    _register()
    try:
        # Standalone mode: click prints its own usage errors and exits 2.
        app(args=argv, prog_name="benchlab")
    except LedgerError as exc:
        # A ledger damaged in a way opening it did not show: one line, and the way out.
        if debug_enabled():
            raise
        err_console.print(f"[bold red]error:[/] the ledger (benchlab.db) is unreadable: {escape(str(exc))}; "
                          "`benchlab collect --rebuild RESULTS` recreates it from the run directories")
        sys.exit(1)
    except BenchlabError as exc:
        if debug_enabled():
            raise
        err_console.print(f"[bold red]error:[/] {escape(str(exc))}")
        sys.exit(exc.exit_code)
    except ModuleNotFoundError as exc:
        # An optional dependency that no command checked for up front: the same one line.
        from benchlab.names.extras import extra_of, missing_extra

        if extra_of(exc.name) is None or debug_enabled():
            raise
        words = [a for a in (sys.argv[1:] if argv is None else argv) if not a.startswith("-")]
        what = f"benchlab {words[0]}" if words else "benchlab"
        err_console.print(f"[bold red]error:[/] {escape(str(missing_extra(exc.name or '', what)))}")
        sys.exit(2)
    except KeyboardInterrupt:
        err_console.print("[yellow]interrupted[/]")
        sys.exit(130)


__all__ = ["app", "main"]
