"""`benchlab diff` question by question: where both versions' runs kept per-question records, the
records the question level compares, and its Markdown section.

A question asked differently by the two versions (a dataset or prompt changed between them, its
hash differs) cannot be paired: it is left out here, with a warning naming how many per task. The
statistics (each (task, config) of the later version against the earlier one, paired over the
questions both asked, one Holm family per metric) are
:func:`benchlab.stats.versions.analyze_versions`'.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from benchlab.stats.question_table import QuestionAnalysis
    from benchlab.stats.versions import VersionQuestions

#: The column that tells the two versions apart while their questions' hashes are checked.
_SIDE = "__version_side"


def question_records(before: Path, after: Path) -> VersionQuestions | None:
    """The per-question records of two results folders, only the questions both asked alike (in the
    configs both have), or None when either holds no per-question record."""
    import pandas as pd

    from benchlab.collect.samples import check_pairing, read_samples, runs_hold_records
    from benchlab.names.run_files import runs_dir
    from benchlab.stats.versions import VersionQuestions

    sides = []
    for folder in (before, after):
        if not runs_hold_records(runs_dir(folder)):
            return None
        sides.append(read_samples(folder))
    (a, notes_a), (b, notes_b) = sides
    shared = set(a["config"].astype(str)) & set(b["config"].astype(str))
    a = a[a["config"].astype(str).isin(shared)].assign(**{_SIDE: 0})
    b = b[b["config"].astype(str).isin(shared)].assign(**{_SIDE: 1})
    both, warnings = check_pairing(pd.concat([a, b], ignore_index=True), drop=True)
    kept = [both[both[_SIDE] == side].drop(columns=_SIDE).reset_index(drop=True) for side in (0, 1)]
    return VersionQuestions(kept[0], kept[1], (*notes_a, *notes_b,
                                               *(w.replace("by the configs", "by the two versions") for w in warnings)))


def to_markdown(result: QuestionAnalysis) -> str:
    """The diff's question-level section."""
    from benchlab.report.questions import MARKS, fmt_num, md_cell

    lines = ["## Question-level changes", "",
             "Each (task, config) of the later version against the earlier one, paired over the questions "
             "both asked (diff = after − before; Holm per metric across the table).", "",
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
