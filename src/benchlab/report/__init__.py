"""Reports: BENCHMARK_REPORT.md, BENCHMARKS.md, results.csv, plots/ and report.html.

``write_report`` gathers the results table, the statistics and the ledger's
failures once and hands them to each writer, so every file tells the same
story. What each file holds is described in ``docs/reports.md``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from benchlab import preregistration
from benchlab.ranges import metric_ranges
from benchlab.report.analysis import DEFAULT_REPS, analyze_primary, ledger_seeds
from benchlab.report.atomic import publish_plots, remove_stale_plots, staging_dir, write_text_atomic
from benchlab.report.leaderboard import render_leaderboard, status, task_settings
from benchlab.report.markdown import ReportData, primary_counts, render_markdown
from benchlab.report.tables import describe
from benchlab.results import find_results, info, load
from benchlab.run_files import PROVENANCE_FILE, runs_dir
from benchlab.store import FAILED, AttemptRecord, RunRecord, Store

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["DEFAULT_REPS", "ReportData", "ReportFiles", "account_seeds", "analyze", "gather", "leaderboard",
           "status", "write_report"]


@dataclass
class ReportFiles:
    """The files a report wrote: ``extra`` holds BENCHMARKS.md, the plots and report.html."""

    folder: Path
    markdown: Path
    csv: Path
    extra: list[Path] = field(default_factory=list)


def _hardware(results: Path) -> tuple[str, dict[str, object]]:
    """The Hardware line (the GPUs the runs used, by model and count, and the CPU) and the git state."""
    prov: dict[str, object] = {}
    for path in sorted(runs_dir(results).glob(f"*/{PROVENANCE_FILE}"))[:1]:
        try:
            prov = json.loads(path.read_text())
        except ValueError:
            continue
    try:
        with Store.open(results) as store:
            hosts = store.meta().get("hardware") or {}
            used = [a for _, a in store.gpu_attempts()]
    except Exception:  # noqa: BLE001 - a report is still written without the ledger's hardware notes
        hosts, used = {}, []
    if not prov and not hosts:
        return "unknown (no run has written provenance yet)", {}
    git = prov.get("git") or {}
    models: dict[str, int] = {}
    for host, index in sorted({(a.host or "", i) for a in used for i in (a.gpus or "").split(",") if i}):
        name = ((hosts.get(host) or {}).get("gpus") or {}).get(index) or "unknown GPU"
        models[name] = models.get(name, 0) + 1
    parts = [", ".join(f"{n}× {m}" for m, n in sorted(models.items()))] if models else []
    host = str(prov.get("host") or next(iter(hosts), "") or "")
    facts = hosts.get(host) or {}
    cpu = facts.get("cpu") or prov.get("cpu_model")
    cores = facts.get("cores") or prov.get("cpu_count")
    parts.append(f"CPU: {cpu or 'unknown model'} ({cores} cores)" if cores else f"CPU: {cpu or 'unknown'}")
    parts.append(f"host {host}" + (f", {prov['platform']}" if prov.get("platform") else ""))
    return "; ".join(parts), git  # type: ignore[return-value]


def _gpu_use(results: Path) -> list[dict[str, str]]:
    """A row per run placed on GPUs, from its latest such attempt (see the template's GPU use section)."""
    rows = []
    with Store.open(results) as store:
        for name, a in store.gpu_attempts():
            use = a.gpu_use

            def fmt(v: float | None, spec: str = ".0f") -> str:
                return "—" if v is None else format(v, spec)

            rows.append({"run": _cell(name), "gpus": a.gpus or "",
                         "util_mean": fmt(use.util_mean if use else None),
                         "util_max": fmt(use.util_max if use else None),
                         "mem_gib": fmt(None if use is None or use.mem_peak_mib is None
                                        else use.mem_peak_mib / 1024, ".1f"),
                         "note": use.note if use else "not sampled"})
    return rows


def _cell(text: str) -> str:
    text = " ".join(text.split())
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace("|", "\\|")


def gather(results: Path | str | None = None) -> ReportData:
    """Everything a report is made of: the final-scalar table, the benchmark info, the failures."""
    from benchlab import __version__

    folder = find_results(results)
    meta = info(folder)
    table = load(folder, series=False)
    failures = []
    runs: dict[str, RunRecord] = {}
    attempts: dict[str, list[AttemptRecord]] = {}
    planned, failed_runs = ledger_seeds(folder)
    with Store.open(folder) as store:
        registered = store.meta().get(preregistration.META_KEY)
        run_ids: dict[tuple[str, str], list[tuple[int, str]]] = {}
        for task, config, seed, rid in store.conn.execute(
                f"SELECT task, config, seed, run_id FROM runs WHERE status = 'completed' AND {store.in_spec_sql()}"
                " ORDER BY task, config, seed"):
            run_ids.setdefault((task, config), []).append((int(seed), rid))
        # Reading every run and attempt costs ~0.3 s at 10,000 runs; most sweeps have no failure.
        if store.counts().get(FAILED):
            runs = {r.run_id: r for r in store.runs() if r.status == FAILED}
            for a in store.attempts():
                if a.run_id in runs:
                    attempts.setdefault(a.run_id, []).append(a)
        # A completed attempt's error is a note that qualifies it: an lm-eval run cut short by --limit
        # (collect/lm_eval.py). One indexed-free scan of the attempts, only the matching rows read.
        partial = [
            {"run": name, "note": note}
            for name, note in store.conn.execute(
                "SELECT runs.name, attempts.error FROM attempts JOIN runs ON runs.run_id = attempts.run_id"
                f" WHERE attempts.status = 'completed' AND runs.status = 'completed' AND {store.in_spec_sql()}"
                " AND attempts.error LIKE 'partial evaluation%' ORDER BY runs.name"
            )
        ]
    for rid, run in runs.items():
        tries = attempts.get(rid, [])
        last = tries[-1] if tries else None
        failures.append(
            {
                "run": run.name,
                "run_id": rid,
                "attempts": len(tries),
                "failure_class": last.failure_class if last else "unknown",
                # Escaped for a Markdown table cell that report.html renders too.
                "error": _cell(last.error or "") if last else "",
                "tail": "\n".join((last.log_tail or "").splitlines()[-10:]) if last else "",
            }
        )
    hardware, git = _hardware(folder)
    return ReportData(
        gpu_use=_gpu_use(folder),
        info=meta,
        finals=table,
        failures=failures,
        hardware=hardware,
        git=git,
        benchlab_version=__version__,
        results=folder,
        planned=planned,
        failed_runs=failed_runs,
        ranges=metric_ranges(meta.spec),
        partial=partial,
        registered_plan=registered,
        run_ids=run_ids,
    )


def account_seeds(data: ReportData, failed_as: str = "exclude") -> pd.DataFrame:
    """Account for every planned seed of ``data`` (``data.used``, ``data.accounting``) and return
    the per (task, config, metric) table of :func:`benchlab.report.tables.describe` over them.

    The tables and plots see what the statistics see: failed seeds left out or scored worst.
    """
    from benchlab.stats.accounting import account

    info_ = data.info
    data.failed_as = failed_as
    used, accounting = account(
        data.finals, failed_as, info_.goal or "max", data.planned, data.failed_runs, data.ranges
    ) if len(data.finals) else (data.finals, None)
    data.accounting = accounting
    data.used = used
    return describe(used, info_.goal, info_.primary)


def analyze(data: ReportData, *, reps: int = DEFAULT_REPS, seed: int = 0) -> None:
    """The report's statistics of the primary metric (``data.analysis``), after :func:`account_seeds`."""
    data.analysis = analyze_primary(
        data.finals, data.info, reps=reps, seed=seed, failed_as=data.failed_as, planned=data.planned,
        failed_runs=data.failed_runs, ranges=data.ranges,
    )


def leaderboard(data: ReportData, desc: pd.DataFrame, out_dir: Path | None = None) -> str:
    """The text of BENCHMARKS.md, from :func:`account_seeds`' table; with ``out_dir`` (where it
    is written) each score links its seeds' run folders."""
    info_ = data.info
    prim = desc[desc["is_primary"]]
    # Every task and config of the spec, even before any run of it completed.
    tasks = list(info_.tasks) + sorted(set(prim["task"]) - set(info_.tasks))
    configs = list(info_.configs) + sorted(set(prim["config"]) - set(info_.configs))
    return render_leaderboard(
        prim,
        tasks,
        configs,
        info_.targets,
        info_.goal.get(info_.primary, "max"),
        info_.primary,
        info_.name,
        seeds=primary_counts(data.accounting, info_.primary),
        failed_as=data.failed_as,
        settings=task_settings(info_.spec),
        run_links=run_links(data, out_dir) if out_dir is not None else None,
    )


def run_links(data: ReportData, out_dir: Path | None) -> dict[tuple[str, str], list[tuple[int, str]]]:
    """Each (task, config)'s seeds with a link to its run folder, relative to ``out_dir``."""
    import os

    if data.results is None:
        return {}
    where = os.path.relpath(runs_dir(data.results), out_dir or data.results)
    return {k: [(seed, f"{Path(where, rid).as_posix()}/") for seed, rid in v] for k, v in data.run_ids.items()}


def write_report(
    results: Path | str | None = None,
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
        results: the results folder (default: found from the working directory).
        out: where to write; ``plots/`` is created under it.
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

    folder = find_results(results)
    out_dir = Path(out) if out is not None else folder
    out_dir.mkdir(parents=True, exist_ok=True)
    data = gather(folder)
    info_ = data.info
    csv_path = out_dir / "results.csv"
    write_text_atomic(csv_path, data.finals.to_csv(index=False))
    desc = account_seeds(data, failed_as)
    used = data.used
    pending = None
    if plots:
        from benchlab.report.plots import draw

        # Drawn aside and moved in whole: the previous report keeps its figures until then.
        staging = staging_dir(out_dir)
        pending = draw(
            folder, staging, info_, used, desc, seeds=seeds, seed=seed, workers=workers,
            ranges=data.ranges,
        )
    # The figures draw in worker processes meanwhile.
    analyze(data, reps=reps, seed=seed)
    if data.registered_plan is not None and used is not None:
        judged = preregistration.judge(used, data.registered_plan["plan"], info_.goal, list(info_.configs),
                                       reps=reps, seed=seed)
        data.analysis_plan = preregistration.statement(data.registered_plan, info_.spec, judged)
    extra: list[Path] = []
    if pending is not None:
        data.plots = [p.as_dict() for p in pending()]
        drawn = publish_plots(staging, out_dir / "plots")
        extra += [out_dir / p["path"] for p in data.plots]
    bench_md = out_dir / "BENCHMARKS.md"
    write_text_atomic(bench_md, leaderboard(data, desc, out_dir))
    extra.insert(0, bench_md)
    text = render_markdown(data)
    md = out_dir / "BENCHMARK_REPORT.md"
    write_text_atomic(md, text)
    if html:
        from benchlab.report.html import write_html

        extra.append(write_html(text, out_dir, f"Benchmark report: {info_.name}"))
    if pending is not None:
        # Only now that no new file points at them (a stale figure would be embedded otherwise).
        remove_stale_plots(out_dir / "plots", drawn)
    return ReportFiles(folder=out_dir, markdown=md, csv=csv_path, extra=extra)
