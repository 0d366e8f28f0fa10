"""BENCHMARK_REPORT.md: the report a reviewer reads, rendered from a Jinja2 template."""

from __future__ import annotations

import datetime as _dt
import functools
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from benchlab.report.columns import Column, secondary_cell, shown
from benchlab.report.leaderboard import leaderboard_rows
from benchlab.report.tables import (
    BR,
    block,
    cell,
    code_span,
    fence,
    finalize,
    fmt,
    fmt_at,
    inline,
    places,
    prose,
)
from benchlab.results import BenchmarkInfo, Curves
from benchlab.stats.analysis import ComparisonRow, SummaryRow
from benchlab.stats.results_analysis import ResultsAnalysis, SeedCount

if TYPE_CHECKING:
    import jinja2
    import pandas as pd

    from benchlab.history.merge import MergedSource
    from benchlab.history.preregistration import Registration
    from benchlab.ledger import SequentialRecord


@functools.cache
def _env() -> jinja2.Environment:
    """The report's templates, loaded on first use: what renders only the tables (the dashboard's
    first-tables worker, ``benchlab analyze``) does not import Jinja."""
    import jinja2

    env = jinja2.Environment(
        loader=jinja2.PackageLoader("benchlab.report", "templates"),
        autoescape=False,
        keep_trailing_newline=True,
        trim_blocks=False,
        lstrip_blocks=False,
        undefined=jinja2.StrictUndefined,
        # No value becomes markup: '<' is written as an entity, except in fenced code (tables.Raw).
        finalize=finalize,
    )
    env.filters.update(cell=cell, fence=fence, code=code_span, prose=prose, block=block)
    return env


def _yaml_text(body: object) -> str:
    import yaml

    return yaml.safe_dump(body, sort_keys=False).rstrip()


@dataclass(frozen=True)
class CodeAt:
    """The code under test as the first run recorded it: the commit (None outside git) and
    whether the work tree had uncommitted changes."""

    commit: str | None = None
    dirty: bool = False


@dataclass(frozen=True)
class FailureRow:
    """A failed run as the report's failure log shows it: its error escaped for a Markdown table
    cell (report.html renders the same text), its log tail as recorded."""

    run: str
    run_id: str
    attempts: int
    failure_class: str | None
    error: str
    tail: str


@dataclass(frozen=True)
class ReportData:
    """Everything the report is made from, immutable: :func:`benchlab.report.gather` takes the
    results table, :func:`~benchlab.report.analyze` returns a copy with its statistics added
    (``analysis``, computed once by :mod:`benchlab.stats`); the writers only render them."""

    info: BenchmarkInfo
    finals: pd.DataFrame
    failures: list[FailureRow] = field(default_factory=list)
    hardware: str = "unknown"
    git: CodeAt = field(default_factory=CodeAt)
    benchlab_version: str = ""
    plots: list[dict[str, str]] = field(default_factory=list)
    #: Every statistic of the results (:func:`benchlab.stats.results_analysis.analyze_table`), once analysed.
    analysis: ResultsAnalysis | None = None
    #: One row per run placed on GPUs: run, gpus, util_mean, util_max, mem_gib, note (strings).
    gpu_use: list[dict[str, str]] = field(default_factory=list)
    results: Path | None = None  # the results folder
    planned: dict[tuple[str, str], list[int]] = field(default_factory=dict)
    #: Completed runs whose evaluation was cut short (lm-eval --limit): run, note.
    partial: list[dict[str, str]] = field(default_factory=list)
    #: The evaluation tool's version the runs recorded (``{"lm_eval": "0.4.13"}``), for the Settings line.
    tool_versions: dict[str, str] = field(default_factory=dict)
    failed_runs: list[tuple[str, str, int]] = field(default_factory=list)
    #: The metrics' declared ranges, as the analysis bounded its intervals with them.
    ranges: dict[str, tuple[float, float]] = field(default_factory=dict)
    failed_as: str = "exclude"
    #: The pre-registered analysis plan as the ledger holds it (``benchlab.history.preregistration``).
    registered_plan: Registration | None = None
    analysis_plan: str = ""  # the "Analysis plan" section, Markdown
    #: (task, config) -> [(seed, run id)] of the completed runs, for BENCHMARKS.md's links.
    run_ids: dict[tuple[str, str], list[tuple[int, str]]] = field(default_factory=dict)
    #: ``run --until-decided``'s design and pairs as of its last look (``results.Results.sequential``).
    sequential: SequentialRecord | None = None
    #: The codes the completed runs ran at, where more than one (``results.Results.code_versions``).
    code_versions: list[Any] = field(default_factory=list)
    #: The "Question-level comparisons" section, Markdown (``report/questions.py``); "" without records.
    questions: str = ""
    #: The logged curves as the results table holds them (``results.Results.curves``): the figures
    #: and a plan judged on curves take them from here, and no ledger is opened to draw them.
    curves: Curves = field(default_factory=Curves)
    #: The sources of a merged report (``benchlab report A B``; :mod:`benchlab.history.merge`).
    sources: list[MergedSource] = field(default_factory=list)


def primary_counts(data: ReportData) -> dict[tuple[str, str], SeedCount]:
    """The seed counts of the primary metric, by (task, config), as the analysis counted them."""
    return data.analysis.primary_counts() if data.analysis is not None else {}


def _goal(data: ReportData) -> str:
    """The primary metric's goal, as the analysis resolved it."""
    assert data.analysis is not None
    return data.analysis.goal


def _p(p: float | None) -> str:
    if p is None:
        return "—"
    return f"{p:.2g}" if p >= 0.001 else f"{p:.1e}"


def _verdict(row: ComparisonRow, goal: str) -> str:
    """'better' / 'worse' only when the comparison is significant, else 'none' / 'undetermined'."""
    if row.significant is None:
        return "undetermined"
    if not row.significant or row.mean_diff is None:
        return "none"
    up = row.mean_diff > 0
    return "better" if up == (goal == "max") else "worse"


def _list(items: list[str]) -> str:
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def _best_sentence(data: ReportData, prim: list[SummaryRow], goal: str) -> tuple[str | None, str]:
    """The config the summary names best (None: none can be) and the sentence that names it."""
    info = data.info
    # The winner of a task is BENCHMARKS.md's (one rule: leaderboard_rows): the best mean of a full
    # evaluation, of equal means the first in the spec's order, the others named tied.
    configs = list(info.configs) + sorted({r.config for r in prim} - set(info.configs))
    tasks = list(info.tasks) + sorted({r.task for r in prim} - set(info.tasks))
    partial = {(p["task"], p["config"]) for p in data.partial}
    rows = [row for row in leaderboard_rows(prim, tasks, configs, info.targets, goal, partial) if row.best]
    wins: dict[str, list[str]] = {}
    for row in rows:
        wins.setdefault(str(row.best), []).append(row.task)
    n_tasks = len({r.task for r in prim})
    if not wins:
        return None, "No config has a full evaluation to rank (every score is partial), so none is named best."
    top_cfg = min(wins, key=lambda c: (-len(wins[c]), configs.index(c) if c in configs else len(configs)))
    top_tasks = wins[top_cfg]
    where = f" ({', '.join(inline(t) for t in top_tasks)})" if len(top_tasks) <= 4 else ""
    ties = [(row.task, row.equal) for row in rows if row.best == top_cfg and row.equal]
    tied_note = "".join(
        f", tied with {_list([f'**{inline(c)}**' for c in equal])} on {inline(task)} (equal means)"
        for task, equal in ties[:4])
    if len(ties) > 4:
        tied_note += f" and tied on {len(ties) - 4} more tasks"
    counts = primary_counts(data)
    won = [counts[(t, top_cfg)] for t in top_tasks if (t, top_cfg) in counts]
    seeds_note = ""
    if any(c.lost for c in won):
        # Counted over every task it wins, as the tables count them, and each task that lost seeds named.
        done = sum(c.completed for c in won)
        planned = sum(c.planned for c in won)
        each = ", ".join(f"{inline(c.task)} {c.label}" for c in won if c.lost)
        how = ("failed seeds excluded" if data.failed_as == "exclude"
               else "failed seeds scored as the worst value")
        seeds_note = f", from {done} of its {planned} planned seeds there ({each}; {how})"
    return top_cfg, (f"**{inline(top_cfg)}** has the best mean {inline(info.primary)} on {len(top_tasks)} of "
                     f"{n_tasks} task{'s' if n_tasks != 1 else ''}{where}{tied_note}{seeds_note}.")


def _summary_sentences(data: ReportData) -> str:
    info = data.info
    goal = _goal(data)
    prim = _described(data)
    if not prim:
        failed = sorted({c for _, c, _ in data.failed_runs})
        if failed:
            return (f"No run has completed yet; {_list([inline(c) for c in failed])} failed on every seed so far, so "
                    "there is nothing to compare.")
        return "No run has completed yet, so there is nothing to compare."
    top_cfg, best_sentence = _best_sentence(data, prim, goal)
    if top_cfg is None:
        return best_sentence
    parts = [best_sentence]
    counts = primary_counts(data)
    n_tasks = len({r.task for r in prim})
    no_seed: dict[str, list[str]] = {}
    for (task, config), count in counts.items():
        if count.completed == 0 and count.failed:
            no_seed.setdefault(config, []).append(task)
    for config, where_ in no_seed.items():
        on = ("every task" if len(where_) >= n_tasks else f"{len(where_)} tasks"
              if len(where_) > 4 else _list([inline(t) for t in where_]))
        parts.append(f"**{inline(config)}** failed on every seed of {on} and has no score there.")
    comparisons = _primary_comparisons(data)
    if comparisons and top_cfg != info.baseline:
        mine = [r for r in comparisons if r.candidate == top_cfg]
        groups: dict[str, list[str]] = {"better": [], "worse": [], "none": [], "undetermined": []}
        for r in mine:
            p = f"Holm-adjusted p={_p(r.p_holm)}" if r.p_holm is not None else ""
            note = "; ".join(x for x in (p, inline(r.caveat or "")) if x)
            groups[_verdict(r, goal)].append(inline(r.task) + (f" ({note})" if note else ""))
        clauses = []
        for key, text in (
            ("better", "is significantly better"),
            ("worse", "is significantly worse"),
            ("none", "shows no significant difference"),
            ("undetermined", "has an undetermined difference (no test valid for these seeds decides; "
                             "see the warnings)"),
        ):
            if groups[key]:
                shown = groups[key] if len(groups[key]) <= 4 else [f"{len(groups[key])} tasks"]
                clauses.append(f"{text} on " + _list(shown))
        if clauses:
            parts.append(
                f"Against the baseline **{inline(info.baseline)}**, **{inline(top_cfg)}** " + _list(clauses) + "."
            )
    elif comparisons:
        parts.append(f"The baseline **{inline(info.baseline)}** itself is best there.")
    if comparisons:
        tally = {"better": 0, "worse": 0, "none": 0, "undetermined": 0}
        for r in comparisons:
            tally[_verdict(r, goal)] += 1
        if len({r.candidate for r in comparisons}) > 1:
            def are(n: int) -> str:
                return f"{n} {'is' if n == 1 else 'are'}"

            tail = (
                f"Over all {len(comparisons)} comparisons with the baseline, "
                f"{are(tally['better'])} significantly better, {tally['worse']} "
                f"significantly worse, {tally['none']} show{'s' if tally['none'] == 1 else ''} "
                f"no significant difference and {are(tally['undetermined'])} undetermined"
            )
            with_loss = sum(1 for r in comparisons if r.caveat)
            if with_loss:
                tail += f"; {with_loss} of them rest on a side that lost seeds"
            parts.append(tail + _failures_clause(data) + ".")
            return " ".join(parts)
    elif info.baseline and not data.analysis:
        parts.append("No statistical test was run (the statistics package is unavailable).")
    if data.failures:
        n = len(data.failures)
        parts.append(f"{n} run{'s' if n != 1 else ''} failed (see the failure log).")
    return " ".join(parts)


def _partial_sentence(data: ReportData) -> str:
    """Runs scored on part of their evaluation set (lm-eval's ``--limit``), named with their counts."""
    if not data.partial:
        return ""
    n = len(data.partial)
    shown = "; ".join(f"{inline(p['run'])}: {inline(p['note'].split(': ', 1)[-1])}" for p in data.partial[:5])
    more = f" and {n - 5} more" if n > 5 else ""
    return (f" {n} run{'s are' if n != 1 else ' is a'} partial evaluation{'s' if n != 1 else ''} "
            f"(lm-eval --limit: fewer samples than the task has), so {'their' if n != 1 else 'its'} "
            f"scores are not the full benchmark's: {shown}{more}.")


def _failures_clause(data: ReportData) -> str:
    n = len(data.failures)
    return f"; {n} run{'s' if n != 1 else ''} failed (see the failure log)" if n else ""


def _described(data: ReportData) -> list[SummaryRow]:
    """The primary metric's rows of configs with a completed seed (those the tables rank)."""
    return [r for r in data.analysis.rows_of() if r.n > 0] if data.analysis is not None else []


@dataclass(frozen=True)
class TableRow:
    """One config's row of a task's results table, as Markdown cells (report and dashboard): its
    rank and config, then one cell per column of :data:`benchlab.report.columns.COLUMNS` shown."""

    rank: int | str
    tied: str
    config: str
    flag: str
    cells: tuple[str, ...]
    secondary: list[str]


@dataclass(frozen=True)
class TaskTable:
    """A task's results table: its rows best first, then the configs with no completed seed."""

    name: str
    target: float | None
    rows: list[TableRow]
    columns: tuple[Column, ...]

    @property
    def has_ci(self) -> bool:
        """Whether the table shows the intervals of the analysis."""
        return any(c.needs_interval for c in self.columns)


def task_tables(data: ReportData) -> tuple[list[TaskTable], list[str]]:
    """Each task's results table over the analysis' rows, and the secondary metrics their
    columns show (those with a declared goal)."""
    info = data.info
    stats = data.analysis
    assert stats is not None
    secondary = [m for m in stats.metrics if m != info.primary and (not info.goal or m in info.goal)]
    rows_of = [r for r in stats.rows_of()]
    columns = shown(stats.primary_analysed)
    all_tasks = {r.task for r in rows_of}
    configs = list(info.configs) + sorted({r.config for r in rows_of if r.n > 0} - set(info.configs))
    order = {c: i for i, c in enumerate(configs)}
    partial = {(p["task"], p["config"]) for p in data.partial}
    tables: list[TaskTable] = []
    for task in [t for t in info.tasks if t in all_tasks] + sorted(all_tasks - set(info.tasks)):
        mine = [r for r in rows_of if r.task == task]
        prim = sorted((r for r in mine if r.n > 0),
                      key=lambda r: (r.mean_rank if r.mean_rank is not None else len(order) + 1,
                                     order.get(r.config, len(order))))
        # The best, its ties and the partial marks by BENCHMARKS.md's rule (leaderboard_rows).
        best_row = leaderboard_rows(prim, [task], configs, info.targets, stats.goal, partial)[0]
        rows = [_table_row(data, best_row, r, prim, partial, columns, secondary) for r in prim]
        rows += [_table_row(data, best_row, r, prim, partial, columns, secondary) for r in mine if r.n == 0]
        tables.append(TaskTable(name=task, target=info.targets.get(task), rows=rows, columns=columns))
    return tables, secondary


def _table_row(data: ReportData, best_row: Any, r: SummaryRow, prim: list[SummaryRow],
               partial: set[tuple[str, str]], columns: tuple[Column, ...], secondary: list[str]) -> TableRow:
    """A config's row: the rank and its marks, then the columns' cells of its summary row."""
    stats = data.analysis
    assert stats is not None
    task, config = r.task, r.config
    baseline = " (baseline)" if config == data.info.baseline else ""
    cells = tuple(c.cell(r) for c in columns)
    sec_vals = [secondary_cell(stats.row(task, config, m)) for m in secondary]
    if r.n == 0:
        return TableRow(rank="—", tied="", config=config + baseline + " ✗ failed", flag="", cells=cells,
                        secondary=sec_vals)
    # stats' rank: by mean (equal means share the lower rank), and 1 for a config whose
    # CI overlaps the best one's. That is marked as what it is, an overlap of intervals:
    # a pairwise test beside it may still separate the two ("tied" contradicted it).
    rank_shown: int | None = r.rank
    tied = " (CI overlaps the best's)" if config in best_row.tied else ""
    if config in best_row.equal:
        tied = " (tied: equal means)"
    is_partial = (task, config) in partial
    if is_partial:
        rank_shown = None  # a partial evaluation is never ranked (never best)
    elif any((task, p.config) in partial for p in prim):
        # Ranked among the full evaluations only, as BENCHMARKS.md ranks them.
        rank_shown = 1 if config in (best_row.best, *best_row.equal, *best_row.tied) else 1 + sum(
            1 for p in prim if (task, p.config) not in partial and p.mean is not None and r.mean is not None
            and (p.mean > r.mean if stats.goal == "max" else p.mean < r.mean))
    return TableRow(
        rank="—" if rank_shown is None else rank_shown,
        tied=tied,
        config=config + baseline + (" (partial†, not ranked)" if is_partial else ""),
        flag=" ⚠" if stats.primary_analysed and r.high_variance else "",
        cells=cells,
        secondary=sec_vals,
    )


def _clean(x: float | None, *scale: float | None) -> float | None:
    """0 for the rounding noise of an exact zero (a zero mean difference comes out as 1e-17).

    Noise is judged against the largest of ``scale`` (e.g. the CI bounds, in the metric's
    units), or absolutely for a dimensionless effect size.
    """
    if x is None:
        return None
    ref = max([abs(s) for s in scale if s is not None], default=1.0)
    return 0.0 if abs(x) < 1e-12 * max(ref, 1e-300) else x


_VERDICT_CELL = {
    "better": "✓ significantly better",
    "worse": "✓ significantly worse",
    "none": "✗ no significant difference",
    "undetermined": "— undetermined",
}


def _primary_comparisons(data: ReportData) -> list[ComparisonRow]:
    primary = data.info.primary
    return [r for r in data.analysis.comparisons if r.metric == primary] if data.analysis else []


def _comparison_rows(data: ReportData, rows: list[ComparisonRow]) -> list[str]:
    return comparison_rows(data.info, _goal(data), rows)


def comparison_rows(info: BenchmarkInfo, goal: str, rows: list[ComparisonRow]) -> list[str]:
    """The comparisons table's Markdown lines: the report's, the dashboard's and a notebook's."""
    tasks = [t for t in info.tasks if any(r.task == t for r in rows)]
    tasks += sorted({r.task for r in rows} - set(tasks))
    # The verdict comes third, so it is on screen however wide the rest of the table is.
    lines = [
        "| task | candidate | verdict | mean diff [95% CI] | Holm p | seeds (baseline, candidate) "
        "| design | test p | rank-test p | effect size (d_z paired, d unpaired) | Hedges' g "
        "| P(improvement) | decided by |",
        "|---|---|---|---|---:|---|---|---:|---:|---:|---:|---:|---|",
    ]
    for task in tasks:
        for r in (r for r in rows if r.task == task):
            design = f"paired ({r.n})" if r.paired else f"unpaired ({r.n})"
            if not r.n:
                design = "—"
            test = f"t {_p(r.t_pvalue)}" if r.paired else f"Welch {_p(r.welch_pvalue)}"
            rank_test = (
                f"Wilcoxon {_p(r.wilcoxon_pvalue)}"
                if r.paired
                else f"MWU {_p(r.mannwhitney_pvalue)}"
            )
            lo, hi = r.diff_ci_low, r.diff_ci_high
            at = places((hi - lo) / 2) if lo is not None and hi is not None else None
            diff = (
                f"{fmt_at(_clean(r.mean_diff, lo, hi), at)} [{fmt_at(lo, at)}, {fmt_at(hi, at)}]"
                if r.mean_diff is not None
                else "—"
            )
            verdict = _VERDICT_CELL[_verdict(r, goal)]
            if r.caveat:  # on a line of its own, so the verdict column stays narrow
                verdict += f"{BR}⚠ {cell(r.caveat)}"
            b_seeds = r.seeds.baseline_seeds if r.seeds else None
            c_seeds = r.seeds.candidate_seeds if r.seeds else None
            seeds = f"{b_seeds or '—'}, {c_seeds or '—'}" if b_seeds or c_seeds else "—"
            lines.append(
                f"| {cell(task)} | {cell(r.candidate)} | {verdict} | {diff} | {_p(r.p_holm)} | "
                f"{seeds} | {design} | {test} | {rank_test} | "
                f"{_effect(r.cohens_d, r.paired)} | {fmt(_clean(r.hedges_g), 3)} | "
                f"{fmt(r.prob_improvement, 3)} | {cell(r.decided_by) if r.decided_by else '—'} |"
            )
    return lines


def _effect(d: float | None, paired: bool) -> str:
    """Cohen's d named for what it is: d_z = mean(diff)/sd(diff) on paired seeds, which is not
    comparable with the unpaired d of pooled standard deviations."""
    if d is None:
        return "—"
    return f"{'d_z' if paired else 'd'} = {fmt(_clean(d), 3)}"


def _failed_as_text(data: ReportData) -> str:
    counts = primary_counts(data)
    lost = sum(len(c.failed) for c in counts.values())
    if data.failed_as == "worst":
        return (
            "Failed seeds are scored as the worst value (`--failed-as worst`): the lower "
            "end of the metric's range where it has one, otherwise the worst value any config "
            f"reached on that task. {lost} seed{'s' if lost != 1 else ''} of "
            f"{data.info.primary} failed."
        )
    return (
        "Failed seeds are excluded (`--failed-as exclude`, the default): a config is judged "
        "on the seeds that completed, which flatters one that fails often; each comparison "
        "touched by a loss says so beside its verdict. `benchlab report --failed-as worst` "
        f"scores failed seeds as the worst value instead. {lost} seed{'s' if lost != 1 else ''} "
        f"of {data.info.primary} failed."
    )


def _normalization_text(data: ReportData) -> str:
    """What the aggregate across tasks is of, from the analysis' ``normalization``."""
    primary = data.info.primary
    norm = data.analysis.normalization if data.analysis else None
    method = norm.method if norm else None
    tasks = norm.tasks if norm else {}
    if not method:
        return "Normalisation: none (no aggregate across tasks was computed)."

    def bounds(kind: str) -> str:
        return ", ".join(f"{inline(t)} [{fmt(v.low)}, {fmt(v.high)}]"
                         for t, v in tasks.items() if v.source == kind)

    if method == "none":
        return (f"Normalisation: none. The aggregate is of raw {inline(primary)}, in its own units, since "
                "the spec gives no task reference scores; give each task `reference: [low, high]` "
                "to aggregate tasks on different scales.")
    if method == "references":
        return (f"Normalisation: by the spec's reference scores (low → 0, high → 1): "
                f"{bounds('reference')}.")
    if method == "observed":
        return ("Normalisation: min–max over the configs compared (worst → 0, best → 1): "
                f"{bounds('observed')}; these scores change when configs are added or removed.")
    parts = [f"by reference scores: {bounds('reference')}"]
    if bounds("observed"):
        parts.append(f"min–max over the configs compared: {bounds('observed')}")
    raw = [t for t, v in tasks.items() if v.source == "raw"]
    if raw:
        parts.append(f"raw: {', '.join(raw)}")
    return f"Normalisation: mixed ({'; '.join(parts)})."


def _methods_text(data: ReportData) -> str:
    """The Methods paragraph: curve alignment and the normalisation of the aggregate."""
    methods = data.analysis.methods if data.analysis else None
    align = methods.align if methods else None
    if align == "common":
        final = (f"Alignment: common. Final {data.info.primary} values are taken on the step "
                 "range every run of a task covers; the warnings name each run that was cut.")
    else:
        final = (f"Alignment: own. Each run's final {data.info.primary} is its own last reported "
                 "value: a run that stopped before the others is taken where it stopped, as if "
                 "complete, and the warnings name every such run.")
    if any(str(p.get("path", "")).startswith("plots/curves_") for p in data.plots):
        final += (" The learning-curve figures put every run of a task on the steps all of "
                  "them cover (linear interpolation), so they end at the shortest run's last step.")
    text = f"**Methods.** {final} {_normalization_text(data)}"
    figures = {str(p.get("path", "")) for p in data.plots}
    norm = data.analysis.normalization if data.analysis else None
    method = norm.method if norm else None
    if method != "references" and figures & {"plots/performance_profile.png", "plots/radar.png"}:
        # A figure across tasks needs one scale even where the aggregate keeps raw units.
        text += (" The performance-profile and radar figures need one scale across tasks, so "
                 "there each task without reference scores is min–max normalised over the "
                 "configs shown, as their captions say.")
    n_tasks = len(data.info.tasks)
    if figures and "plots/radar.png" not in figures and 0 < n_tasks < 3:
        # Seed 003's step "check radial plots": say why there is none rather than leave it missing.
        text += (f" No radar (radial) figure: with {n_tasks} task{'s' if n_tasks != 1 else ''} a config's "
                 "polygon would have fewer than 3 corners, a line or a point that shows nothing the scores "
                 "table does not; it is drawn from 3 tasks.")
    return text


def _family_text(rows: list[ComparisonRow]) -> str:
    """`` (one Holm family: metric score, m = 4, as in `benchlab compare` and `analyze`)``, or ''."""
    families = list(dict.fromkeys(r.holm_family for r in rows if r.holm_family))
    if not families:
        return ""
    return f" (one Holm family: {'; '.join(families)}, as in `benchlab compare` and `analyze`)"


def _comparisons_text(data: ReportData) -> str:
    info = data.info
    goal = _goal(data)
    if not info.baseline:
        return "No baseline is named in the spec, so no config is compared against one."
    rows = _primary_comparisons(data)
    if data.analysis is not None:
        methods = data.analysis.methods
        lines = []
        if rows:
            lines += [
                f"Each config against the baseline **{inline(info.baseline)}** on the final "
                f"{inline(info.primary)}. Mean diff is candidate − baseline "
                f"({'higher' if goal == 'max' else 'lower'} "
                "is an improvement) with its 95% CI ("
                + ((methods.diff_ci if methods else None) or "bootstrap")
                + "). Runs are paired by seed where the shared "
                "seeds are most of each config's runs (paired t-test and Wilcoxon "
                "signed-rank), otherwise compared unpaired on every run (Welch t-test and "
                "Mann–Whitney U). "
                "Holm p is the t-test p-value (the rank test's where every difference is the "
                "same, which leaves the t-test undefined) adjusted by Holm–Bonferroni over all "
                "comparisons below" + _family_text(rows) + "; ✓ significant means Holm p < 0.05, the CI of "
                "the difference excludes 0, and, for a metric with a known range, a betting test valid "
                "for any distribution in that range confirms it at its Holm level (without a range, "
                "only where the metric declares `assume: normal`); the last column names the method "
                "that decided. Undetermined means no verdict: a side has fewer than two seeds, "
                "a constant shift on too few seeds for the rank test, or a t verdict that the range "
                "test does not confirm or that has no range to be checked against (the warnings say "
                "which, and how many seeds a range-valid test needs; docs/statistics.md). "
                "Seeds are completed/planned. P(improvement) is the probability that a run of "
                "the candidate beats one of the baseline."
                + (" **Seeds were added until decided (`run --until-decided`): these p-values and "
                   "intervals are fixed-sample ones, which ignore that adaptive stopping and "
                   "overstate the evidence; the decision that accounts for it is the sequential "
                   "test's, in the header.**" if data.sequential and data.sequential.pairs
                   else ""),
                "",
                _failed_as_text(data),
                "",
            ]
            lines += _comparison_rows(data, rows)
        else:
            lines.append(f"No config could be compared with the baseline **{inline(info.baseline)}**.")
        agg = data.analysis.aggregate
        if agg:
            norm = data.analysis.normalization.method if data.analysis.normalization else None
            shown = inline(info.primary)
            scores_of = {"none": f"raw {shown} (no reference scores)",
                         "references": f"{shown} normalised by the reference scores",
                         "observed": f"{shown} min–max normalised over the configs",
                         "mixed": f"{shown} normalised by reference or observed values",
                         }.get(str(norm), f"normalised {shown}")
            lines += [
                "",
                f"Across tasks ({scores_of}, after rliable: "
                "interquartile mean, median, mean and optimality gap with stratified "
                "bootstrap 95% CIs):",
                "",
                "| config | seeds (all tasks) | IQM | median | mean | optimality gap |",
                "|---|---:|---|---|---|---|",
            ]
            counts = primary_counts(data)
            for a in agg:
                mine = [c for (_, cfg), c in counts.items() if cfg == a.config]
                cells = [f"{sum(c.completed for c in mine)}/{sum(c.planned for c in mine)}"
                         if mine else "—"]
                for e in (a.iqm, a.median, a.mean, a.optimality_gap):
                    lo, hi = e.ci_low, e.ci_high
                    at = places((hi - lo) / 2) if lo is not None and hi is not None else None
                    cells.append(f"{fmt_at(e.value, at)} [{fmt_at(lo, at)}, {fmt_at(hi, at)}]")
                lines.append(f"| {cell(a.config)} | " + " | ".join(cells) + " |")
        lines += ["", _methods_text(data)]
        warnings = data.analysis.warnings
        if warnings:
            lines += ["", "Warnings from the analysis:", ""]
            lines += [f"- {inline(w)}" for w in warnings[:20]]
            if len(warnings) > 20:
                lines.append(f"- … and {len(warnings) - 20} more")
        return "\n".join(lines)
    return ""


def _benchlab_checkout() -> tuple[Path, str | None] | None:
    """The source checkout benchlab runs from (an editable install) and its commit, if any."""
    import subprocess

    import benchlab

    root = Path(benchlab.__file__).resolve().parents[2]
    if not (root / "pyproject.toml").is_file():
        return None
    try:
        done = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True,
                              text=True, timeout=20, check=False)
    except OSError:
        return root, None
    return root, (done.stdout.strip() or None) if done.returncode == 0 else None


def _versions_sentence(data: ReportData) -> str:
    """The summary's word on runs that ran at different code (``run --allow-changed``)."""
    if not data.code_versions:
        return ""
    parts = [f"{len(cv.runs)} at {_code_name(cv)}" for cv in data.code_versions]
    return (f" Its runs ran at {len(data.code_versions)} versions of the code under test ({_list(parts)}): "
            "their scores may differ by the code as well as by the config; the Reproduction section "
            "lists which runs ran at which.")


def _code_name(cv: Any) -> str:
    commit = f"commit {cv.commit[:10]}" if cv.commit else "no commit"
    return commit + (" with uncommitted changes" if cv.dirty else "") + f" (versions/{cv.version}/)"


def _runs_in_words(runs: list[tuple[str, str, int]]) -> str:
    """``t1/a seeds 0–2; t1/b seed 3``: runs grouped by task and config."""
    by: dict[tuple[str, str], list[int]] = {}
    for task, config, seed in runs:
        by.setdefault((task, config), []).append(seed)
    return "; ".join(f"{t}/{c} seed{'s' if len(s) > 1 else ''} {', '.join(map(str, sorted(s)))}"
                     for (t, c), s in by.items())


def _install_lines(data: ReportData) -> list[str]:
    """The lines that install the benchlab that made this report."""
    import shlex

    lines = []
    source = _benchlab_checkout()
    if source is not None:
        root, sha = source
        lines.append(f"# benchlab {data.benchlab_version}, installed from its source checkout"
                     + (f" at {sha[:12]}" if sha else ""))
        if sha:
            lines.append(f"git -C {shlex.quote(str(root))} checkout {sha}")
        lines.append(f"pip install {shlex.quote(str(root))}")
    else:
        lines.append(f"# benchlab {data.benchlab_version} made this report: install that version "
                     "from its source")
    return lines


def _sets(overrides: dict[str, Any]) -> str:
    import shlex

    return " ".join("-s " + shlex.quote(f"{k}={json.dumps(v) if not isinstance(v, str) else v}")
                    for k, v in overrides.items())


def _reproduce_merged(data: ReportData) -> list[str]:
    """Shell lines that run each source of a merged report again, each at its own code, and
    merge the new folders: one checkout cannot give two sources two codes, so each is its own step."""
    import shlex

    codes = {(c.commit, c.dirty) for s in data.sources for c in s.codes}
    folders = [s for s in data.sources if not s.is_table]
    lines = [f"# merged from {len(data.sources)} sources; each is reproduced on its own"]
    if len(codes) > 1:
        lines.append(f"# their runs ran at {len(codes)} versions of the code under test: one command cannot "
                     "reproduce them all, so each folder below checks out its own")
    lines += _install_lines(data)
    again: list[str] = []
    for s in data.sources:
        lines.append(f"# {s.name}: {s.path} ({s.code_text()})")
        if s.is_table:
            lines.append("# a long-format table, not runs benchlab made: nothing to run again, it is merged as it is")
            again.append(shlex.quote(s.path))
            continue
        spec = s.spec_path or "<spec.yaml>"
        where = Path(s.spec_path).parent if s.spec_path else None
        if len(s.codes) > 1:
            lines.append(f"# its own runs ran at {len(s.codes)} codes; below, the last of them")
        code = s.codes[-1] if s.codes else None
        if code is not None and code.commit:
            lines.append(f"git -C {shlex.quote(str(where))} checkout {code.commit}" if where
                         else f"git checkout {code.commit}")
        folder = Path(s.path)
        target = folder.with_name(folder.name + "-again")
        sets = _sets(s.overrides)
        lines.append(f"benchlab run {shlex.quote(spec)} --results {shlex.quote(str(target))}"
                     + (f" {sets}" if sets else ""))
        again.append(shlex.quote(str(target)))
    out = data.results.resolve() if data.results is not None else None
    out_again = f" --out {shlex.quote(str(out.with_name(out.name + '-again')))}" if out is not None else ""
    lines.append(f"benchlab report {' '.join(again)}{out_again}")
    if folders:
        lines.append("# this report again, from the runs it was made of: benchlab report "
                     + " ".join(shlex.quote(s.path) for s in data.sources)
                     + (f" --out {shlex.quote(str(out))}-copy" if out is not None else ""))
    return lines


def _reproduce(data: ReportData) -> list[str]:
    """Shell lines that run the benchmark again and report it, each working as written."""
    import shlex

    if data.sources:
        return _reproduce_merged(data)
    info = data.info
    folder = data.results.resolve() if data.results is not None else None
    if not info.spec and folder is not None:
        # No spec made these runs (imported from MLflow, W&B or Hydra, or a ledger rebuilt without
        # benchmark.json): no `benchlab run` can run them again, and the report must not offer one.
        return ["# no spec of these runs is kept in the folder: imported runs name their origin in "
                "runs/*/provenance.json (imported_from)",
                f"# this report again, from the runs it was made of: benchlab report {shlex.quote(str(folder))}"]
    lines = []
    spec = info.spec_path or "<spec.yaml>"
    commit = data.git.commit
    if data.code_versions:
        # One checkout cannot give every run its code: say which ran at which, and reproduce the last.
        lines.append(f"# these runs ran at {len(data.code_versions)} versions of the code under test "
                     "(benchlab run --allow-changed); one command cannot reproduce them all:")
        for cv in data.code_versions:
            lines.append(f"#   {len(cv.runs)} runs at {_code_name(cv)}: {_runs_in_words(cv.runs)}")
        lines.append("# below, the whole benchmark at the last of them; check out another commit to "
                     "reproduce its runs (benchlab run runs every run of the spec at that code)")
        commit = data.code_versions[-1].commit
    if commit:
        where = Path(info.spec_path).parent if info.spec_path else None
        lines.append("# the code under test, at the commit its runs recorded"
                     + (" (they used uncommitted changes too)" if data.git.dirty else ""))
        lines.append(f"git -C {shlex.quote(str(where))} checkout {commit}" if where
                     else f"git checkout {commit}")
    lines += _install_lines(data)
    sets = _sets(info.overrides)
    again = folder.with_name(folder.name + "-again") if folder is not None else None
    target = f" --results {shlex.quote(str(again))}" if again is not None else ""
    lines.append(f"benchlab run {shlex.quote(spec)}{target}" + (f" {sets}" if sets else ""))
    lines.append(f"benchlab report {shlex.quote(str(again))}" if again is not None
                 else "benchlab report")
    if folder is not None:
        lines.append(f"# this report again, from the runs it was made of: "
                     f"benchlab report {shlex.quote(str(folder))}")
    return lines


def _seeds_text(info: BenchmarkInfo, prim: list[SummaryRow],
                planned_seeds: dict[tuple[str, str], list[int]] | None = None) -> str:
    """Completed/planned seeds per config: ``3/3`` when every config and task has the same count,
    else per config (``a 3/3, b 1–3/3``: a range over its tasks). ``planned_seeds`` (the runs in
    the plan per (task, config)) counts seeds added after the spec's (``run --until-decided``)."""
    done = {(r.task, r.config): r.n for r in prim}
    configs = list(info.configs) or sorted({c for _, c in done})
    tasks = list(info.tasks) or sorted({t for t, _ in done})
    per_config = {c: sorted({done.get((t, c), 0) for t in tasks}) for c in configs}
    seeds = list(info.seeds)
    extra = planned_seeds and any(len(v) > len(seeds) for v in planned_seeds.values())
    if planned_seeds and extra:
        # Pairs planned with different numbers of seeds: completed/planned per config, each a range.
        every = sorted({s for v in planned_seeds.values() for s in v})

        def span(ns: list[int]) -> str:
            return str(ns[0]) if ns[0] == ns[-1] else f"{ns[0]}–{ns[-1]}"

        parts = []
        for c in configs:
            want = sorted(len(planned_seeds.get((t, c), [])) for t in tasks)
            parts.append(f"{inline(c)} {span(per_config[c])}/{span(want)}")
        return ", ".join(parts) + f" (seeds {every[0]}–{every[-1]}; seeds added until decided)"
    planned = f"/{len(seeds)}" if seeds else ""

    def counts(ns: list[int]) -> str:
        return (str(ns[0]) if len(ns) == 1 else f"{ns[0]}–{ns[-1]}") + planned

    distinct = {tuple(ns) for ns in per_config.values()}
    if len(distinct) <= 1:
        text = counts(next(iter(per_config.values()), [0]))
    else:
        text = ", ".join(f"{inline(c)} {counts(ns)}" for c, ns in per_config.items())
    return text + (f" (seeds {seeds[0]}–{seeds[-1]})" if seeds else "")


def _plot_notes(data: ReportData) -> list[str]:
    """Why a figure the report usually has was left out."""
    if not data.plots:
        return []
    figures = data.analysis.figures if data.analysis is not None else None
    reason = figures.profile_omitted if figures is not None else None
    return [f"No performance profile: {reason}."] if reason else []


def _sequential_text(sequential: SequentialRecord | None) -> str:
    """Each pair's seeds and why it stopped getting more, as ``run --until-decided`` left them."""
    if not sequential or not sequential.pairs:
        return ""
    design = sequential.design
    alpha = design.alpha
    pairs = design.pairs
    how = [f"α = {alpha:g}" + (f" over {pairs} pairs (Bonferroni)" if pairs else "")
           if isinstance(alpha, int | float) else "",
           f"{design.spending} spending" if design.spending else "",
           f"looks at {', '.join(map(str, design.looks))} seeds" if design.looks else ""]
    each = []
    for p in sequential.pairs:
        failed = f", {p.failed} without a value" if p.failed else ""
        each.append(f"{inline(p.task)}/{inline(p.config)} {p.seeds} seeds ({inline(p.reason)}{failed})")
    head = ", ".join(h for h in how if h)
    lead = f"{head}; vs {inline(sequential.baseline)}, as of the last look: " if head else ""
    return lead + "; ".join(each)


def warm_templates(html: bool = True) -> None:
    """Load (and compile) BENCHMARK_REPORT.md's template ahead of :func:`render_markdown`, and with
    ``html`` the Markdown parser report.html is made with: done while the figures are drawn."""
    _env().get_template("BENCHMARK_REPORT.md.j2")
    if html:
        import markdown_it  # noqa: F401


def render_markdown(data: ReportData) -> str:
    """The text of BENCHMARK_REPORT.md."""
    if data.analysis is None:
        from benchlab.report import analyze

        data = analyze(data)
    info = data.info
    tables, secondary = task_tables(data)
    seeds_text = _seeds_text(info, _described(data), data.planned)
    spec_configs = {c["name"]: c for c in info.spec.get("configs", [])}
    configs = []
    for name in info.configs:
        c = spec_configs.get(name, {"name": name})
        body = {k: v for k, v in c.items() if k not in ("name", "description")}
        description = c.get("description")
        origin = c.get("origin")
        if isinstance(origin, dict):
            # A config promoted from a search: where its params come from, which the table's
            # numbers (measured on the benchmark's seeds) do not say.
            promoted = (f"promoted from search {origin.get('study')}, trial {origin.get('trial')} "
                        f"({origin.get('metric')} = {origin.get('value'):.4g} on search seeds "
                        f"{origin.get('seeds')}, tuned on {origin.get('spec')})")
            description = f"{description}; {promoted}" if description else promoted
        configs.append(
            {
                "name": name,
                "description": description,
                "yaml": _yaml_text(body or {"params": {}}),
            }
        )
    legend = "Rank 1 is the best mean over seeds; std is the sample standard deviation (n−1)"
    if data.analysis is not None:
        methods = [r.ci_method for r in data.analysis.rows_of() if r.ci_method]
        method = max(set(methods), key=methods.count) if methods else "Student-t"
        legend += (
            f"; 95% CI is the interval of the mean ({method}), shown to the precision it "
            "supports (two significant digits of its half-width); one seed has no interval, "
            "unless the evaluation reported its own standard error (marked s.e.: the normal "
            "interval value ± 1.96 s.e.; lm-eval standard error where lm-evaluation-harness "
            "computed it); ⚠ marks high variance "
            "(std above 1% of |mean|); (CI overlaps the best's) marks a config whose 95% CI "
            "overlaps the best one's: it shares rank 1, which is not a test (overlapping "
            "intervals can still differ significantly; the comparisons below test them)"
        )
    legend += ("; seeds are completed/planned: failed seeds "
               + ("are excluded" if data.failed_as == "exclude" else "are scored as the worst value")
               + f" (--failed-as {data.failed_as}), missing ones have not run; "
               "✗ failed marks a config with no completed seed.")
    return _env().get_template("BENCHMARK_REPORT.md.j2").render(
        name=info.name,
        date=_dt.date.today().isoformat(),
        tasks=info.tasks,
        primary=info.primary,
        goal=_goal(data),
        seeds_text=seeds_text,
        sequential_text=_sequential_text(data.sequential),
        hardware=data.hardware,
        description=info.description,
        summary=_summary_sentences(data) + _partial_sentence(data) + _versions_sentence(data),
        task_tables=tables,
        secondary=secondary,
        legend=legend,
        plots=data.plots,
        plot_notes=_plot_notes(data),
        comparisons=_comparisons_text(data),
        questions=data.questions,
        analysis_plan=data.analysis_plan,
        configs=configs,
        command=info.spec.get("command", "(per config)"),
        failures=data.failures,
        gpu_use=data.gpu_use,
        reproduce=_reproduce(data),
    ).replace(BR, "<br>")

