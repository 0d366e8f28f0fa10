"""`benchlab search`: tune a config with Optuna on a validation metric; report and promote the winner."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from benchlab.cli.app import app, backend_option, console, print_json
from benchlab.cli.cmd_run import ResultsOpt, SetOpt, SpecArg, default_results
from benchlab.errors import UsageError

if TYPE_CHECKING:
    from benchlab.search import SearchResult, TrialEvent


def _params_text(params: dict[str, Any]) -> str:
    return ", ".join(f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}" for k, v in params.items())


@app.command()
def search(
    spec_path: Path = SpecArg,
    sets: list[str] = SetOpt,
    budget: int = typer.Option(None, "--budget", min=1,
                               help="Completed and pruned trials to reach [default: the spec's search.budget, "
                                    "else 4 × the dimensions of the space]."),
    jobs: int = typer.Option(None, "--jobs", "-j", min=1, help="Runs at once [default: CPU cores / cpus per run]."),
    results: Path = ResultsOpt,
    backend: str = backend_option("Where the trials run: a backend of the registry [default: the spec's, or local]."),
    ray_address: str = typer.Option(None, "--ray-address", help="Ray cluster to run on (ray backend)."),
    shared_fs: bool = typer.Option(False, "--shared-fs", help="Ray nodes see the results folder at the same path "
                                   "(needed to prune from live curves on Ray)."),
    slurm: list[str] = typer.Option(None, "--slurm", metavar="KEY=VALUE",
                                    help="Slurm backend: any sbatch option (--slurm partition=gpu), over the "
                                         "spec's slurm: section, as for run."),
    gpus: str = typer.Option(None, "--gpus", metavar="auto|none|0,3,5", help="GPUs to pack runs onto, as for run."),
    summary: str = typer.Option(None, "--summary", metavar="final|auc|max|slope",
                                help="How a run's curve of the search metric becomes its value "
                                     "[default: the spec's search.metric.summary, else final]."),
    report: bool = typer.Option(False, "--report", help="Write the search report of the study as it is "
                                "(SEARCH_REPORT.md, plots), running nothing."),
    promote: str = typer.Option(None, "--promote", metavar="NAME",
                                help="Write a new spec beside SPEC: SPEC plus a config NAME with the best "
                                     "trial's params (never overwrites), running nothing."),
    out: Path = typer.Option(None, "--out", help="With --report: the report folder [default: the study's "
                             "folder/report]."),
    as_json: bool = typer.Option(False, "--json", help="Print the outcome as JSON (progress goes to stderr)."),
) -> None:
    """Tune the spec's `search` section with Optuna; trials never enter the benchmark (docs/search.md)."""
    from rich.markup import escape

    from benchlab.cli.app import err_console
    from benchlab.spec import load_spec
    from benchlab.stats import SUMMARIES

    spec = load_spec(spec_path, sets)
    if spec.search is None:
        raise UsageError(f"{spec_path}: the spec has no `search` section; see docs/search.md for one")
    if summary is not None and summary not in SUMMARIES:
        raise UsageError(f"--summary {summary}: expected one of {', '.join(SUMMARIES)}")
    folder = results or default_results(spec)
    if promote is not None:
        return _promote(spec, folder, promote, as_json)
    if report:
        return _report(spec, folder, out, as_json)
    from benchlab.cli.cmd_run import _sweep_with_signals, backend_options
    from benchlab.cli.progress import SweepDisplay
    from benchlab.search import SearchRun
    from benchlab.search.study import goal_of

    backend = backend or spec.backend
    options = backend_options(backend, jobs, ray_address, shared_fs, slurm)
    show = err_console if as_json else console
    search_ = spec.search
    metric = search_.metric.name

    on_trial = _trial_printer(show, metric)
    run = SearchRun(spec, folder, budget=budget, jobs=jobs, backend=backend, gpus=gpus, summary=summary,
                    on_trial=on_trial, backend_options=options)
    how = ("--budget" if budget is not None else "search.budget" if search_.budget is not None else
           f"4 × {len(search_.space)} dimensions; --budget to change")
    show.print(f"study {escape(spec.name)}:{escape(search_.name)} in {escape(str(run.folder))}", highlight=False)
    show.print(f"budget: {run.budget} trials ({how}); metric: {escape(metric)} ({goal_of(spec)}, {run.summary}); "
               f"sampler {search_.sampler}, pruner {search_.pruner}", highlight=False)
    from benchlab.spec.search import pruning_blind

    if (blind := pruning_blind(spec)) is not None:
        show.print(f"[yellow]note[/]: {escape(blind)}", highlight=False)
    if search_.metric.allow_primary:
        show.print(f"[yellow]note[/]: tuning on the primary metric, allowed because: "
                   f"{escape(search_.metric.reason or '')}", highlight=False)
    # The trial lines count against the budget; the runs' own count would grow with the plan.
    display = SweepDisplay(show, primary=metric, counter=False)
    run.on_event = display.on_event
    result = _sweep_with_signals(run, display)
    _print_outcome(show, result, metric, spec, spec_path, as_json)
    raise typer.Exit(result.exit_code)


def _trial_printer(show: Any, metric: str) -> Callable[[TrialEvent], None]:
    """The line printed as each trial ends: its value or why it was pruned or failed, and the best so far."""
    from rich.markup import escape

    def on_trial(event: TrialEvent) -> None:
        if event.kind == "ask":
            return
        params = escape(_params_text(event.params))
        if event.state == "complete":
            detail = f"[green]{escape(metric)} = {event.value:.6g}[/]"
        elif event.state == "pruned":
            detail = f"[yellow]pruned[/] ({escape(event.reason or '')})"
        else:
            detail = f"[red]failed[/]: {escape(event.reason or '')}"
        best = (f"; best: trial {event.best_number}, {event.best_value:.6g}"
                if event.best_number is not None and event.best_value is not None else "")
        show.print(f"trial {event.number} [{event.counted}/{event.budget}] {detail} with {params}{best}",
                   highlight=False)


    return on_trial


def _print_outcome(show: Any, result: SearchResult, metric: str, spec: Any, spec_path: Path,
                   as_json: bool) -> None:
    """The study's end: its counts, the best trial and how to promote it, the search report, the JSON."""
    from rich.markup import escape

    if result.recovered:
        show.print(f"trials {', '.join(map(str, result.recovered))} were running when the last search stopped: "
                   "failed with that reason and asked again", highlight=False)
    show.print(f"{result.counted} of {result.budget} trials done ({result.completed} completed, {result.pruned} "
               f"pruned this time" + (f", [red]{result.failed} failed[/]" if result.failed else "") + ")",
               highlight=False)
    if result.stopped_on_failures:
        show.print("[red]stopped asking for trials[/]: too many failed; see them with "
                   f"`benchlab status {escape(str(result.folder))}`", highlight=False)
    if result.best_number is not None and result.best_value is not None:
        show.print(f"best: trial {result.best_number}, {escape(metric)} = {result.best_value:.6g} with "
                   f"{escape(_params_text(result.best_params))}", highlight=False)
        # The spec's overrides, not the raw -s words: a secret variable's value shows as <secret>.
        show.print(f"promote it: benchlab search {escape(str(spec_path))}{escape(_sets_text(spec.overrides))} "
                   "--promote NAME",
                   highlight=False)
    if result.sweep is not None and result.sweep.stopped:
        show.print("[yellow]stopped[/]: run the same command again to finish the study")
    elif result.counted:
        from benchlab.search.report import write_search_report

        files = write_search_report(result.folder)
        show.print(f"search report: [bold]{escape(str(files.markdown))}[/]", highlight=False)
    if as_json:
        print_json({"study": result.study, "folder": str(result.folder), "budget": result.budget,
                    "counted": result.counted, "completed": result.completed, "pruned": result.pruned,
                    "failed": result.failed, "recovered": result.recovered, "best_trial": result.best_number,
                    "best_value": result.best_value, "best_params": result.best_params, "metric": metric})


def _promote(spec: Any, folder: Path, name: str, as_json: bool) -> None:
    from rich.markup import escape

    from benchlab.search.promote import promote

    promoted = promote(spec, folder, name)
    if as_json:
        print_json({"spec": str(promoted.path), "config": name, "study": promoted.study, "trial": promoted.trial,
                    "metric": promoted.metric, "value": promoted.value, "params": promoted.params})
        return
    console.print(f"wrote {escape(str(promoted.path))}: config {escape(name)} = trial {promoted.trial} of "
                  f"{escape(promoted.study)} ({escape(promoted.metric)} = {promoted.value:.6g}) with "
                  f"{escape(_params_text(promoted.params))}", highlight=False)
    # With the same -s as the search: without them the run ids differ, and every config would run again.
    console.print(f"next: benchlab run {escape(str(promoted.path))}{escape(_sets_text(spec.overrides))}",
                  highlight=False)


def _report(spec: Any, folder: Path, out: Path | None, as_json: bool) -> None:
    from rich.markup import escape

    from benchlab.search import search_folder
    from benchlab.search.report import write_search_report

    study_folder = search_folder(folder, spec)
    files = write_search_report(study_folder, out)
    if as_json:
        print_json({"markdown": str(files.markdown), "plots": [str(p) for p in files.plots]})
        return
    console.print(f"search report: [bold]{escape(str(files.markdown))}[/]", highlight=False)


def _sets_text(sets: list[str] | dict[str, Any] | None) -> str:
    """The ``-s key=value`` words that give a command the same variables, shell-quoted."""
    import shlex

    items = [f"{k}={v}" for k, v in sets.items()] if isinstance(sets, dict) else list(sets or [])
    return "".join(f" -s {shlex.quote(item)}" for item in items)
