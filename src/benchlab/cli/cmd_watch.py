"""`benchlab watch`: evaluate each new checkpoint folder as it appears."""

from __future__ import annotations

import signal
import time
from pathlib import Path
from typing import Any

import typer

from benchlab.cli.app import app, console


@app.command()
def watch(
    directory: Path = typer.Argument(..., help="The folder the trainer writes checkpoint folders into."),
    spec_path: Path = typer.Option(..., "--spec", help="The spec; its first config is the template "
                                   "(it must have a 'checkpoint' param)."),
    sets: list[str] = typer.Option(None, "--set", "-s", help="Override a spec variable (repeatable)."),
    results: Path = typer.Option(None, "--results", "-r", help="Results folder [default: results/<name>]."),
    marker: str = typer.Option(None, "--marker", help="A checkpoint is complete once this file exists in it."),
    settle: float = typer.Option(30.0, "--settle", help="Without --marker: seconds a checkpoint's "
                                 "whole weights must stay unchanged before it counts as complete."),
    interval: float = typer.Option(10.0, "--interval", help="Seconds between looks at the folder."),
    jobs: int = typer.Option(None, "--jobs", "-j", min=1, help="Runs at once."),
    once: bool = typer.Option(False, "--once", help="Evaluate what is complete now, then exit."),
    max_checkpoints: int = typer.Option(None, "--max-checkpoints", min=1,
                                        help="Exit after this many checkpoints were evaluated."),
) -> None:
    """Watch a folder; every complete new checkpoint becomes a config and is evaluated on the spec's tasks."""
    from benchlab.cli.progress import SweepDisplay
    from benchlab.execute.sweep import Sweep
    from benchlab.report import write_report
    from benchlab.spec import load_spec
    from benchlab.watch import CheckpointWatcher, failed_checkpoints, spec_for_checkpoints

    spec = load_spec(spec_path, sets)
    spec_for_checkpoints(spec, [])  # checks the template before waiting for anything
    folder = results or Path("results") / spec.name
    watcher = CheckpointWatcher(directory, marker=marker, settle=settle)
    stopping = False
    current: list[Any] = []

    def stop(signum: int, frame: Any) -> None:
        nonlocal stopping
        stopping = True
        for sweep in current:
            sweep.request_stop()

    previous = {sig: signal.signal(sig, stop) for sig in (signal.SIGINT, signal.SIGTERM)}
    evaluated: set[Path] = set()
    waiting: dict[Path, str] = {}
    code = 0
    rule = (f"complete when {marker} appears" if marker
            else f"complete when its weights are whole and unchanged for {settle:g}s")
    console.print(f"watching {directory} for checkpoints ({rule})")
    try:
        while not stopping:
            ready = watcher.complete()
            new = watcher.due(ready)
            for ckpt, why in watcher.waiting.items():
                if waiting.get(ckpt) != why:
                    console.print(f"waiting for {ckpt.name}: {why}")
            waiting = dict(watcher.waiting)
            if new:
                again = [p for p in new if p in evaluated]
                fresh = [p for p in new if p not in evaluated]
                if fresh:
                    console.print(f"new checkpoint{'s' if len(fresh) > 1 else ''}: "
                                  + ", ".join(p.name for p in fresh))
                if again:
                    console.print("changed since its evaluation failed, evaluating again: "
                                  + ", ".join(p.name for p in again))
                # A rewritten checkpoint's failed runs first, on a spec of those alone; then the whole
                # spec (recorded last, so that the report covers every checkpoint).
                sweeps = [(spec_for_checkpoints(spec, ready, only=set(again)), True)] if again else []
                sweeps.append((spec_for_checkpoints(spec, ready), False))
                failed_runs: list[str] = []
                for run_spec, rerun_failed in sweeps:
                    display = SweepDisplay(console, primary=spec.metrics.primary.name)
                    # The watcher has judged these checkpoints whole by its own rule (--marker).
                    sweep = Sweep(run_spec, folder, jobs=jobs, on_event=display.on_event,
                                  rerun_failed=rerun_failed, check_checkpoints=False)
                    current[:] = [sweep]
                    with display:
                        result = sweep.run()
                    current.clear()
                    display.summary(result)
                    if result.stopped:
                        break
                    failed_runs += result.failed_runs
                if result.stopped:
                    code = 130
                    break
                code = max(code, result.exit_code, 1 if failed_runs else 0)
                failed = failed_checkpoints(ready, failed_runs)
                for ckpt in new:
                    watcher.record(ckpt, ckpt in failed)
                evaluated.update(new)
                if result.completed + result.skipped:
                    console.print(f"report: {write_report(folder).markdown}")
            if once or (max_checkpoints is not None and len(evaluated) >= max_checkpoints):
                break
            deadline = time.monotonic() + interval
            while not stopping and time.monotonic() < deadline:
                time.sleep(min(0.2, interval))
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    if stopping and code == 0:
        code = 130
    raise typer.Exit(code)
