"""`benchlab watch`: evaluate each new checkpoint folder as it appears."""

from __future__ import annotations

import signal
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
    from benchlab.execute.watch import CheckpointWatch, WatchEvent, WatchEventKind
    from benchlab.spec import load_spec

    spec = load_spec(spec_path, sets)

    def show(event: WatchEvent) -> None:
        names = ", ".join(p.name for p in event.checkpoints)
        if event.kind == WatchEventKind.WAITING:
            console.print(f"waiting for {names}: {event.why}")
        elif event.kind == WatchEventKind.NEW:
            console.print(f"new checkpoint{'s' if len(event.checkpoints) > 1 else ''}: {names}")
        elif event.kind == WatchEventKind.AGAIN:
            console.print(f"changed since its evaluation failed, evaluating again: {names}")
        elif event.kind == WatchEventKind.REPORT:
            console.print(f"report: {event.report}")

    def run_sweep(sweep: Any) -> Any:
        display = SweepDisplay(console, primary=spec.metrics.primary.name)
        sweep.on_event = display.on_event
        with display:
            result = sweep.run()
        display.summary(result)
        return result

    watch = CheckpointWatch(spec, directory, results or Path("results") / spec.name, marker=marker,
                            settle=settle, interval=interval, jobs=jobs, once=once,
                            max_checkpoints=max_checkpoints, on_event=show, run_sweep=run_sweep)

    def stop(signum: int, frame: Any) -> None:
        watch.request_stop()

    previous = {sig: signal.signal(sig, stop) for sig in (signal.SIGINT, signal.SIGTERM)}
    console.print(f"watching {directory} for checkpoints ({watch.watcher.rule})")
    try:
        outcome = watch.run()
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    raise typer.Exit(outcome.exit_code)
