"""`benchlab diff`: two versions of a benchmark, what changed and which scores moved."""

from __future__ import annotations

from pathlib import Path

import typer

from benchlab.cli.app import app, console, err_console, print_json
from benchlab.json_types import JsonObject


def write_csv(path: Path, rows: list[JsonObject], columns: tuple[str, ...] | list[str]) -> None:
    """Write a comparisons table as CSV (``--csv FILE`` of compare, analyze and diff)."""
    import csv

    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(columns), extrasaction="ignore")
        writer.writeheader()
        for row in rows:
            writer.writerow({k: "" if row.get(k) is None else row.get(k) for k in columns})


@app.command()
def diff(
    before: str = typer.Argument(..., help="The earlier version: a results folder, or FOLDER@VERSION."),
    after: str = typer.Argument(..., help="The later version: a results folder, or FOLDER@VERSION."),
    metric: str = typer.Option(None, "--metric", "-m", help="Compare only this metric [default: every metric]."),
    summary: str = typer.Option("final", "--summary", help="How a learning curve becomes one value per run: "
                                "final, auc, max or slope."),
    alpha: float = typer.Option(0.05, "--alpha", min=1e-6, max=0.5, help="Significance level, after Holm's "
                                "correction across each metric's comparisons."),
    reps: int = typer.Option(2000, "--reps", min=0, help="Bootstrap resamples (0: none)."),
    seed: int = typer.Option(0, "--seed", help="Seed of the bootstrap."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON for scripts."),
    md: Path = typer.Option(None, "--md", help="Also write the Markdown summary to this file."),
    csv: Path = typer.Option(None, "--csv", help="Also write the comparisons table to this CSV file."),
    fail_on_regression: bool = typer.Option(False, "--fail-on-regression",
                                            help="Exit 1 when a score regressed (for CI gates)."),
) -> None:
    """What changed between two versions of a benchmark (code, spec, packages, datasets) and which
    scores moved, with 95% CIs: paired by seed where most seeds are shared, Holm per metric."""
    from benchlab.history.diff import diff_versions
    from benchlab.history.diff_text import CSV_COLUMNS, csv_rows, to_markdown

    result = diff_versions(before, after, metric=metric, summary=summary, alpha=alpha, reps=reps, seed=seed)
    text = to_markdown(result)
    if md is not None:
        md.parent.mkdir(parents=True, exist_ok=True)
        md.write_text(text)
    if csv is not None:
        write_csv(csv, [row._asdict() for row in csv_rows(result)], CSV_COLUMNS)
    if as_json:
        print_json(result.to_json())
    else:
        console.print(text, markup=False, highlight=False)
    undetermined = result.analysis.undetermined
    if undetermined:
        err_console.print(f"warning: {len(undetermined)} change(s) undetermined: the statistics cannot judge them "
                          f"(e.g. {undetermined[0].key}; see the Notes), so no verdict covers them",
                          markup=False, highlight=False)
    if fail_on_regression and (result.analysis.regressions or result.analysis.question_regressions):
        raise typer.Exit(1)
