"""`benchlab report`: the report files of a results folder."""

from __future__ import annotations

from pathlib import Path

import typer

from benchlab.cli.app import app, console
from benchlab.names.choices import FailedAsChoice


@app.command()
def report(
    sources: list[Path] = typer.Argument(
        None,
        help="Results folder (default: ./benchlab.db's folder, or the only one under ./results); several "
             "folders, or a long-format CSV, give one merged report (written into --out).",
        show_default=False,
    ),
    out: Path = typer.Option(
        None, "--out", "-o", help="Where to write (default: the results folder)."
    ),
    plots: bool = typer.Option(True, "--plots/--no-plots", help="Draw the PNG figures."),
    html: bool = typer.Option(True, "--html/--no-html", help="Write report.html (plots embedded)."),
    seeds: bool = typer.Option(
        False, "--seeds", help="Draw individual seed curves (at most 20 per config)."
    ),
    reps: int = typer.Option(
        2000, "--reps", min=100, help="Bootstrap resamples of the statistics."
    ),
    seed: int = typer.Option(
        0, "--seed", help="Seed of the bootstrap (the same seed gives the same report)."
    ),
    failed_as: FailedAsChoice = typer.Option(
        FailedAsChoice.EXCLUDE, "--failed-as", help="Failed seeds: exclude (judge on the completed ones, "
        "with a caveat) or worst (score them as the worst value)."
    ),
) -> None:
    """Write BENCHMARK_REPORT.md, BENCHMARKS.md, results.csv, plots/ and report.html."""
    from benchlab.report.gcscope import collections_deferred

    with collections_deferred():  # from here: the imports of the report's modules collect less too
        _report(sources, out, plots=plots, html=html, seeds=seeds, reps=reps, seed=seed, failed_as=failed_as)


def _report(sources: list[Path] | None, out: Path | None, *, plots: bool, html: bool, seeds: bool, reps: int,
            seed: int, failed_as: FailedAsChoice) -> None:
    from benchlab.report import write_report

    results: Path | None = sources[0] if sources else None
    if sources and (len(sources) > 1 or sources[0].suffix.lower() == ".csv"):
        from benchlab.history.merge import merge_sources, write_results

        merged = merge_sources(list(sources))
        for note in merged.notes:
            console.print(f"note: {note}", markup=False, highlight=False)
        out = out or Path(f"{sources[0].stem}-report" if len(sources) == 1 else "merged-report")
        results = write_results(merged, out)
    try:
        files = write_report(results, out, plots=plots, html=html, seeds=seeds, reps=reps, seed=seed,
                             failed_as=failed_as.value)
    except OSError as exc:
        from benchlab.errors import CannotWrite
        from benchlab.ledger import disk_full, is_disk_full

        where = Path(exc.filename).parent if exc.filename else (out or results or Path("."))
        if is_disk_full(exc):
            raise disk_full(where) from None
        raise CannotWrite(Path(where), f"cannot write the report into {where} ({exc.strerror or exc}); "
                          "write it elsewhere with --out DIR") from None
    console.print(f"wrote {files.markdown}")
    console.print(f"wrote {files.csv}")
    for path in files.extra:
        console.print(f"wrote {path}")
