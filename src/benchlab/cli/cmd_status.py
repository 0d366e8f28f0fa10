"""`benchlab status`, `benchlab logs`, `benchlab collect`: looking at a results folder."""

from __future__ import annotations

import time
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from benchlab.cli.app import app, console, fail, print_json

if TYPE_CHECKING:
    from benchlab.store import AttemptRecord, RunRecord, Store

ResultsArg = typer.Argument(None, help="Results folder [default: the one under ./results].",
                            show_default=False)


@app.command()
def status(
    results: Path = ResultsArg,
    as_json: bool = typer.Option(False, "--json", help="Print as JSON."),
    tail: int = typer.Option(5, "--tail", help="Log lines shown per failure."),
    show_all: bool = typer.Option(False, "--all", help="List the runs not in the spec too (kept in the "
                                  "ledger from earlier versions of it)."),
) -> None:
    """Runs by state, what is running, and failures grouped by class with their last log lines.

    The runs counted are those of the spec as `benchlab run` last ran it; runs it no longer
    names are counted apart as "not in the spec" (--all lists them).
    """
    from benchlab.results import find_results
    from benchlab.store import Store

    folder = find_results(results)
    with Store.open(folder) as store:
        meta = store.meta()
        every = store.runs(current_only=False)
        runs = {r.run_id: r for r in every if r.in_spec}
        counts = store.counts()
        attempts = store.attempts()
    outside = [r for r in every if not r.in_spec]
    outside_counts: dict[str, int] = {}
    for r in outside:
        outside_counts[r.status] = outside_counts.get(r.status, 0) + 1
    last: dict[str, AttemptRecord] = {}
    for a in attempts:
        last[a.run_id] = a
    running = [a for a in attempts if a.status == "running" and a.run_id in runs]
    from benchlab.execute.triage import flag_configs

    flagged = flag_configs(runs.values(), attempts)
    failures = [last[rid] for rid, r in runs.items() if r.status == "failed" and rid in last]
    by_class: dict[str, list[AttemptRecord]] = {}
    for a in failures:
        by_class.setdefault(a.failure_class or "unknown", []).append(a)
    if as_json:
        print_json({
            "benchmark": meta.get("name"), "results": str(folder), "total": len(runs),
            "counts": counts,
            "running": [{"run": runs[a.run_id].name, "run_id": a.run_id, "attempt": a.number,
                         "since": a.started, "host": a.host, "pid": a.pid} for a in running],
            "failures": {cls: [{"run": runs[a.run_id].name, "run_id": a.run_id,
                                "attempt": a.number, "exit_code": a.exit_code,
                                "signal": a.signal, "error": a.error,
                                "log_tail": a.log_tail} for a in items]
                         for cls, items in by_class.items()},
            "flagged": flagged,
            "not_in_spec": {"total": len(outside), "counts": outside_counts, **(
                {"runs": [{"run": r.name, "run_id": r.run_id, "status": r.status,
                           "reason": reason} for r, reason in _why_not_in_spec(outside, runs.values())]}
                if show_all else {})},
        })
        return
    from rich.markup import escape

    total = len(runs)
    order = ["completed", "running", "pending", "failed", "interrupted"]
    parts = [f"{counts.get(s, 0)} {s}" for s in order if counts.get(s)]
    shown = folder.relative_to(Path.cwd()) if folder.is_absolute() and folder.is_relative_to(Path.cwd()) else folder
    console.print(f"[bold]{escape(str(meta.get('name')))}[/] ({escape(str(shown))}): {total} runs — "
                  + ", ".join(parts))
    if outside:
        kinds = ", ".join(f"{n} {s}" for s, n in sorted(outside_counts.items()))
        console.print(f"{len(outside)} runs not in the spec ({kinds}): kept in the ledger, left out of "
                      "the counts, the results table and the report"
                      + ("" if show_all else " (--all lists them)"))
        if show_all:
            _print_not_in_spec(outside, runs.values())
    now = time.time()
    for a in running:
        console.print(f"  [cyan]running[/] {escape(runs[a.run_id].name)} (attempt {a.number}, "
                      f"{now - a.started:.0f}s, pid {a.pid})")
    for f in flagged:
        classes = ", ".join(f"{n} {c}" for c, n in sorted(f["classes"].items()))
        console.print(f"[red]flagged[/]: {escape(f['task'])}/{escape(f['config'])} failed on every "
                      f"seed ({f['failures']} runs: {escape(classes)})")
    for cls, items in sorted(by_class.items()):
        console.print(f"[red]{len(items)} failed: {cls}[/]")
        for a in items:
            console.print(f"  {escape(runs[a.run_id].name)} [dim]{a.run_id}[/] — "
                          f"{escape(a.error or '')}")
            for line in (a.log_tail or "").splitlines()[-tail:]:
                console.print(f"      [dim]{escape(line)}[/]")


def _why_not_in_spec(outside: list[RunRecord], in_spec: Iterable[RunRecord]) -> list[tuple[RunRecord, str]]:
    """Each run not in the spec with why: its definition changed (the spec still names its task,
    config and seed), or the spec no longer names it (a config, task or seed was removed)."""
    coords = {(r.task, r.config, r.seed) for r in in_spec}
    return [(r, "superseded" if (r.task, r.config, r.seed) in coords else "removed") for r in outside]


def _print_not_in_spec(outside: list[RunRecord], in_spec: Iterable[RunRecord]) -> None:
    from rich.markup import escape

    groups: dict[tuple[str, str, str], list[RunRecord]] = {}
    for r, reason in _why_not_in_spec(outside, in_spec):
        groups.setdefault((reason, r.task, r.config), []).append(r)
    words = {"removed": "no longer in the spec", "superseded": "superseded by a changed definition"}
    for (reason, task, config), items in sorted(groups.items()):
        seeds = ", ".join(str(r.seed) for r in sorted(items, key=lambda r: r.seed))
        states = ", ".join(f"{n} {s}" for s, n in sorted(
            {s: sum(r.status == s for r in items) for s in {r.status for r in items}}.items()))
        console.print(f"  {escape(task)}/{escape(config)} seeds {seeds} ({states}): {words[reason]}",
                      highlight=False)


def _find_run(store: Store, key: str) -> RunRecord:
    runs = store.runs(current_only=False)
    exact = [r for r in runs if key in (r.run_id, r.name)]
    if exact:
        current = [r for r in exact if r.current]
        return (current or exact)[0]
    prefix = [r for r in runs if r.run_id.startswith(key)]
    if len(prefix) == 1:
        return prefix[0]
    if len(prefix) > 1:
        raise fail(f"run {key!r} is ambiguous: " + ", ".join(r.run_id for r in prefix[:8]))
    names = ", ".join(r.name for r in runs[:6])
    raise fail(f"no run {key!r} in this results folder (runs are named like: {names}, or by id)")


@app.command()
def logs(
    run_key: str = typer.Argument(..., metavar="RUN", help="A run's name (digits/mlp/s3) or id (or id prefix)."),
    results: Path = typer.Option(None, "--results", "-r", help="Results folder."),
    follow: bool = typer.Option(False, "--follow", "-f", help="Keep printing as the log grows."),
) -> None:
    """Print a run's log (train.log)."""
    import sys

    from benchlab.results import find_results
    from benchlab.store import Store

    folder = find_results(results)
    with Store.open(folder) as store:
        run = _find_run(store, run_key)
        run_id = run.run_id
        log = folder / "runs" / run_id / "train.log"
        if not log.exists():
            raise fail(f"{log}: no log yet (run status: {run.status})")
        with open(log, "rb") as fh:
            while True:
                chunk = fh.read(65536)
                if chunk:
                    sys.stdout.buffer.write(chunk)
                    sys.stdout.flush()
                    continue
                if not follow:
                    break
                if store.statuses().get(run_id) != "running":
                    rest = fh.read()
                    sys.stdout.buffer.write(rest)
                    break
                time.sleep(0.2)


@app.command()
def collect(
    results: Path = ResultsArg,
    rebuild: bool = typer.Option(False, "--rebuild",
                                 help="Recreate the ledger from runs/ (the old one is kept as a backup)."),
) -> None:
    """Read metrics again from the run directories into the ledger (or rebuild the ledger)."""
    from benchlab.collect.rebuild import rebuild_store, recollect

    if rebuild:
        folder = results or Path(".")
        counts = rebuild_store(folder)
        console.print(f"rebuilt {folder}/benchlab.db from {counts['runs']} run directories: "
                      f"{counts['completed']} completed, {counts['failed']} failed, "
                      f"{counts['pending']} still to run")
        return
    from benchlab.results import find_results

    folder = find_results(results)
    counts = recollect(folder)
    console.print(f"collected {counts['completed']} completed runs ({counts['failed']} now failing "
                  "their metrics)")
