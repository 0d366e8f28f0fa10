"""The typer application, its consoles and help rendering.

Commands raise errors of the tree in :mod:`benchlab.errors` (a bad combination of flags is a
:class:`~benchlab.errors.UsageError`); :func:`benchlab.cli.main` is the one place where they
become a one-line message and an exit code."""

from __future__ import annotations

import inspect
import os
import re
import sys
from collections.abc import Callable
from typing import Any

import typer
from rich.console import Console

app = typer.Typer(
    name="benchlab",
    help="Run every config on every task over many seeds, keep every run, and compare with statistical rigour.",
    no_args_is_help=True,
    add_completion=True,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)

# stdout carries results (tables, JSON); stderr carries progress and errors.
console = Console(highlight=False, soft_wrap=True)
err_console = Console(stderr=True, highlight=False, soft_wrap=True)


def print_json(data: Any) -> None:
    """Write JSON to stdout, exactly as scripts will read it."""
    import json

    sys.stdout.write(json.dumps(data, indent=2, default=str, allow_nan=False) + "\n")


_DEFAULT_NOTE = re.compile(r"\s*[(\[]default: ((?:[^()\[\]]|\([^()]*\))*)[)\]]")
_UNESCAPED_BRACKET = re.compile(r"(?<!\\)\[")


def plain_help(text: str) -> str:
    """A help text as written, ready for typer's rich rendering: a default that the text states
    itself (for options whose default is computed) moves to the end as ``[default: ...]``, the
    place typer puts the defaults it knows, and brackets are literal, not rich markup (which
    would swallow ``[default: ...]`` whole)."""
    if "\\[" in text:
        return text  # done already: an option object can be shared by several commands
    notes = _DEFAULT_NOTE.findall(text)
    text = _DEFAULT_NOTE.sub("", text).strip()
    if notes:
        text = f"{text.rstrip('.')}. " + " ".join(f"[default: {n}]" for n in notes)
    return _UNESCAPED_BRACKET.sub(r"\\[", text)


def polish_help(typer_app: typer.Typer) -> None:
    """Make every command's help texts :func:`plain_help`, flags go without a type label, and
    the metavars of :data:`LIVE_METAVARS` list their registry's names as they are now.

    Called once, after the commands are registered, so that no command module needs to
    remember how typer renders help.
    """
    from typer.models import ParameterInfo

    callbacks = [c.callback for c in typer_app.registered_commands]
    if typer_app.registered_callback is not None:
        callbacks.append(typer_app.registered_callback.callback)
    for callback in callbacks:
        if callback is None:
            continue
        for param in inspect.signature(callback).parameters.values():
            info = param.default
            if isinstance(info, ParameterInfo) and info.help:
                info.help = plain_help(info.help)
    _no_type_label_on_flags()


def _backend_names() -> list[str]:
    from benchlab.execute.base import known_backends

    return known_backends()


#: Placeholders of metavars whose choices a registry holds, read each time the help is shown, so
#: that what was registered since start-up (in this process, or by an installed package) is listed.
LIVE_METAVARS: dict[str, Callable[[], list[str]]] = {"BACKEND": _backend_names}


def backend_name(value: str) -> str:
    """``--backend``'s value, a name the backend registry knows (a usage error, exit 2, otherwise)."""
    names = _backend_names()
    if value not in names:
        raise typer.BadParameter(f"unknown backend {value!r}; choose one of: {', '.join(names)}")
    return value


def backend_option(help: str) -> Any:
    """A ``--backend`` option whose choices, in its help, its check and its completion, are the
    backend registry's (:func:`benchlab.execute.base.known_backends`), never a list written here."""

    def complete(incomplete: str) -> list[str]:
        return [n for n in _backend_names() if n.startswith(incomplete)]

    return typer.Option(None, "--backend", help=help, metavar="BACKEND", parser=backend_name,
                        autocompletion=complete)


def _no_type_label_on_flags() -> None:
    # typer labels every option with its type, flags included: `--json <bool>`. A flag takes
    # no value, so it gets no label (as in click's own help).
    from typer.core import TyperOption

    label = getattr(TyperOption, "display_type_rich", None)
    if label is None or getattr(label, "_flags_unlabelled", False):
        return

    def display_type_rich(self: Any, ctx: Any) -> str | None:
        if self.metavar in LIVE_METAVARS:
            return "|".join(LIVE_METAVARS[self.metavar]())
        return None if self.is_flag and self.metavar is None else label(self, ctx)

    display_type_rich._flags_unlabelled = True  # type: ignore[attr-defined]
    TyperOption.display_type_rich = display_type_rich  # type: ignore[method-assign]


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
