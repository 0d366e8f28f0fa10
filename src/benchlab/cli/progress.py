"""The live view of a sweep: a progress bar with counts and ETA, one line per finished run."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

from benchlab.execute.events import EventKind
from benchlab.execute.events import Progress as SweepProgress
from benchlab.execute.sweep import SweepEvent, SweepResult

if TYPE_CHECKING:
    from benchlab.ledger import FlaggedPair


def _fmt_duration(seconds: float | None) -> str:
    if seconds is None:
        return "?"
    seconds = max(0.0, seconds)
    if seconds < 60:
        return f"{seconds:.0f}s"
    if seconds < 3600:
        return f"{seconds // 60:.0f}m{seconds % 60:02.0f}s"
    return f"{seconds // 3600:.0f}h{(seconds % 3600) // 60:02.0f}m"


def _fmt_value(value: float | None) -> str:
    if value is None:
        return "?"
    return f"{value:.4g}" if abs(value) < 1e5 else f"{value:.3e}"


class SweepDisplay:
    """Renders ``SweepEvent``s on a rich console (live bar on a terminal, plain lines elsewhere)."""

    def __init__(self, console: Console, primary: str, clock: Any = time.monotonic, counter: bool = True):
        """``counter``: begin each finished run's line with ``[n/total]``; off where the plan
        grows as the sweep goes (a search's trials), whose total would read 1/2, 2/4, 4/6."""
        self.console = console
        self.primary = primary
        self.clock = clock
        self.counter = counter
        self.progress = Progress(
            TextColumn("[bold]{task.description}"), BarColumn(),
            TextColumn("{task.completed}/{task.total}"),
            TextColumn("[green]{task.fields[ok]} done[/] [red]{task.fields[failed]} failed[/] "
                       "[cyan]{task.fields[running]} running[/]"),
            TimeElapsedColumn(), TextColumn("ETA {task.fields[eta]}"),
            console=console, transient=True,
        )
        self._task: Any = None
        # A live bar only on a terminal; elsewhere, plain lines.
        self.live = console.is_terminal
        self._started = False

    def __enter__(self) -> SweepDisplay:
        self.progress.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self.progress.__exit__(None, None, None)

    def on_event(self, event: SweepEvent) -> None:
        p = event.progress
        if self._task is None and p.total:
            self._task = self.progress.add_task("sweep", total=p.total, ok=0, failed=0, running=0,
                                                eta="?")
            if p.skipped or p.failed:
                self.console.print(_resume_line(p))
        if event.kind is EventKind.WARNING:
            self.console.print(f"[yellow]warning[/]: {escape(event.error or '')}", highlight=False)
        elif event.run is None:
            pass
        elif event.kind is EventKind.FINISH and not self.live:
            self._plain_line(event)
        elif event.kind is EventKind.FINISH:
            n = p.finished
            width = len(str(p.total))
            if event.completed:
                detail = f"{event.metric}={_fmt_value(event.value)}"
                style = "green"
            else:
                detail = f"[red]{event.status}[/]: {escape(event.error or '')}"
                style = "red"
            took = f" ({event.duration:.1f}s)" if event.duration is not None else ""
            head = f"[{n:>{width}}/{p.total}] " if self.counter else ""
            self.console.print(f"{escape(head)}[{style}]{escape(event.run.name)}[/] — {detail}{took}",
                               highlight=False)
        elif event.kind is EventKind.RETRY:
            self.console.print(f"[yellow]retrying[/] {escape(event.run.name)} (attempt {event.attempt} "
                               f"failed: {escape(event.error or '')})", highlight=False)
        if self._task is not None and p.total and self.live:
            self.progress.update(self._task, completed=p.finished, ok=p.completed + p.skipped,
                                 failed=p.failed, running=p.running, eta=_fmt_duration(p.eta_s))

    def _plain_line(self, event: SweepEvent) -> None:
        """The finished-run line written straight to the file: output to a log or a pipe has no
        live bar to draw around, and rich's rendering would cost more than dispatching the run."""
        p = event.progress
        assert event.run is not None
        if event.completed:
            detail = f"{event.metric}={_fmt_value(event.value)}"
        else:
            detail = f"{event.status}: {event.error or ''}"
        took = f" ({event.duration:.1f}s)" if event.duration is not None else ""
        head = f"[{p.finished:>{len(str(p.total))}}/{p.total}] " if self.counter else ""
        self.console.file.write(f"{head}{event.run.name} — {detail}{took}\n")

    def summary(self, result: SweepResult) -> None:
        parts = [f"{result.completed} completed"]
        if result.skipped:
            parts.append(f"{result.skipped} already done")
        if result.failed:
            parts.append(f"[red]{result.failed} failed[/]")
        if result.interrupted:
            parts.append(f"[yellow]{result.interrupted} interrupted[/]")
        if result.pending:
            parts.append(f"{result.pending} not started")
        self.console.print(f"{result.total} runs: " + ", ".join(parts)
                           + f" in {_fmt_duration(result.wall_s)} — results in {result.results_dir}")
        if result.gpu_busy_share is not None:
            util = ("" if result.gpu_util_mean is None
                    else f", mean utilisation {result.gpu_util_mean:.0f}% while runs held them")
            self.console.print(f"GPUs {','.join(map(str, result.gpus))}: busy "
                               f"{result.gpu_busy_share:.0%} of the time they were available{util}")
        for w in result.warnings:
            self.console.print(f"[yellow]warning[/]: {escape(w)}", highlight=False)
        # Configs that failed on every seed the same way are one problem: one line names them all.
        alike: dict[tuple[str, ...], list[FlaggedPair]] = {}
        for f in result.flagged:
            alike.setdefault(tuple(sorted(f.classes)), []).append(f)
        for flags in alike.values():
            totals: dict[str, int] = {}
            for f in flags:
                for c, n in f.classes.items():
                    totals[c] = totals.get(c, 0) + n
            names = ", ".join(f.name for f in flags)
            classes = ", ".join(f"{n} {c}" for c, n in sorted(totals.items()))
            runs = sum(f.failures for f in flags)
            self.console.print(f"[red]flagged[/]: {escape(names)} failed on every seed ({runs} runs: "
                               f"{escape(classes)})", highlight=False)
        if result.stopped:
            self.console.print("[yellow]stopped[/]: run the same command again to finish the rest")
        elif result.failed and any("missing-metric" in f.classes for f in result.flagged):
            # Every seed missed the metric: the spec names it wrong, and training again would not help.
            self.console.print("see the failures with [bold]benchlab status "
                               f"{result.results_dir}[/]; once the spec names the metric right, [bold]benchlab "
                               f"collect {result.results_dir} --failed[/] completes the runs without training again")
        elif result.failed and result.flagged and all(
                set(f.classes) == {"non-finite-metric"} for f in result.flagged):
            # The name is right; the runs diverged: collecting again would read the same NaN.
            self.console.print("see the failures with [bold]benchlab status "
                               f"{result.results_dir}[/]; the metric came out NaN or inf on every seed (the "
                               "training diverged?): fix it, then re-run them with --rerun-failed")
        elif result.failed and result.flagged and all(
                set(f.classes) <= {"launch-error", "usage-error"} for f in result.flagged):
            # Retrying as it is would fail the same way: say what to fix first.
            self.console.print("see the failures with [bold]benchlab status "
                               f"{result.results_dir}[/]; the command cannot run as written: fix it, then "
                               "re-run them with --rerun-failed")
        elif result.failed:
            self.console.print("see the failures with [bold]benchlab status "
                               f"{result.results_dir}[/]; re-run them with --rerun-failed")


def _resume_line(p: SweepProgress) -> str:
    """What a sweep over a folder with earlier results will do, in one line."""
    parts = [f"{p.skipped} of {p.total} runs already done"]
    if p.failed:
        parts.append(f"{p.failed} failed before (--rerun-failed runs them again)")
    left = p.total - p.skipped - p.failed
    return ", ".join(parts) + (f"; running the other {left}" if left else "; nothing to run")
