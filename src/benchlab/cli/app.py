"""The typer application and the one place where errors become messages and exit codes."""

from __future__ import annotations

import os
import sys
from typing import Any

import typer
from rich.console import Console

app = typer.Typer(
    name="benchlab",
    help="Run every config on every task over many seeds, keep every run, and compare with statistical rigour.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)

# stdout carries results (tables, JSON); stderr carries progress and errors.
console = Console(highlight=False, soft_wrap=True)
err_console = Console(stderr=True, highlight=False, soft_wrap=True)


def fail(message: str, code: int = 2) -> typer.Exit:
    """Print one error line and return the Exit to raise."""
    err_console.print(f"[bold red]error:[/] {message}", markup=True, highlight=False)
    return typer.Exit(code)


def print_json(data: Any) -> None:
    """Write JSON to stdout, exactly as scripts will read it."""
    import json

    sys.stdout.write(json.dumps(data, indent=2, default=str, allow_nan=False) + "\n")


def debug_enabled() -> bool:
    return os.environ.get("BENCHLAB_DEBUG", "") not in ("", "0")


def _print_version(value: bool) -> None:
    # An eager option's callback runs while the arguments are parsed, before click looks for
    # a command: `benchlab --version` needs none.
    if value:
        from benchlab import __version__

        console.print(f"benchlab {__version__}")
        raise typer.Exit(0)


@app.callback()
def _root(
    version: bool = typer.Option(False, "--version", help="Print the version and exit.", is_eager=True,
                                 callback=_print_version, expose_value=True),
) -> None:
    """Run every config on every task over many seeds, keep every run, compare with statistical rigour."""
