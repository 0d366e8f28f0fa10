"""``from: {regex: PATTERN}``: a pattern over a log file (``file``, default ``train.log``), ANSI
colours stripped; the value is the group named ``value`` (or the only group), the step the group
named ``step`` if present. ``series: true`` keeps every match as a step series."""

from __future__ import annotations

import re
from pathlib import Path

from pydantic import model_validator

from benchlab.collect.extractors import (
    ExtractFailed,
    Extractor,
    Series,
    SharedOptions,
    as_series,
    run_file,
    strip_ansi,
    to_float,
)
from benchlab.names.run_files import LOG_FILE


class RegexOptions(SharedOptions):
    """A ``regex`` source: the pattern, and ``file`` (default ``train.log``)."""

    regex: str
    # The pattern is used as written: its braces are the regex's ({2,3}), not placeholders.
    literal = ("regex",)
    described = "the run's log by a regex"

    @model_validator(mode="after")
    def _one_value_group(self) -> RegexOptions:
        try:
            pattern = re.compile(self.regex)
        except re.error as exc:
            raise ValueError(f"invalid regex {self.regex!r}: {exc}") from None
        if "value" not in pattern.groupindex and pattern.groups != 1:
            raise ValueError(
                f"regex {self.regex!r} must have a group named 'value' or exactly one group"
            )
        return self


# A number as logs print it, non-finite ones included: 816.18, -1e-3, .5, nan, NaN, inf, -inf, Infinity.
NUMBER = (r"[-+]?(?:(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?"
          r"|(?:[nN][aA][nN]|[iI][nN][fF](?:[iI][nN][iI][tT][yY])?)(?!\w))")  # not 'nanoseconds'


def _value_group_span(pattern: str) -> tuple[int, int] | None:
    """Where the value group (``(?P<value>...)``, else the first capturing group) sits in ``pattern``."""
    start = pattern.find("(?P<value>")
    i, depth, in_class, opened = 0, 0, False, None
    while i < len(pattern):
        c = pattern[i]
        if c == "\\":
            i += 2
            continue
        if in_class:
            in_class = c != "]"
        elif c == "[":
            in_class = True
            if pattern[i + 1:i + 2] == "]":
                i += 1  # a ']' first in a class is a literal
        elif c == "(":
            depth += 1
            if opened is None and (i == start or (start < 0 and pattern[i + 1:i + 2] != "?")):
                opened = (i, depth)
        elif c == ")":
            if opened is not None and depth == opened[1]:
                return opened[0], i + 1
            depth -= 1
        i += 1
    return None


def _non_finite_matches(pattern: re.Pattern[str], text: str) -> list[re.Match[str]]:
    """Matches of ``pattern`` with its value group widened to read any number, whose value is nan or ±inf.

    A value group such as ``[-+.\\deE]+`` cannot match ``nan``: the line that says
    the run diverged would be skipped and an older, finite value reported in its place.
    """
    span = _value_group_span(pattern.pattern)
    if span is None:
        return []
    name = "(?P<value>" if "value" in pattern.groupindex else "("
    widened = pattern.pattern[:span[0]] + name + NUMBER + ")" + pattern.pattern[span[1]:]
    try:
        wide = re.compile(widened, pattern.flags)
    except re.error:
        return []
    group = "value" if "value" in wide.groupindex else 1
    found = []
    for m in wide.finditer(text):
        raw = m.group(group)
        if raw and raw.lstrip("+-")[:1].lower() in ("n", "i"):
            found.append(m)
    return found


def extract_regex(run_dir: Path, source: RegexOptions) -> tuple[float, Series | None]:
    """Last match (or every match, with ``series: true``) of a pattern over a log file.

    Lines whose value is ``nan`` or ``inf`` count even when the pattern's value
    group cannot match them (``[-+.\\deE]+``): a diverged run reports its ``nan``,
    never an older line's value.
    """
    name = source.file or LOG_FILE
    text = strip_ansi(run_file(run_dir, name).read_text(encoding="utf-8", errors="replace"))
    pattern = re.compile(source.regex)
    by_start = {m.start(): m for m in pattern.finditer(text)}
    # On the same line the widened match wins: '[-+.\\deE]+' reads '-inf' as '-'.
    by_start.update((m.start(), m) for m in _non_finite_matches(pattern, text))
    matches = [by_start[k] for k in sorted(by_start)]
    if not matches:
        raise ExtractFailed(f"no line of {name} matches {source.regex!r}")
    has_step = "step" in pattern.groupindex

    def value(m: re.Match[str], where: str) -> float:
        return to_float(m.group("value") if "value" in m.re.groupindex else m.group(1), where)

    if source.series:
        points = [
            (to_float(m.group("step"), f"{name} match {i + 1} step") if has_step else float(i),
             value(m, f"{name} match {i + 1}"))
            for i, m in enumerate(matches)
        ]
        steps, vals = as_series(points)
        return float(vals[-1]), (steps, vals)
    return value(matches[-1], f"{name} last match"), None


EXTRACTOR = Extractor("regex", RegexOptions, extract_regex)
