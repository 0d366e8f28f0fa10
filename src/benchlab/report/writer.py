"""The report's assembly: the results table gathered, analysed once, and every file written.

``write_report`` takes the results table (:class:`benchlab.results.Results`: the
final scalars, a view of the curves, and what the ledger says of failed and
placed runs), has :mod:`benchlab.stats` compute every number, and hands both to
each writer, so every file tells the same story. It reads nothing else: no
ledger, no run directory. The curves the figures draw come with the table
(:func:`benchlab.results.read` reads them once), and the figures' workers receive
them with their job. What each file holds is described in ``docs/reports.md``.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from benchlab.history import preregistration
from benchlab.names.results_files import BENCHMARKS_FILE, PLOTS_DIR, REPORT_FILE, RESULTS_CSV, report_tables_file
from benchlab.names.run_files import runs_dir
from benchlab.report.atomic import publish_plots, remove_stale_plots, staging_dir, write_text_atomic
from benchlab.report.gcscope import collections_deferred
from benchlab.report.leaderboard import config_settings, render_leaderboard, status, task_settings
from benchlab.report.markdown import CodeAt, FailureRow, ReportData, render_markdown, warm_templates
from benchlab.results import Curves, Environment, GpuPlacement, Results, find_results, read
from benchlab.stats.results_analysis import (
    DEFAULT_REPS,
    CurveSummaries,
    ResultsAnalysis,
    analyze_table,
    summarise_curves,
)

if TYPE_CHECKING:
    import pandas as pd

    from benchlab.names.report_tables import NumbersKey
    from benchlab.report.plots import FigureWorkers

__all__ = ["DEFAULT_REPS", "ReportData", "ReportFiles", "analyze", "gather", "leaderboard", "status",
           "write_report"]


@dataclass
class ReportFiles:
    """The files a report wrote: ``extra`` holds BENCHMARKS.md, the kept tables (a report written
    into its results folder), the plots and report.html."""

    folder: Path
    markdown: Path
    csv: Path
    extra: list[Path] = field(default_factory=list)


def _hardware(env: Environment, used: list[GpuPlacement]) -> tuple[str, CodeAt]:
    """The Hardware line (the GPUs the runs used, by model and count, and the CPU) and the git state."""
    prov, hosts = env.provenance, env.hosts
    if not prov and not hosts:
        return "unknown (no run has written provenance yet)", CodeAt()
    recorded = prov.get("git") or {}
    git = CodeAt(commit=recorded.get("commit") or None, dirty=bool(recorded.get("dirty")))
    models: dict[str, int] = {}
    for host, index in sorted({(p.host, i) for p in used for i in p.gpus.split(",") if i}):
        facts = hosts.get(host)
        name = (facts.gpus.get(index) if facts else None) or "unknown GPU"
        models[name] = models.get(name, 0) + 1
    parts = [", ".join(f"{n}× {m}" for m, n in sorted(models.items()))] if models else []
    host = str(prov.get("host") or next(iter(hosts), "") or "")
    facts = hosts.get(host)
    cpu = (facts.cpu if facts else None) or prov.get("cpu_model")
    cores = (facts.cores if facts else None) or prov.get("cpu_count")
    parts.append(f"CPU: {cpu or 'unknown model'} ({cores} cores)" if cores else f"CPU: {cpu or 'unknown'}")
    parts.append(f"host {host}" + (f", {prov['platform']}" if prov.get("platform") else ""))
    return "; ".join(parts), git


def _gpu_rows(used: list[GpuPlacement]) -> list[dict[str, str]]:
    """A row per run placed on GPUs, from its latest such attempt (see the template's GPU use section)."""

    def fmt(v: float | None, spec: str = ".0f") -> str:
        return "—" if v is None else format(v, spec)

    return [{"run": _cell(p.run), "gpus": p.gpus, "util_mean": fmt(p.util_mean),
             "util_max": fmt(p.util_max),
             "mem_gib": fmt(None if p.mem_peak_mib is None else p.mem_peak_mib / 1024, ".1f"),
             "note": p.note} for p in used]


def _cell(text: str) -> str:
    from benchlab.report.tables import cell

    return cell(text).replace(">", "&gt;")


def gather(table: Results) -> ReportData:
    """Everything a report is made of, from the results table: the final scalars, the benchmark
    info, the failures, the hardware."""
    from benchlab import __version__
    from benchlab.history.merge import read_sources

    # The error is escaped for a Markdown table cell that report.html renders too.
    failures = [FailureRow(f.run, f.run_id, f.attempts, f.failure_class, _cell(f.error), f.tail)
                for f in table.failures]
    hardware, git = _hardware(table.environment, table.gpu_use)
    return ReportData(
        gpu_use=_gpu_rows(table.gpu_use),
        info=table.info,
        finals=table.finals,
        failures=failures,
        hardware=hardware,
        git=git,
        benchlab_version=__version__,
        results=table.folder,
        planned=table.planned,
        failed_runs=table.failed_runs,
        partial=[{"run": p.run, "note": p.note, "task": p.task, "config": p.config} for p in table.partial],
        tool_versions=_tool_versions(table.environment.provenance),
        registered_plan=table.registered_plan,
        sequential=table.sequential,
        run_ids=table.run_ids,
        code_versions=table.code_versions,
        curves=table.curves,
        sources=read_sources(table.folder),
    )


def published_table(table: Results) -> pd.DataFrame:
    """``results.csv``: the final values of the completed runs and a row for every other planned
    run, each with its status and failure class (:func:`benchlab.names.long_format.with_status`), so
    that ``benchlab analyze results.csv`` accounts for every seed as the report does."""
    from benchlab.names.long_format import with_status

    failed = {(f.task, f.config, int(f.seed)): f.failure_class for f in table.failures if f.seed is not None}
    failed.update({(t, c, int(s)): failed.get((t, c, int(s))) for t, c, s in table.failed_runs})
    return with_status(table.finals, table.planned, failed, table.info.primary, table.info.name)


def analyze(data: ReportData, *, failed_as: str = "exclude", reps: int = DEFAULT_REPS, seed: int = 0,
            curves: CurveSummaries | None = None) -> ReportData:
    """``data`` with its statistics (``analysis``): :func:`benchlab.stats.results_analysis.analyze_table`
    of its final values, every planned seed accounted for once (``failed_as``), every metric
    described and the primary one analysed in full. The writers render it and compute nothing.
    ``curves``: its curves' part, computed ahead (:func:`~benchlab.stats.results_analysis.summarise_curves`)."""
    analysis = analyze_table(data.finals, data.info, planned=data.planned, failed_runs=data.failed_runs,
                             failed_as=failed_as, reps=reps, seed=seed,
                             curves=data.curves if curves is None else curves)
    return replace(data, failed_as=failed_as, analysis=analysis, ranges=dict(analysis.ranges))


def leaderboard(data: ReportData, out_dir: Path | None = None) -> str:
    """The text of BENCHMARKS.md, from the analysis' rows (:func:`analyze`, run here if it was
    not); with ``out_dir`` (where it is written) each score links its median seed's run folder,
    and a list under the table every seed's."""
    stats = _analysis(data)
    info_ = data.info
    links = run_links(data, out_dir) if out_dir is not None else None
    prim = stats.rows_of()
    # Every task and config of the spec, even before any run of it completed.
    tasks = list(info_.tasks) + sorted({r.task for r in prim} - set(info_.tasks))
    configs = list(info_.configs) + sorted({r.config for r in prim} - set(info_.configs))
    return render_leaderboard(
        prim,
        tasks,
        configs,
        info_.targets,
        stats.goal,
        info_.primary,
        info_.name,
        seeds=stats.primary_counts(),
        failed_as=stats.failed_as,
        settings=task_settings(info_.spec, data.tool_versions),
        differs=config_settings(info_.spec),
        run_links=links,
        score_links=score_links(stats, links) if links else None,
        partial=partial_cells(data.partial),
    )


def _analysis(data: ReportData) -> ResultsAnalysis:
    return data.analysis if data.analysis is not None else analyze_table(
        data.finals, data.info, planned=data.planned, failed_runs=data.failed_runs, failed_as=data.failed_as)


def _tool_versions(provenance: dict[str, Any]) -> dict[str, str]:
    """The evaluation tool's version a run recorded (``{"lm_eval": "0.4.13"}``), from the first
    run's provenance (``benchlab.evalrules.settings_of``)."""
    evaluation = provenance.get("evaluation")
    if isinstance(evaluation, dict) and evaluation.get("tool") and evaluation.get("version"):
        return {str(evaluation["tool"]): str(evaluation["version"])}
    return {}


def partial_cells(partial: list[dict[str, str]]) -> dict[tuple[str, str], list[str]]:
    """(task, config) -> the notes of its partial runs."""
    cells: dict[tuple[str, str], list[str]] = {}
    for p in partial:
        note = p["note"].split(": ", 1)[-1]
        notes = cells.setdefault((p["task"], p["config"]), [])
        if note not in notes:
            notes.append(note)
    return cells


def run_links(data: ReportData, out_dir: Path | None) -> dict[tuple[str, str], list[tuple[int, str]]]:
    """Each (task, config)'s seeds with a link to its run folder, relative to ``out_dir``."""
    import os

    if data.results is None:
        return {}
    where = os.path.relpath(runs_dir(data.results), out_dir or data.results)
    # A link only to a folder that is there: a run merged from a CSV table has none.
    listed = set(os.listdir(runs_dir(data.results))) if runs_dir(data.results).is_dir() else set()
    out = {k: [(seed, f"{Path(where, rid).as_posix()}/") for seed, rid in v if rid in listed]
           for k, v in data.run_ids.items()}
    return {k: v for k, v in out.items() if v}


def score_links(
    analysis: ResultsAnalysis, links: dict[tuple[str, str], list[tuple[int, str]]]
) -> dict[tuple[str, str], str]:
    """The run folder each (task, config)'s score links to: its median seed's by the primary
    metric (:meth:`~benchlab.stats.results_analysis.ResultsAnalysis.median_seed`), among the seeds
    with a folder."""
    out: dict[tuple[str, str], str] = {}
    for (task, config), seeds in links.items():
        pick = analysis.median_seed(task, config, [seed for seed, _ in seeds])
        if pick is not None:
            out[(task, config)] = dict(seeds)[pick]
    return out


def write_report(
    results: Results | Path | str | None = None,
    out: Path | str | None = None,
    *,
    plots: bool = True,
    html: bool = True,
    seeds: bool = False,
    reps: int = DEFAULT_REPS,
    seed: int = 0,
    workers: int | None = None,
    failed_as: str = "exclude",
) -> ReportFiles:
    """Write the report files into ``out`` (default: the results folder) and return their paths.

    Args:
        results: the results table (:func:`benchlab.results.read`), or the results folder
            to read it from (default: found from the working directory).
        out: where to write (default: the results folder); ``plots/`` is created under it.
        plots: draw the PNG figures (the slowest part).
        html: write ``report.html`` (the Markdown report with the plots embedded).
        seeds: draw individual seed curves (at most 20 per config) under the means.
        reps: bootstrap resamples of the statistics.
        seed: seed of every random procedure, so the same folder gives the same report.
        workers: processes drawing the figures while the statistics are computed
            (default: one per core, at most one per figure; 0 draws in this process).
        failed_as: how failed seeds enter the statistics, the tables and the plots:
            ``"exclude"`` (left out, and every claim they touch says so) or ``"worst"``
            (scored as the worst value; see :mod:`benchlab.stats.accounting`).
    """

    pool = None
    if plots:
        import pandas  # noqa: F401 - reading needs it: imported before the workers fork, they share it
    with collections_deferred():
        if plots:
            from benchlab.report.plots import start_workers

            # Started before the results are read: the workers import matplotlib meanwhile.
            pool = start_workers(workers)
        try:
            # The figures' function (plots.draw) shuts the workers down once they are drawn.
            return _write_report(results, out, pool, plots=plots, html=html, seeds=seeds, reps=reps, seed=seed,
                                 workers=workers, failed_as=failed_as)
        except BaseException:
            if pool is not None:  # not waited for: they die with this process at the latest (plots._die_with)
                pool.shutdown(wait=False, cancel_futures=True)
            raise


def _with_curves(used: pd.DataFrame, curves: Curves, plan: preregistration.AnalysisPlan) -> pd.DataFrame:
    """``used`` with the logged curve of the plan's metric for each run it holds, where the plan
    summarises curves (``auc``, ``max``, ``slope``): the report's table holds final values only,
    and a plan judged on them alone had nothing to judge."""
    if plan.summary == "final":
        return used
    import pandas as pd

    kept = set(zip(used["task"], used["config"], used["seed"], strict=True))
    parts = [pd.DataFrame({"task": task, "config": config, "seed": seed, "metric": metric,
                           "step": steps, "value": values})
             for (metric, task), items in curves.groups().items() if metric == plan.metric
             for config, seed, steps, values in items if (task, config, seed) in kept]
    if not parts:
        return used
    extra = pd.concat(parts, ignore_index=True)
    for column in used.columns:
        if column not in extra.columns:
            extra[column] = used[column].iloc[0] if len(used) else None
    return pd.concat([used, extra[list(used.columns)]], ignore_index=True)


def _tables_key(table: Results, out_dir: Path, *, failed_as: str, reps: int, seed: int) -> NumbersKey | None:
    """The key the report's tables are kept under for the dashboard; None where they are not kept:
    a report written elsewhere than its results folder (``--out``), or of a table read from no
    ledger (a CSV, several folders merged)."""
    from benchlab.results import tables_key

    if table.folder is None or table.ledger_digest is None or out_dir.resolve() != table.folder.resolve():
        return None
    return tables_key(table.folder, table.ledger_digest, failed_as=failed_as, reps=reps, seed=seed)


def _write_report(results: Results | Path | str | None, out: Path | str | None, pool: FigureWorkers | None,
                  *, plots: bool, html: bool, seeds: bool, reps: int, seed: int, workers: int | None,
                  failed_as: str) -> ReportFiles:
    if isinstance(results, Results):
        table = results
    else:
        folder = find_results(results)
        # The ledger's digest keys the tables kept for the dashboard, which are kept only in the
        # results folder itself (_tables_key): a report written elsewhere needs none.
        table = read(folder, keyed=out is None or Path(out).resolve() == folder.resolve())
    if out is not None:
        out_dir = Path(out)
    elif table.folder is not None:
        out_dir = table.folder
    else:
        raise ValueError("write_report: a results table read from no folder needs `out`")
    out_dir.mkdir(parents=True, exist_ok=True)
    ahead = started = None
    if plots:
        # Drawn aside and moved in whole: the previous report keeps its figures until then.
        staging = staging_dir(out_dir)
    if pool is not None:
        from benchlab.report.plots import draw_curves

        # The curve figures need only the curves' part of the analysis: with workers, they are
        # drawn while the rest of it is computed here.
        ahead = summarise_curves(table.curves, table.info)
        started = draw_curves(staging, table.info, ahead.curves, ahead.ranges, seeds=seeds, pool=pool)
    data = analyze(gather(table), failed_as=failed_as, reps=reps, seed=seed, curves=ahead)
    assert data.analysis is not None
    info_, used = data.info, data.analysis.used
    pending = None
    if plots:
        from benchlab.report.plots import draw

        pending = draw(
            staging, info_, data.analysis, seeds=seeds, workers=workers,
            ranges=data.ranges, pool=pool, started=started,
        )
    # The figures draw in worker processes meanwhile: the rest is written after they are handed out.
    csv_path = out_dir / RESULTS_CSV
    write_text_atomic(csv_path, published_table(table).to_csv(index=False))
    questions = None
    questions_text = analysis_plan = ""
    # Keyed before the per-question records are read (tables_key says why).
    key = _tables_key(table, out_dir, failed_as=failed_as, reps=reps, seed=seed)
    if table.folder is not None:
        from benchlab.report.questions import question_analysis, render_section

        questions = question_analysis(table.folder, info_, table.run_ids)
        questions_text = render_section(questions) if questions is not None else ""
    if data.registered_plan is not None and used is not None:
        judged = preregistration.judge(_with_curves(used, data.curves, data.registered_plan.plan),
                                       data.registered_plan.plan, info_.goal, list(info_.configs),
                                       registered=data.registered_plan, now=preregistration.plan_of(info_),
                                       reps=reps, seed=seed)
        analysis_plan = preregistration.statement(data.registered_plan, info_, judged)
    # While the figures are still drawn: what needs none of them (BENCHMARKS.md's text), and the
    # templates the rest is written with.
    bench_text = leaderboard(data, out_dir)
    if questions is not None and questions.comparisons:
        from benchlab.report.questions import render_marks

        bench_text = bench_text.rstrip("\n") + "\n\n" + render_marks(questions) + "\n"
    if pending is not None:
        warm_templates(html)
    extra: list[Path] = []
    figures: list[dict[str, str]] = []
    if pending is not None:
        figures = [p.as_dict() for p in pending()]
        drawn = publish_plots(staging, out_dir / PLOTS_DIR)
        extra += [out_dir / p["path"] for p in figures]
    bench_md = out_dir / BENCHMARKS_FILE
    write_text_atomic(bench_md, bench_text)
    extra.insert(0, bench_md)
    if key is not None and not (data.finals.empty and not data.failed_runs):
        from benchlab.names import report_tables
        from benchlab.report.numbers import report_numbers

        report_tables.write(report_tables_file(out_dir), report_numbers(data, questions_text), key)
        extra.insert(1, report_tables_file(out_dir))
    # The sections that are not statistics of the results table, added once they are all known.
    data = replace(data, questions=questions_text, analysis_plan=analysis_plan, plots=figures)
    text = render_markdown(data)
    md = out_dir / REPORT_FILE
    write_text_atomic(md, text)
    if html:
        from benchlab.report.html import write_html

        page = text
        if table.searches:
            # The searches' trials are shown apart and never enter the benchmark's tables.
            from benchlab.report.search import search_sections

            page += "\n" + search_sections(table.searches, out_dir, plots=plots)
        extra.append(write_html(page, out_dir, f"Benchmark report: {info_.name}"))
    if pending is not None:
        # Only now that no new file points at them (a stale figure would be embedded otherwise).
        remove_stale_plots(out_dir / PLOTS_DIR, drawn)
    return ReportFiles(folder=out_dir, markdown=md, csv=csv_path, extra=extra)
