"""`benchlab report`: the report files of a results folder."""

from __future__ import annotations

from pathlib import Path

import typer

from benchlab.cli.app import app, console


@app.command()
def report(
    results: Path = typer.Argument(None, help="Results folder [default: the one under ./results].",
                                   show_default=False),
    out: Path = typer.Option(None, "--out", "-o", help="Where to write [default: the results folder]."),
) -> None:
    """Write BENCHMARK_REPORT.md and results.csv (plus plots and report.html when available)."""
    from benchlab.report import write_report

    files = write_report(results, out)
    console.print(f"wrote {files.markdown}")
    console.print(f"wrote {files.csv}")
    for path in files.extra:
        console.print(f"wrote {path}")
