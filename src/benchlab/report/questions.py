"""The report's question-level section: each checkpoint against the baseline, paired over the
questions both answered, from the per-question records the runs kept.

Evaluations with one seed per checkpoint have no spread over seeds, so their seed-level
comparison is undetermined; their per-question records still decide (see
``docs/evaluation-statistics.md``). The statistics are computed once, by
:func:`benchlab.stats.question_table.analyze_questions`; this module only writes them out.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from benchlab.names.benchmark_info import BenchmarkInfo
    from benchlab.stats.question_table import QuestionAnalysis

#: The mark a verdict carries in the report's tables and in BENCHMARKS.md.
MARKS = {"better": "▲ better", "worse": "▼ worse", "no difference found": "= no difference found",
         "undetermined": "? undetermined"}


def question_analysis(folder: Path, info: BenchmarkInfo,
                      run_ids: Mapping[tuple[str, str], list[tuple[int, str]]] | None = None,
                      ) -> QuestionAnalysis | None:
    """The question-level analysis of a results folder's runs, or None when no completed run kept
    per-question records. The baseline and goals are the spec's; every metric the records hold
    is analysed (the harness's own names, ``acc,none``).

    ``run_ids``: the completed runs as the report's read of the ledger holds them
    (the ``run_ids`` of :class:`benchlab.results.Results`), so that the report opens no ledger; without
    them the ledger is read for them."""
    from benchlab.collect.samples import (
        SampleRun,
        check_pairing,
        read_runs_samples,
        read_samples,
        runs_hold_records,
    )
    from benchlab.errors import DataError
    from benchlab.names.run_files import runs_dir

    if not runs_hold_records(runs_dir(folder)):
        return None
    # Imported past the check: it brings scipy.stats (a second of a report's time), which a
    # folder without per-question records never needs.
    from benchlab.stats.question_table import analyze_questions

    if run_ids is None:
        table, notes = read_samples(folder)
    else:
        runs = [SampleRun(run_id, task, config, seed)
                for (task, config), seeds in run_ids.items() for seed, run_id in seeds]
        table, notes = read_runs_samples(folder, runs, info.name)
    if table.empty:
        return None
    warnings: list[str] = []
    try:
        table, warnings = check_pairing(table)
    except DataError as exc:
        table, warnings = check_pairing(table, drop=True)
        warnings.insert(0, str(exc).split(". Pairing", 1)[0])
    configs = sorted(set(table["config"]))
    baseline = info.baseline if info.baseline in configs else configs[0]
    goal = info.primary_goal
    result = analyze_questions(table, baseline=baseline, goal=goal)
    result.warnings[:0] = [*notes, *warnings]
    return result


def fmt_num(x: float | None, digits: int = 3) -> str:
    return "—" if x is None else f"{x:.{digits}g}"


def render_section(result: QuestionAnalysis) -> str:
    """The section's Markdown: a table per comparison row, the standard error's kind, notes."""
    lines = [
        f"Each checkpoint against **{result.baseline}**, paired over the questions both answered "
        "(diff = candidate − baseline; each question's samples averaged first). The standard error is "
        "over questions (clustered, CR2 on Bell–McCaffrey degrees of freedom, where questions come in "
        "groups; over seeds and questions with several training seeds), p is exact McNemar with "
        "Newcombe's interval for binary scores with one sample per question, else a t-test with its "
        "own t interval; Holm's correction runs over the rows of one metric (one family per metric, "
        "as at the seed level); the verdict needs Holm p < 0.05 and a CI that excludes 0. "
        "† marks a side that answered only part of the task's questions.",
        "",
        "| task | metric | candidate | questions | baseline | candidate mean | diff [95% CI] | SE | p | p (Holm) "
        "| better / worse | MDE | verdict |",
        "|---|---|---|---:|---:|---:|---:|---|---:|---:|---:|---:|---|",
    ]
    for c in result.comparisons:
        r = c.result
        ci = "—" if r.ci_low is None else f"[{fmt_num(r.ci_low)}, {fmt_num(r.ci_high)}]"
        discordant = "—" if r.better is None else f"{r.better} / {r.worse}"
        cand = md_cell(c.candidate) + ("" if c.partial is None else f" † ({md_cell(c.partial)})")
        lines.append(
            f"| {md_cell(c.task)} | {md_cell(c.metric)} | {cand} | {r.n_questions} | "
            f"{fmt_num(r.mean_baseline, 4)} | {fmt_num(r.mean_candidate, 4)} | "
            f"{fmt_num(r.mean_diff)} {ci} ({r.ci_method}) | "
            f"{fmt_num(r.se)} ({md_cell(r.se_type)}) | {fmt_num(r.pvalue)} ({r.test}) | {fmt_num(c.p_holm)} | "
            f"{discordant} | "
            f"{fmt_num(r.mde)} | {MARKS[c.verdict]} |")
    notes = [f"{c.task} {c.candidate}: {n}" for c in result.comparisons for n in c.result.notes]
    notes += result.warnings
    if notes:
        lines.append("")
        lines += [f"- {md_cell(n)}" for n in notes]
    return "\n".join(lines)


def render_marks(result: QuestionAnalysis) -> str:
    """BENCHMARKS.md's question-level verdicts: one line per task and candidate."""
    lines = [f"Question-level verdicts against {md_cell(str(result.baseline))} (paired over questions; "
             "see BENCHMARK_REPORT.md):", ""]
    for c in result.comparisons:
        r = c.result
        lines.append(f"- {md_cell(c.task)} {md_cell(c.metric)}, {md_cell(c.candidate)}: {MARKS[c.verdict]} "
                     f"(diff {fmt_num(r.mean_diff)}, Holm p {fmt_num(c.p_holm)}, {r.n_questions} questions)")
    return "\n".join(lines)


def md_cell(text: str) -> str:
    """``text`` as a table cell or a list item's words: no markup (:func:`benchlab.report.tables.cell`)."""
    from benchlab.report.tables import cell

    return cell(text).replace(">", "&gt;")
