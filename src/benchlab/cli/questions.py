"""`benchlab compare` and `benchlab analyze` on per-question records (a samples table).

Parse, call :func:`benchlab.collect.samples.load_samples` and :func:`benchlab.stats.compare_questions`, print.
The commands themselves live in :mod:`benchlab.cli.cmd_analyze`; they hand over here when
their input holds question-level records.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from benchlab.cli.app import console, err_console, print_json

if TYPE_CHECKING:
    from benchlab.stats.question_table import QuestionAnalysis

SE_NOTE = ("Standard errors are over questions: each question's samples are averaged first, so that "
           "samples of one question never count as independent questions. The CI and the comparison use "
           "the clustered SE where questions come in groups (CR2, t on Bell-McCaffrey degrees of freedom). "
           "Binary scores with one sample a question get the Wilson interval (one checkpoint) and Newcombe's "
           "paired interval (a difference). 'SE over re-runs' is what new answers to the same questions "
           "alone would move.")


def run_questions(path: Path, *, baseline: str | None, candidates: list[str] | None, metric: str | None,
                  goal: str | dict[str, str], alpha: float, drop_changed: bool, as_json: bool,
                  csv: Path | None = None, effect: float | None = None) -> None:
    """Analyse the samples at ``path`` and print the result."""
    from benchlab.collect.samples import load_samples
    from benchlab.stats import compare_questions

    table, notes = load_samples(path, drop_changed=drop_changed)
    result = compare_questions(table, baseline=baseline, candidates=candidates, metric=metric, goal=goal,
                               alpha=alpha, effect=effect)
    result.warnings[:0] = notes
    show_questions(result, as_json=as_json, csv=csv)


def show_questions(result: QuestionAnalysis, *, as_json: bool, csv: Path | None = None) -> None:
    """Print a question-level analysis (JSON with ``as_json``), and write its comparisons to ``csv``."""
    if csv is not None:
        from benchlab.cli.cmd_diff import write_csv

        rows = [c.to_json() for c in result.comparisons]
        for r in rows:
            r["notes"] = "; ".join(r["notes"])
        write_csv(csv, rows, list(rows[0]) if rows else ["task", "metric", "baseline", "candidate"])
    if as_json:
        print_json(result.to_json())
    else:
        print_questions(result)


def _f(x: Any, digits: int = 4) -> str:
    if x is None:
        return "–"
    if isinstance(x, float):
        return f"{x:.{digits}g}"
    return str(x)


def _ci(lo: Any, hi: Any) -> str:
    return "–" if lo is None else f"[{_f(lo, 3)}, {_f(hi, 3)}]"


def _short(se_type: str) -> str:
    """``clustered over questions (4 clusters)`` as ``4 clusters``; ``over questions`` as ``questions``."""
    if "(" in se_type:
        return se_type.split("(", 1)[1].rstrip(")")
    return se_type.removeprefix("over ")


def print_questions(result: QuestionAnalysis) -> None:
    from rich.markup import escape

    from benchlab.cli.tables import Column, print_table

    rows = []
    for r in result.summary:
        s = r.result
        split = s.split
        clustered = "–" if s.se_clustered is None else f"{_f(s.se_clustered, 3)}\n({s.n_clusters})"
        config = r.config if r.partial is None else f"{r.config} †\n({r.partial})"
        rows.append([r.task, config, r.metric, str(s.n_questions), str(s.n_samples), _f(s.mean),
                     _f(s.se_questions, 3), clustered, f"{_ci(s.ci_low, s.ci_high)}\n({s.ci_method})",
                     _ci(s.wilson_low, s.wilson_high),
                     "–" if split is None else f"{_f(split.between, 3)} / {_f(split.within, 3)}",
                     "–" if split is None else _f(split.se_reruns, 3)])
    print_table(console, "Per task and config, over questions", [
        Column("task", numeric=False, key=True), Column("config", numeric=False, key=True),
        Column("metric", numeric=False, key=True), Column("questions"), Column("samples\n/question"),
        Column("mean"), Column("SE over\nquestions"), Column("clustered\nSE (C)"), Column("95% CI"),
        Column("Wilson\nCI"),
        Column("variance\nbetween / within"), Column("SE over\nre-runs")], rows)
    if result.comparisons:
        rows = []
        for c in result.comparisons:
            p = c.result
            cand = c.candidate if c.partial is None else f"{c.candidate} †"
            rows.append([c.task, c.metric, cand, c.verdict, str(p.n_questions),
                         f"{_f(p.mean_diff, 3)}\n{_ci(p.ci_low, p.ci_high)}\n({p.ci_method})",
                         f"{_f(p.se, 3)}\n({_short(p.se_type)})",
                         f"{_f(p.pvalue, 3)}\n({p.test})", _f(c.p_holm, 3),
                         "–" if p.better is None else f"{p.better} / {p.worse}", _f(p.correlation, 3),
                         _f(p.mde, 3)])
        print_table(console, f"Candidate vs baseline {result.baseline}, paired over questions "
                             "(diff = candidate - baseline)", [
            Column("task", numeric=False, key=True), Column("metric", numeric=False, key=True),
            Column("candidate", numeric=False, key=True), Column("verdict", numeric=False),
            Column("questions"), Column("diff\n[95% CI]"), Column("SE", numeric=False),
            Column("p", numeric=False), Column("p\nHolm"), Column("better /\nworse"), Column("r"),
            Column("MDE\n(80%)")], rows)
    planned = [c for c in result.comparisons if c.power is not None]
    if planned:
        effect = planned[0].power.effect if planned[0].power is not None else 0.0
        rows = [[c.task, c.metric, c.candidate, str(c.result.n_questions), _f(c.result.mde, 3),
                 _f(c.power.questions), f"– ({c.power.samples_note})" if c.power.samples is None
                 else str(c.power.samples)]
                for c in planned if c.power is not None]
        print_table(console, f"To detect a difference of {effect:g} (80% power, two-sided)", [
            Column("task", numeric=False, key=True), Column("metric", numeric=False, key=True),
            Column("candidate", numeric=False, key=True), Column("questions\nnow"), Column("MDE\nnow"),
            Column("questions\nneeded"), Column("samples/question\nneeded")], rows)
        console.print("samples/question needed: '– (add questions)' where no number of samples reaches it "
                      "(the questions' own spread is too large); '– (one sample per question)' where the "
                      "records hold one sample a question, so that the part more samples would shrink is unknown.")
    console.print(escape(SE_NOTE))
    families = sorted({c.family for c in result.comparisons if c.family})
    if families:
        console.print(escape("Holm families (one per metric): " + "; ".join(families)))
    if any(r.partial for r in result.summary):
        console.print("† partial evaluation: this config answered only part of the task's questions "
                      "(an evaluation cut short, such as lm-eval --limit); its score is not the whole task's.")
    for c in result.comparisons:
        for note in c.result.notes:
            err_console.print(f"[yellow]note:[/] {escape(f'{c.task} {c.candidate}: {note}')}")
    for r in result.summary:
        for note in r.result.notes:
            err_console.print(f"[yellow]note:[/] {escape(f'{r.task} {r.config}: {note}')}")
    for w in result.warnings:
        err_console.print(f"[yellow]warning:[/] {escape(w)}")
    sys.stdout.flush()
