"""The report's numbers as text (every number computed by :mod:`benchlab.stats`), and its Markdown escaping."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:

    pass


def places(spread: float | None, digits: int = 2) -> int | None:
    """Decimal places that show ``spread`` (a CI half-width, a std) to ``digits`` significant
    digits: the precision a number with that uncertainty supports.

    None when the spread is undefined, 0, or rounding noise (below 1e-12: an interval
    of equal values computed in floating point), so the caller prints the number as is.
    """
    if spread is None or not np.isfinite(spread) or spread <= 1e-12:
        return None
    return max(0, digits - 1 - int(np.floor(np.log10(abs(spread)))))


def fmt_at(value: float | None, at: int | None) -> str:
    """``value`` with ``at`` decimal places (fixed notation), or :func:`fmt` when ``at`` is None."""
    if at is None or value is None or not np.isfinite(value):
        return fmt(value)
    return f"{value:.{at}f}"


def mean_pm(mean: float | None, std: float | None, spread: float | None = None) -> str:
    """``mean ± std`` both to the decimals that ``spread`` (default: the std) supports.

    ``419.1 ± 150`` becomes ``419 ± 150``, never ``419.1 ± 1.5e+02``; a zero std prints
    ``± 0`` and an undefined one (one seed) prints the mean alone.
    """
    if mean is None or not np.isfinite(mean):
        return "—"
    if std is None or not np.isfinite(std):
        return fmt(mean)
    at = places(spread if spread is not None and spread > 0 else std)
    if at is None:
        return f"{fmt(mean)} ± 0"
    return f"{mean:.{at}f} ± {std:.{at}f}"


def fmt(value: float | None, digits: int = 4) -> str:
    """A number for a Markdown table: 4 significant digits, '—' when undefined."""
    if value is None or (isinstance(value, float) and not np.isfinite(value)):
        return "—"
    text = f"{value:.{digits}g}"
    if "e" in text and 1e-4 <= abs(value) < 10**12:  # 1.5e+02: write it out as 150
        text = f"{value:.{max(0, digits - 1 - int(np.floor(np.log10(abs(value)))))}f}"
    return text


# --------------------------------------------------------------------------- text of the Markdown files
# Every field that reaches BENCHMARK_REPORT.md or BENCHMARKS.md (a spec's names and description,
# metric names a run logged, errors, log lines) goes through one of these, so that none becomes
# markup: a '<' is written as its entity (no raw HTML), a table cell's '|' is escaped and its line
# breaks folded (the row keeps its columns), and code is fenced by more backticks than it holds.


class Raw(str):
    """Markdown that is already safe as it is (a fenced block, a code span): not escaped again."""


#: Where a template's own text needs a line break inside a table cell.
BR = "\x00br\x00"


def text(value: object) -> str:
    """``value`` as Markdown prose that opens no HTML tag (``<`` as ``&lt;``)."""
    return str(value).replace("<", "&lt;")


# What makes inline markup of a value: an entity (``&lt;`` would show as ``<``), a code span, emphasis
# and strikethrough marks, a link or image (``](``, ``][``, ``]:``). ``_`` inside a word is no
# emphasis in CommonMark, so ``exact_match`` stays as written; every other of these is escaped.
_ENTITY = re.compile(r"&(?=#[0-9]+;|#[xX][0-9a-fA-F]+;|[A-Za-z][A-Za-z0-9]*;)")
_EDGE_UNDERSCORE = re.compile(r"(?<![A-Za-z0-9])_|_(?![A-Za-z0-9])")
_LINK_CLOSE = re.compile(r"\](?=[(\[:])")
# A line of a block that a Markdown reader would take for a heading, quote, list, rule, table or code.
_BLOCK_START = re.compile(r"^(#|>|[-+=])")
_ORDERED_START = re.compile(r"^(\d+)([.)])")


def inline(value: object) -> str:
    """``value`` as Markdown inline text that is no markup but ``<`` (:func:`text` writes that):
    one line, a backslash and every mark that would start a code span, emphasis, a link, an image
    or an entity escaped, so a reader shows the value as it is."""
    out = " ".join(str(value).split()).replace("\\", "\\\\")
    out = _ENTITY.sub("&amp;", out)
    for mark in "`*~":
        out = out.replace(mark, "\\" + mark)
    out = _EDGE_UNDERSCORE.sub(r"\\_", out)
    return _LINK_CLOSE.sub(r"\\]", out)


def prose(value: object) -> str:
    """``value`` (a name, a note, a message) inside a sentence: :func:`inline`, then :func:`text`."""
    return text(inline(value))


def block(value: object) -> str:
    """``value`` (a description: several lines, maybe paragraphs) as paragraphs of plain text: each
    line :func:`inline`, its indentation dropped (no code block) and a mark that would start a
    heading, quote, list, rule or table escaped."""
    lines = []
    for line in str(value).splitlines():
        line = _BLOCK_START.sub(r"\\\1", inline(line).replace("|", "\\|"))
        lines.append(_ORDERED_START.sub(r"\1\\\2", line))
    return text("\n".join(lines))


def cell(value: object) -> str:
    """``value`` as one Markdown table cell: one line, ``|`` escaped, no markup (:func:`inline`)."""
    return text(inline(value).replace("|", "\\|"))


def _longest_run(value: str, char: str = "`") -> int:
    import re

    return max((len(m) for m in re.findall(re.escape(char) + "+", value)), default=0)


def fence(value: object, lang: str = "", indent: int = 0) -> Raw:
    """``value`` as a fenced code block whose fence is longer than any backtick run inside it
    (so a log line of three backticks cannot close it), each line indented by ``indent``."""
    body = str(value)
    marks = "`" * max(3, _longest_run(body) + 1)
    pad = " " * indent
    lines = [f"{marks}{lang}", *body.split("\n"), marks]
    return Raw("\n".join(pad + line if line else line for line in lines))


def code_span(value: object) -> Raw:
    """``value`` as inline code, delimited by more backticks than it holds."""
    body = " ".join(str(value).split("\n"))
    marks = "`" * (_longest_run(body) + 1)
    pad = " " if body.startswith("`") or body.endswith("`") else ""
    return Raw(f"{marks}{pad}{body}{pad}{marks}")


def finalize(value: object) -> object:
    """Jinja's ``finalize`` for the report's template: every value is prose (:func:`text`)
    unless it is :class:`Raw`."""
    if isinstance(value, Raw):
        return str(value)
    return text("" if value is None else value)
