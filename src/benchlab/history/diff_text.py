"""A :class:`~benchlab.history.diff.VersionDiff` as Markdown (in the manner of asv's regression
list) and as CSV rows."""

from __future__ import annotations

from typing import NamedTuple

from benchlab.history.diff import IMPROVEMENT, NO_CHANGE, REGRESSION, UNDETERMINED, Change, VersionDiff

#: asv's marks, with a goal-aware meaning: ``+`` worse, ``-`` better, ``~`` no detectable change;
#: ``?`` for a change the statistics cannot judge.
MARKS = {REGRESSION: "+", IMPROVEMENT: "-", NO_CHANGE: "~", UNDETERMINED: "?"}



class ChangeRow(NamedTuple):
    """One line of ``benchlab diff --csv``: a :class:`Change`'s columns, in the file's order
    (None is written as an empty cell)."""

    task: str
    config: str
    metric: str
    goal: str
    verdict: str
    paired: bool
    n_before: int
    n_after: int
    mean_before: float
    mean_after: float
    diff: float | None
    ci_low: float | None
    ci_high: float | None
    ratio: float | None
    p_value: float | None
    p_holm: float | None
    direction: str  # worse / better / unchanged, by the metric's goal
    relative_change: float | None  # (after - before) / |before|

    @classmethod
    def of(cls, c: Change) -> ChangeRow:
        return cls(c.task, c.config, c.metric, c.goal, c.verdict, c.paired, c.n_before, c.n_after, c.mean_before,
                   c.mean_after, c.diff, c.ci_low, c.ci_high, c.ratio, c.p_value, c.p_holm, c.direction,
                   c.relative)


CSV_COLUMNS: tuple[str, ...] = ChangeRow._fields


def _g(x: float | None, digits: int = 4) -> str:
    return "—" if x is None else f"{x:.{digits}g}"


def _signed(x: float | None, at: int | None) -> str:
    """``x`` with its sign, at ``at`` decimals (the report's :func:`~benchlab.report.tables.fmt_at`)."""
    from benchlab.report.tables import fmt_at

    if x is None:
        return "—"
    text = fmt_at(x, at)
    return text if text.startswith(("-", "—")) else "+" + text


def _moved(c: Change, at: int | None) -> str:
    """``worse by 78 (19%)``: the direction by the metric's goal and the size of the move."""
    from benchlab.report.tables import fmt_at

    if c.direction == "unchanged":
        return "unchanged"
    size = fmt_at(abs(c.mean_after - c.mean_before), at)
    share = f" ({abs(c.relative):.0%})" if c.relative is not None and abs(c.relative) >= 0.005 else ""
    return f"{c.direction} by {size}{share}"


def change_line(c: Change) -> list[str]:
    """The cells of one change in the Markdown table: every number at the precision its interval
    supports (two significant digits of the CI's half-width, else of the std; as the report
    writes them), the move said as better or worse by the metric's goal."""
    from benchlab.report.tables import mean_pm, places

    half = (c.ci_high - c.ci_low) / 2 if c.ci_low is not None and c.ci_high is not None else None
    spread = half if half else max((s for s in (c.std_before, c.std_after) if s), default=None)
    at = places(spread)
    ci = "—" if c.ci_low is None else f"{_signed(c.diff, at)} [{_signed(c.ci_low, at)}, {_signed(c.ci_high, at)}]"
    how = f"paired, n={c.n_before}" if c.paired else f"unpaired, n={c.n_before}/{c.n_after}"
    return [MARKS[c.verdict], mean_pm(c.mean_before, c.std_before, spread), mean_pm(c.mean_after, c.std_after, spread),
            ci, _moved(c, at), _g(c.p_holm, 2), f"{c.key} ({how}, goal {c.goal})"]


def to_markdown(diff: VersionDiff) -> str:
    """The diff as Markdown: what changed, then regressions, improvements and the rest, then the
    question level where there is one."""
    d = diff.analysis
    lines = [f"# benchlab diff: {d.before} → {d.after}", ""]
    n_reg, n_imp = len(d.regressions), len(d.improvements)
    n_und = len(d.undetermined)
    lines.append(f"{len(d.changes)} score(s) compared ({d.summary} value per run; Holm-corrected per metric, "
                 f"alpha {d.alpha:g}): **{n_reg} regression(s)**, {n_imp} improvement(s), "
                 f"{len(d.changes) - n_reg - n_imp - n_und} without a detectable change"
                 + (f", **{n_und} undetermined** (the statistics cannot judge them; see the Notes)." if n_und else "."))
    lines += ["", "## What changed", ""]
    for title, items in (("Code", diff.code), ("Spec", diff.spec), ("Packages", diff.packages),
                         ("Datasets", diff.datasets)):
        if not items:
            lines.append(f"- {title}: no change")
            continue
        lines.append(f"- {title}:")
        for item in items:
            if item.startswith("    "):
                lines.append(f"      {item.strip()}")
            else:
                lines.append(f"  - {item}")
    header = ["", "before", "after", "change (95% CI)", "moved", "p (Holm)", "task/config/metric"]
    for verdict, title in ((REGRESSION, "Regressions"), (IMPROVEMENT, "Improvements"),
                           (NO_CHANGE, "No detectable change"), (UNDETERMINED, "Undetermined")):
        rows = [c for c in d.changes if c.verdict == verdict]
        if verdict == UNDETERMINED and not rows:
            continue
        lines += ["", f"## {title} ({len(rows)})", ""]
        if not rows:
            lines.append("none")
            continue
        lines.append("| " + " | ".join(header) + " |")
        lines.append("|" + "|".join("---" for _ in header) + "|")
        lines += ["| " + " | ".join(change_line(c)) + " |" for c in rows]
    lines += ["", "`+` worse, `-` better for the metric's goal, `~` no detectable change (as asv marks them)"
              + (", `?` undetermined" if n_und else "") + "; moved: how the mean moved, better or worse by "
              "the metric's goal, whatever the test says of it (its share of the earlier mean's size in "
              "brackets). Numbers are shown to the precision their interval supports."]
    if d.only_before or d.only_after:
        lines += ["", "## Not on both sides", ""]
        lines += [f"- only in {d.before}: {k}" for k in d.only_before]
        lines += [f"- only in {d.after}: {k}" for k in d.only_after]
    notes = [*d.notes, *(w for c in d.changes for w in c.warnings)]
    if notes:
        lines += ["", "## Notes", ""] + [f"- {n}" for n in notes]
    text = "\n".join(lines) + "\n"
    if d.questions is not None:
        from benchlab.history.diff_questions import to_markdown as questions_markdown

        text = text.rstrip("\n") + "\n\n" + questions_markdown(d.questions)
    return text


def csv_rows(diff: VersionDiff) -> list[ChangeRow]:
    """One row per compared (task, config, metric), with :data:`CSV_COLUMNS`."""
    return [ChangeRow.of(c) for c in diff.analysis.changes]
