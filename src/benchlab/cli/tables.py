"""Tables of numbers on a terminal of any width: numbers are never cut, the table wraps instead.

rich shrinks a table that is too wide by cutting cells (``6.65e-48`` becomes ``6.65…``),
which for a table of statistics is a wrong number on the screen. Here a number column
is never narrower than its widest line, names fold onto more lines, and when the
columns still do not fit, the table continues below (as pandas wraps a wide frame):
each part repeats the key columns (task, config) that say which row is which.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from rich.console import Console
from rich.markup import escape
from rich.table import Table

#: What one column costs beyond its text with rich's default box: a space each side and a rule.
COLUMN_OVERHEAD = 3
#: The narrowest a name column is counted as when deciding what fits; it may fold narrower.
NAME_WIDTH = 10


@dataclass(frozen=True)
class Column:
    """A column: its header, whether it holds numbers, and whether it names the row (repeated in
    every part of a wrapped table). A number column's header is not wrapped: break a long one
    with a newline (``"95% CI\\n(t)"``)."""

    header: str
    numeric: bool = True
    key: bool = False


def _lines_width(text: str) -> int:
    """The width of the widest line of ``text``."""
    return max((len(line) for line in text.splitlines()), default=0)


def _widths(columns: Sequence[Column], rows: Sequence[Sequence[str]]) -> list[int]:
    """The width each column is counted at: a number column's widest line, a name column's
    natural width up to :data:`NAME_WIDTH` (it folds when narrower)."""
    widths = []
    for i, col in enumerate(columns):
        natural = max([_lines_width(row[i]) for row in rows] + [_lines_width(col.header)])
        widths.append(natural if col.numeric else min(natural, NAME_WIDTH))
    return widths


def _parts(columns: Sequence[Column], widths: list[int], width: int) -> list[list[int]]:
    """The columns of each part of the table, the key columns in every part."""
    keys = [i for i, col in enumerate(columns) if col.key]
    base = 1 + sum(widths[i] + COLUMN_OVERHEAD for i in keys)
    parts: list[list[int]] = []
    used = base
    for i, col in enumerate(columns):
        if col.key:
            continue
        cost = widths[i] + COLUMN_OVERHEAD
        if parts and used + cost <= width:
            parts[-1].append(i)
            used += cost
        else:
            parts.append([i])
            used = base + cost
    return [sorted(keys + part) for part in parts] or [keys]


def print_table(console: Console, title: str, columns: Sequence[Column], rows: Sequence[Sequence[str]]) -> None:
    """Print ``rows`` (plain text) under ``title``, wrapped into as many parts as the console's
    width needs, no number cut.

    A cell or a number column's header may hold several lines (a value over its confidence
    interval): they are joined on one line where the whole table then fits the width.
    """
    def one_line(text: str) -> str:
        return " ".join(text.splitlines())

    wide_columns = [Column(one_line(c.header), c.numeric, c.key) for c in columns]
    wide_rows = [[one_line(cell) for cell in row] for row in rows]
    if len(_parts(wide_columns, _widths(wide_columns, wide_rows), console.width)) == 1:
        columns, rows = wide_columns, wide_rows
    widths = _widths(columns, rows)
    for n, part in enumerate(_parts(columns, widths, console.width)):
        table = Table(title=escape(title if n == 0 else f"{title} (continued)"), title_justify="left")
        for i in part:
            col = columns[i]
            if col.numeric:
                # no_wrap keeps rich from shrinking it; min_width from cutting it when others shrink.
                table.add_column(escape(col.header), justify="right", no_wrap=True, min_width=widths[i])
            else:
                table.add_column(escape(col.header), overflow="fold")
        for row in rows:
            table.add_row(*(escape(row[i]) for i in part))
        console.print(table)
