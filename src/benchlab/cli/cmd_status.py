"""`benchlab status`, `benchlab logs`, `benchlab collect`: looking at a results folder."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from benchlab.cli.app import app, console, err_console, print_json
from benchlab.errors import UsageError
from benchlab.names.run_files import LOG_FILE, run_dir_of

if TYPE_CHECKING:
    from benchlab.execute.status import FolderStatus, StatusDetail
    from benchlab.ledger import AttemptRecord, Placement, RunRecord, SequentialRecord
    from benchlab.spec import Spec

RUNS_SHOWN = 6  # run names listed per failure group; `--json` lists them all
GPU_RUNS_SHOWN = 20  # runs listed with their GPU use; past that only the likely CPU-bound ones

ResultsArg = typer.Argument(None, help="Results folder [default: the one under ./results].",
                            show_default=False)


@app.command()
def status(
    results: Path = ResultsArg,
    as_json: bool = typer.Option(False, "--json", help="Print as JSON."),
    tail: int = typer.Option(5, "--tail", help="Log lines shown per group of failures."),
    show_all: bool = typer.Option(False, "--all", help="List the runs not in the spec too (kept in the "
                                  "ledger from earlier versions of it)."),
) -> None:
    """Runs by state, what is running, and failures grouped by what went wrong, with their last log lines.

    The runs counted are those of the spec as `benchlab run` last ran it; runs it no longer
    names are counted apart as "not in the spec" (--all lists them).
    """
    from benchlab.execute.status import status as folder_status
    from benchlab.results import find_results

    st = folder_status(find_results(results))
    if as_json:
        print_json(_status_json(st, show_all))
    else:
        _print_status(st, tail, show_all)


def _status_json(st: FolderStatus, show_all: bool) -> dict[str, Any]:
    """``status --json``: the status model, every run listed."""
    d = st.detail
    assert d is not None
    runs = d.runs
    return {
        "benchmark": st.benchmark.name if st.benchmark else None, "results": str(st.folder), "total": len(runs),
        "counts": st.counts, "state": st.state, "eta_s": st.eta_s,
        "running": [{"run": runs[a.run_id].name, "run_id": a.run_id, "attempt": a.number,
                     "since": a.started, "host": a.host, "pid": a.pid,
                     **_placement_json(d.placed.get(a.attempt_id))} for a in d.running],
        "failures": {cls: [{"run": runs[a.run_id].name, "run_id": a.run_id,
                            "attempt": a.number, "exit_code": a.exit_code,
                            "signal": a.signal, "error": a.error,
                            "log_tail": a.log_tail} for a in items]
                     for cls, items in d.failures_by_class.items()},
        "failure_groups": [{"failure_class": gv.group.failure_class, "error": gv.group.error,
                            "count": gv.group.count,
                            "runs": [runs[a.run_id].name for a in gv.group.attempts],
                            "run_ids": [a.run_id for a in gv.group.attempts],
                            "flagged": [f.name for f in gv.flagged],
                            "log_tail": gv.group.attempts[0].log_tail}
                           for gv in d.groups],
        "flagged": [f.to_json() for f in d.flagged],
        "gpu_use": [{"run": name, "run_id": a.run_id, "attempt": a.number, "gpus": a.gpus,
                     **(a.gpu_use.to_json() if a.gpu_use else {"util_mean": None, "util_max": None,
                                                               "mem_peak_mib": None,
                                                               "likely_cpu_bound": None})}
                    for name, a in d.gpu_attempts],
        "not_in_spec": {"total": len(d.outside), "counts": d.outside_counts, **(
            {"runs": [{"run": r.name, "run_id": r.run_id, "status": r.status,
                       "reason": reason} for r, reason in d.not_in_spec()]}
            if show_all else {})},
        "backups": [{"path": str(b), "bytes": b.stat().st_size, "modified": b.stat().st_mtime}
                    for b in d.backups],
        "partial": [{"run": runs[a.run_id].name, "run_id": a.run_id, "note": a.error} for a in d.partial],
        **({"sequential": d.sequential.to_json()} if d.sequential else {}),
        "plan_recording": d.recording.to_json() if d.recording else None,
        "sweep": None if st.liveness is None else {"state": st.liveness.state, "holder": st.liveness.holder},
        "rebuild": {"running": d.rebuilding, "files": [str(p) for p in d.leftovers]} if d.leftovers else None,
    }


def _print_status(st: FolderStatus, tail: int, show_all: bool) -> None:
    """``status``'s text: the counts (with the ETA while a sweep runs), then whatever needs a look."""
    from rich.markup import escape

    from benchlab.execute.status import COUNTS_ORDER, duration_text
    from benchlab.triage import MISSING_METRIC, NON_FINITE_METRIC

    d = st.detail
    assert d is not None
    runs, folder, counts = d.runs, st.folder, st.counts
    parts = [f"{counts.get(s, 0)} {s}" for s in COUNTS_ORDER if counts.get(s)]
    shown = folder.relative_to(Path.cwd()) if folder.is_absolute() and folder.is_relative_to(Path.cwd()) else folder
    eta = f" — ETA {duration_text(st.eta_s)}" if st.eta_s is not None else ""
    name = st.benchmark.name if st.benchmark else None
    console.print(f"[bold]{escape(str(name))}[/] ({escape(str(shown))}): {len(runs)} runs — "
                  + ", ".join(parts) + eta)
    if st.sweep_gone:
        console.print(f"[yellow]no sweep is running[/]: the process of the last `benchlab run` is gone (killed, "
                      f"or stopped by the machine), so the {st.left_running} runs it left running count as "
                      f"interrupted; `benchlab run` again resumes them", highlight=False)
    recording = d.recording
    if recording is not None:
        so_far = "" if recording.recorded is None else f"{recording.recorded:,} of "
        console.print(f"[yellow]plan partly recorded[/]: {so_far}{recording.runs:,} runs. A sweep records "
                      "its plan while its first runs go; one stopped part-way leaves it so, and `benchlab run` "
                      "again completes it. Until it is whole, the counts above are of the plan before.")
    if d.outside:
        kinds = ", ".join(f"{n} {s}" for s, n in sorted(d.outside_counts.items()))
        console.print(f"{len(d.outside)} runs not in the spec ({kinds}): kept in the ledger, left out of "
                      "the counts, the results table and the report"
                      + ("" if show_all else " (--all lists them)"))
        if show_all:
            _print_not_in_spec(d)
    now = time.time()
    for a in d.running:
        p = d.placed.get(a.attempt_id)
        if p is None:
            console.print(f"  [cyan]running[/] {escape(runs[a.run_id].name)} (attempt {a.number}, "
                          f"{now - a.started:.0f}s, pid {a.pid})")
        elif p.state == "PENDING":
            console.print(f"  [yellow]queued[/] {escape(runs[a.run_id].name)} (attempt {a.number}, job "
                          f"{p.job_id}, {now - a.started:.0f}s, reason: {escape(p.reason or 'none given')})")
        else:
            where = f" on {p.node}" if p.node else ""
            gpus = f", GPUs {','.join(map(str, p.gpus))}" if p.gpus else ""
            console.print(f"  [cyan]running[/] {escape(runs[a.run_id].name)} (attempt {a.number}, job "
                          f"{p.job_id}{where}{gpus}, {now - a.started:.0f}s)")
    _print_gpu_use(d.gpu_attempts)
    said = {(f.task, f.config) for gv in d.groups for f in gv.flagged}
    for f in d.flagged:
        if (f.task, f.config) in said:
            continue
        classes = ", ".join(f"{n} {c}" for c, n in sorted(f.classes.items()))
        console.print(f"[red]flagged[/]: {escape(f.task)}/{escape(f.config)} failed on every "
                      f"seed ({f.failures} runs: {escape(classes)})")
    for a in d.partial:
        console.print(f"[yellow]partial[/]: {escape(runs[a.run_id].name)} — {escape(a.error or '')}")
    for gv in d.groups:
        g, fl = gv.group, gv.flagged
        console.print(f"[red]{g.count} failed: {g.failure_class}[/] — {escape(g.error)}")
        if fl:
            names = ", ".join(f.name for f in fl)
            console.print(f"  [red]flagged[/]: every seed of {escape(names)} failed this way")
        covered = {rid for f in fl for rid in d.members[(f.task, f.config)]}
        rest = [a for a in g.attempts if a.run_id not in covered]
        if rest:
            listed = ", ".join(f"{runs[a.run_id].name} [dim]{a.run_id}[/]" for a in rest[:RUNS_SHOWN])
            more = f" and {len(rest) - RUNS_SHOWN} more" if len(rest) > RUNS_SHOWN else ""
            console.print(f"  {'run' if len(rest) == 1 else 'runs'}: {listed}{more}")
        first = g.attempts[0]
        lines = (first.log_tail or "").splitlines()[-tail:]
        if lines and g.count > 1:
            console.print(f"  [dim]log of {escape(runs[first.run_id].name)} ({first.run_id}):[/]")
        for line in lines:
            console.print(f"      [dim]{escape(line)}[/]")
        if g.failure_class == MISSING_METRIC:
            console.print(f"  the runs finished: once the spec names the metric right, [bold]benchlab collect "
                          f"{escape(str(folder))} --failed[/] completes them without training again")
        elif g.failure_class == NON_FINITE_METRIC:
            console.print("  the runs reported the metric as NaN or inf (the name is right): the training "
                          "diverged or logged a non-finite value; fix it (learning rate, gradient clipping, "
                          "loss scale), then re-run them with [bold]--rerun-failed[/]")
    _print_sequential(d.sequential)
    if d.leftovers:
        names = ", ".join(f"{p.name} ({p.stat().st_size / 1e6:.1f} MB)" for p in d.leftovers if p.exists())
        if d.rebuilding is not None:
            console.print(f"a rebuild of the ledger is running ({escape(d.rebuilding)}): {escape(names)}")
        else:
            console.print(f"[yellow]left by a killed `benchlab collect --rebuild`[/]: {escape(names)}; the "
                          "ledger above is the one from before it. The next `benchlab run` or rebuild "
                          "removes them.")
    if d.backups:
        console.print(f"ledger backups ({len(d.backups)}, kept by `benchlab collect --rebuild`):")
        for b in d.backups:
            console.print(f"  {escape(b.name)}  {b.stat().st_size / 1e6:.1f} MB  "
                          f"{time.strftime('%Y-%m-%d %H:%M:%S', time.localtime(b.stat().st_mtime))}")


def _placement_json(p: Placement | None) -> dict[str, Any]:
    """A cluster scheduler's view of a running attempt, for ``status --json`` (empty without one)."""
    if p is None:
        return {}
    return {"job_id": p.job_id, "queued": p.state == "PENDING", "state": p.state, "reason": p.reason,
            "node": p.node, "gpus": p.gpus}


def _print_sequential(sequential: SequentialRecord | None) -> None:
    """Each comparison of the last `run --until-decided`: its seeds and why it stopped."""
    if not sequential:
        return
    from rich.markup import escape

    console.print(f"until decided (vs {escape(str(sequential.baseline))}, looks at "
                  f"{', '.join(map(str, sequential.design.looks))} seeds), as of the last look:")
    for p in sequential.pairs:
        failed = f", {p.failed} without a value" if p.failed else ""
        console.print(f"  {escape(p.task)}/{escape(p.config)}: {p.seeds} seeds{failed} — "
                      f"{escape(p.reason)}")


def _print_not_in_spec(d: StatusDetail) -> None:
    from rich.markup import escape

    groups: dict[tuple[str, str, str], list[RunRecord]] = {}
    for r, reason in d.not_in_spec():
        groups.setdefault((reason, r.task, r.config), []).append(r)
    words = {"removed": "no longer in the spec", "superseded": "superseded by a changed definition"}
    for (reason, task, config), items in sorted(groups.items()):
        seeds = ", ".join(str(r.seed) for r in sorted(items, key=lambda r: r.seed))
        states = ", ".join(f"{n} {s}" for s, n in sorted(
            {s: sum(r.status == s for r in items) for s in {r.status for r in items}}.items()))
        console.print(f"  {escape(task)}/{escape(config)} seeds {seeds} ({states}): {words[reason]}",
                      highlight=False)


def _print_gpu_use(gpu_attempts: list[tuple[str, AttemptRecord]]) -> None:
    """Each GPU run's utilisation and peak memory; runs under 50% mean utilisation are flagged."""
    from rich.markup import escape

    sampled = [(n, a) for n, a in gpu_attempts if a.gpu_use is not None]
    if not sampled:
        return
    bound = [(n, a) for n, a in sampled if a.gpu_use and a.gpu_use.likely_cpu_bound]
    shown = sampled if len(sampled) <= GPU_RUNS_SHOWN else bound[:GPU_RUNS_SHOWN]
    console.print(f"GPU use of {len(sampled)} run(s) (mean / max utilisation, peak memory of its own processes)"
                  + (f", {len(bound)} likely CPU-bound:" if len(shown) < len(sampled) else ":"))
    for name, a in shown:
        use = a.gpu_use
        assert use is not None
        util = ("?" if use.util_mean is None else f"{use.util_mean:.0f}% / {use.util_max:.0f}%")
        mem = "?" if use.mem_peak_mib is None else f"{use.mem_peak_mib / 1024:.1f} GiB"
        note = " — [yellow]likely CPU-bound[/] (under 50% mean utilisation)" if use.likely_cpu_bound else ""
        console.print(f"  {escape(name)} on GPU {a.gpus}: {util}, {mem}{note}")
    if len(shown) < len(sampled):
        console.print(f"  ({len(sampled) - len(shown)} more: `benchlab status --json` lists every run)")


@app.command()
def logs(
    run_key: str = typer.Argument(..., metavar="RUN", help="A run's name (digits/mlp/s3) or id (or id prefix)."),
    results: Path = typer.Option(None, "--results", "-r", help="Results folder."),
    follow: bool = typer.Option(False, "--follow", "-f", help="Keep printing as the log grows."),
) -> None:
    """Print a run's log (train.log)."""
    import sys

    from benchlab.execute.status import find_run, is_running
    from benchlab.results import find_results

    folder = find_results(results)
    run = find_run(folder, run_key)
    run_id = run.run_id
    log = run_dir_of(folder, run_id) / LOG_FILE
    if not log.exists():
        raise UsageError(f"{log}: no log yet (run status: {run.status})")
    # A running log past its cap has its middle freed (execute/logcap.py): read around it.
    from benchlab.execute.logcap import data_at

    with open(log, "rb") as fh:
        pos, ended = 0, False
        while True:
            start, size = data_at(fh.fileno(), pos, 65536)
            chunk = os.pread(fh.fileno(), size, start) if size else b""
            if chunk:
                sys.stdout.buffer.write(chunk)
                sys.stdout.flush()
                pos = start + len(chunk)
                continue
            if not follow or ended:
                break
            # One more pass once the run is over: what it wrote last.
            ended = not is_running(folder, run_id)
            if not ended:
                time.sleep(0.2)


@app.command()
def collect(
    results: Path = ResultsArg,
    failed: bool = typer.Option(False, "--failed",
                                help="Read the runs that failed for a missing metric again; those that now "
                                     "have their metrics become completed, without training again."),
    spec_path: Path = typer.Option(None, "--spec", help="The spec whose metrics to read [default: the spec "
                                   "file the folder was run with, as it is now]."),
    sets: list[str] = typer.Option(None, "--set", "-s", metavar="KEY=VALUE",
                                   help="Override a spec variable [default: the overrides of the last run]."),
    rebuild: bool = typer.Option(False, "--rebuild",
                                 help="Recreate the ledger from runs/ (the old one is kept as a backup)."),
) -> None:
    """Read metrics again from the run directories into the ledger, with the spec as it is now."""
    if rebuild:
        from benchlab.collect.rebuild import rebuild_store

        folder = results or Path(".")
        done = rebuild_store(folder)
        console.print(f"rebuilt {folder}/benchlab.db from {done.runs} run directories: "
                      f"{done.completed} completed, {done.failed} failed, "
                      f"{done.pending + done.interrupted} still to run")
        if done.backup is not None:
            console.print(f"the previous ledger is kept as {done.backup}")
        if done.records_from is not None:
            console.print(f"the ledger's own records (attempts, versions, hosts, pre-registration, "
                          f"--until-decided) from {done.records_from}", markup=False, highlight=False)
        if done.unrecovered:
            err_console.print("warning: not recovered (neither a ledger nor its published records are here): "
                              + "; ".join(done.unrecovered), markup=False, highlight=False)
        return
    from rich.markup import escape

    from benchlab.collect.reread import reread_runs
    from benchlab.results import find_results

    folder = find_results(results)
    spec, note = _current_spec(folder, spec_path, sets)
    if note:
        err_console.print(f"[yellow]warning[/]: {escape(note)}")
    again = reread_runs(folder, spec, failed=failed)
    skipped = []
    if again.crashed:
        skipped.append(f"{again.crashed} that did not exit 0 (nothing to read; --rerun-failed runs them)")
    if again.not_in_spec:
        skipped.append(f"{again.not_in_spec} that the spec no longer names")
    if failed:
        console.print(f"read {len(again.completed) + len(again.still_failing)} failed runs again with "
                      f"{escape(str(spec.path or 'the spec'))}: {len(again.completed)} now completed, "
                      f"{len(again.still_failing)} still failing")
        problems = again.still_failing
    else:
        console.print(f"collected {again.refreshed} completed runs ({len(again.demoted)} now failing their "
                      "metrics)")
        problems = again.demoted
    if skipped:
        console.print("not read: " + "; ".join(skipped))
    if problems:
        # Usually one reason for all: say each reason once, with how many runs have it.
        reasons: dict[str, list[str]] = {}
        for name, why in problems.items():
            reasons.setdefault(why, []).append(name)
        for why, names in reasons.items():
            more = f" and {len(names) - 3} more" if len(names) > 3 else ""
            console.print(f"  [red]{len(names)} failing[/] ({escape(', '.join(names[:3]))}{more}): {escape(why)}")
        raise typer.Exit(1)


def _current_spec(folder: Path, spec_path: Path | None, sets: list[str] | None) -> tuple[Spec, str | None]:
    """The spec to read metrics with: ``--spec``, else the file the folder was run with, as it is now
    (with that run's overrides), else the copy kept in ``benchmark.json``. Also a warning, or None."""
    from benchlab.errors import ResultsNotFound
    from benchlab.names.results_files import SavedSpec, benchmark_file
    from benchlab.spec import Spec, load_spec

    path = benchmark_file(folder)
    saved = SavedSpec.read(path)
    overrides: list[str] | dict[str, Any] = sets if sets else dict(saved.overrides if saved else {})
    if spec_path is not None:
        return load_spec(spec_path, overrides), None
    recorded = saved.spec_path if saved else None
    if recorded and Path(recorded).is_file():
        return load_spec(recorded, overrides), None
    if saved is None:
        raise ResultsNotFound(folder, f"{path} is missing: name the spec with --spec")
    spec = Spec.model_validate(saved.spec)
    return spec, (f"{recorded or 'the spec file'} is not there any more: reading with the spec the runs "
                  "were made with (name another with --spec)")
