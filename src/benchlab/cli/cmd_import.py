"""`benchlab import mlflow|wandb|hydra`: runs made elsewhere, into an ordinary results folder."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from benchlab.cli.app import app, console, err_console, polish_help, print_json

if TYPE_CHECKING:
    from benchlab.collect.importers import Naming, SourceRun

import_app = typer.Typer(
    help="Import runs from MLflow, W&B (offline runs) or a Hydra multirun folder into a results folder "
         "that report, compare, ui, diff and export read as any other.",
    no_args_is_help=True,
    context_settings={"help_option_names": ["-h", "--help"]},
)
app.add_typer(import_app, name="import")

ResultsOpt = typer.Option(..., "--results", "-r", help="The results folder to write (created if missing; "
                          "importing again adds only the runs not there yet).")
MetricOpt = typer.Option(..., "--metric", "-m", help="The primary metric: a run without it is not imported. "
                         "Every other metric a run logged is imported too.")
GoalOpt = typer.Option("max", "--goal", help="Direction of the primary metric: max or min.")
SeedOpt = typer.Option("seed", "--seed", help="The key holding each run's seed: a param (seed; dotted for nested "
                       "configs: train.seed) or tags.NAME.")
TaskOpt = typer.Option(None, "--task", help="The key holding each run's task (default: one task, the MLflow "
                       "experiment, W&B project or Hydra job name).")
ConfigOpt = typer.Option(None, "--config", help="A key naming each run's config; repeatable, the config is then "
                         "k1=v1,k2=v2 (default: every param but the task and seed; a Hydra job's overrides).")
BaselineOpt = typer.Option(None, "--baseline", help="The config the others are compared with.")
NameOpt = typer.Option(None, "--name", help="The benchmark's name (default: the results folder's).")
JsonOpt = typer.Option(False, "--json", help="Print JSON for scripts.")


def _naming(seed: str, task: str | None, config: list[str] | None) -> Naming:
    from benchlab.collect.importers import Naming

    return Naming(seed=seed, task=task, config=tuple(config or ()))


def _finish(runs: Iterable[SourceRun], results: Path, *, seed: str, task: str | None, config: list[str] | None,
            metric: str, goal: str, baseline: str | None, name: str | None, as_json: bool) -> None:
    """Import, say what was done and what was not, one line per run left out; exit 2 if the input was at fault."""
    from benchlab.collect.importers import import_runs

    done = import_runs(runs, results, naming=_naming(seed, task, config), primary=metric, goal=goal,
                       benchmark=name, baseline=baseline)
    if as_json:
        print_json(done.to_json())
    else:
        for skipped in done.skipped:
            err_console.print(f"{'note' if skipped.unfinished else 'skipped'}: {skipped}", markup=False,
                              highlight=False)
        console.print(f"{results}: imported {len(done.added)} run{'s' if len(done.added) != 1 else ''}"
                      f" ({done.already} already there, {len(done.skipped)} left out)", markup=False,
                      highlight=False)
    if done.bad:
        raise typer.Exit(2)


@import_app.command("mlflow")
def import_mlflow(
    source: str = typer.Argument(..., help="The tracking store: a folder (mlruns), sqlite:///FILE.db or a "
                                 "tracking server's URL (http://127.0.0.1:5000)."),
    experiment: list[str] = typer.Option(None, "--experiment", "-e", help="An experiment's name or id; "
                                         "repeatable (default: every active experiment)."),
    filter_string: str = typer.Option("", "--filter", help="Only the runs this MLflow search filter keeps, "
                                      "e.g. \"tags.stage = 'final'\" (MLflow's search_runs syntax)."),
    results: Path = ResultsOpt, metric: str = MetricOpt, goal: str = GoalOpt, seed: str = SeedOpt,
    task: str | None = TaskOpt, config: list[str] = ConfigOpt, baseline: str | None = BaselineOpt,
    name: str | None = NameOpt, as_json: bool = JsonOpt,
) -> None:
    """The finished runs of MLflow experiments: params and tags name (task, config, seed); metric
    histories become curves (step, value), their latest values the final ones."""
    from benchlab.collect.importers.from_mlflow import read_runs

    _finish(read_runs(source, experiment or None, filter_string), results, seed=seed, task=task, config=config,
            metric=metric, goal=goal, baseline=baseline, name=name, as_json=as_json)


@import_app.command("wandb")
def import_wandb(
    sources: list[Path] = typer.Argument(..., help="wandb folders, offline-run-* folders or .wandb files."),
    results: Path = ResultsOpt, metric: str = MetricOpt, goal: str = GoalOpt, seed: str = SeedOpt,
    task: str | None = TaskOpt, config: list[str] = ConfigOpt, baseline: str | None = BaselineOpt,
    name: str | None = NameOpt, as_json: bool = JsonOpt,
) -> None:
    """W&B runs written offline (WANDB_MODE=offline): the config names (task, config, seed); the
    summary gives the final values, each metric logged at several steps a curve."""
    from benchlab.collect.importers.from_wandb import read_runs

    _finish(read_runs(list(sources)), results, seed=seed, task=task, config=config, metric=metric, goal=goal,
            baseline=baseline, name=name, as_json=as_json)


@import_app.command("hydra")
def import_hydra(
    sources: list[Path] = typer.Argument(..., help="Hydra multirun folders (multirun/DATE/TIME), or folders "
                                         "above them."),
    source: str = typer.Option(None, "--from", help="Where each job reports the primary metric, as a metric's "
                               "from: in a spec, e.g. \"{regex: 'acc=(\\S+)', file: app.log}\" (default: the "
                               "job folder's metrics.json and metrics.jsonl)."),
    results: Path = ResultsOpt, metric: str = MetricOpt, goal: str = GoalOpt, seed: str = SeedOpt,
    task: str | None = TaskOpt, config: list[str] = ConfigOpt, baseline: str | None = BaselineOpt,
    name: str | None = NameOpt, as_json: bool = JsonOpt,
) -> None:
    """The jobs of Hydra multiruns: each job's config (.hydra/config.yaml) and overrides name
    (task, config, seed); its folder's outputs are read as a run directory's."""
    from benchlab.collect.importers.from_hydra import metric_of, read_runs

    _finish(read_runs(list(sources), metric_of(metric, goal, source)), results, seed=seed, task=task,
            config=config, metric=metric, goal=goal, baseline=baseline, name=name, as_json=as_json)


# The group's commands get the help rendering of the top-level ones (defaults stated last).
polish_help(import_app)
