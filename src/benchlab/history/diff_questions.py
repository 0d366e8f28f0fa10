"""`benchlab diff` question by question: where both versions' runs kept per-question records, each
(task, config) of the later version against the earlier one, paired over the questions both asked.

A question asked differently by the two versions (a dataset or prompt changed between them, its
hash differs) cannot be paired: it is left out, with a warning naming how many per task. Holm's
correction runs over every (task, config, metric) together.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from benchlab.stats.question_table import QuestionAnalysis, QuestionComparisonRow

BEFORE, AFTER = "@before", "@after"


def question_diff(before: Path, after: Path, *, metric: str | None = None, alpha: float = 0.05,
                  goal: str | dict[str, str] = "max") -> QuestionAnalysis | None:
    """The question-level changes from ``before`` to ``after`` (two results folders), or None
    when either holds no per-question record."""
    import pandas as pd

    from benchlab.collect.samples import check_pairing, read_samples, runs_hold_records
    from benchlab.run_files import runs_dir
    from benchlab.stats.question_table import QuestionAnalysis, analyze_questions, judge

    sides = []
    for folder in (before, after):
        if not runs_hold_records(runs_dir(folder)):
            return None
        sides.append(read_samples(folder))
    (a, notes_a), (b, notes_b) = sides
    shared = sorted(set(a["config"].astype(str)) & set(b["config"].astype(str)))
    out = QuestionAnalysis(baseline=None, warnings=[*notes_a, *notes_b])
    if not shared:
        out.warnings.append("no config has per-question records in both versions")
        return out
    a = a[a["config"].astype(str).isin(shared)].assign(config=lambda t: t["config"].astype(str) + BEFORE)
    b = b[b["config"].astype(str).isin(shared)].assign(config=lambda t: t["config"].astype(str) + AFTER)
    both, warnings = check_pairing(pd.concat([a, b], ignore_index=True), drop=True)
    out.warnings += [w.replace("by the configs", "by the two versions") for w in warnings]
    rows: list[QuestionComparisonRow] = []
    for config in shared:
        part = both[both["config"].isin([config + BEFORE, config + AFTER])]
        if part["config"].nunique() < 2:
            out.warnings.append(f"{config}: no question left that both versions asked")
            continue
        found = analyze_questions(part, baseline=config + BEFORE, candidates=[config + AFTER], metric=metric,
                                  goal=goal, alpha=alpha)
        for row in found.comparisons:
            row.baseline, row.candidate = config, config
        rows += found.comparisons
        out.warnings += found.warnings
    judge(rows, alpha=alpha, goal=goal)
    out.comparisons = rows
    return out


def to_markdown(result: QuestionAnalysis) -> str:
    """The diff's question-level section."""
    from benchlab.report.questions import MARKS, fmt_num, md_cell

    lines = ["## Question-level changes", "",
             "Each (task, config) of the later version against the earlier one, paired over the questions "
             "both asked (diff = after − before; Holm across the table).", "",
             "| task | config | metric | questions | before | after | diff [95% CI] | p | p (Holm) | "
             "better / worse | verdict |", "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---|"]
    for c in result.comparisons:
        r = c.result
        ci = "—" if r.ci_low is None else f"[{fmt_num(r.ci_low)}, {fmt_num(r.ci_high)}]"
        discordant = "—" if r.better is None else f"{r.better} / {r.worse}"
        lines.append(f"| {md_cell(c.task)} | {md_cell(c.candidate)} | {md_cell(c.metric)} | {r.n_questions} | "
                     f"{fmt_num(r.mean_baseline, 4)} | {fmt_num(r.mean_candidate, 4)} | {fmt_num(r.mean_diff)} {ci} | "
                     f"{fmt_num(r.pvalue)} ({r.test}) | {fmt_num(c.p_holm)} | {discordant} | {MARKS[c.verdict]} |")
    if result.warnings:
        lines.append("")
        lines += [f"- {md_cell(w)}" for w in result.warnings]
    return "\n".join(lines) + "\n"
