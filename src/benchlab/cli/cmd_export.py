"""`benchlab export`: publish a results folder to any fsspec target, idempotently."""

from __future__ import annotations

from pathlib import Path

import typer

from benchlab.cli.app import app, console, err_console, print_json


@app.command()
def export(
    results: Path = typer.Argument(..., help="The results folder to publish."),
    target: str = typer.Argument(..., help="Where: a folder, memory://..., s3://BUCKET/PREFIX, "
                                 "hf://datasets/ORG/NAME (any fsspec URL)."),
    what: str = typer.Option("all", "--what", help="report (report files and plots), runs (run folders and "
                             "benchmark versions) or all."),
    dry_run: bool = typer.Option(False, "--dry-run", help="Say what would be uploaded; upload nothing."),
    public: str = typer.Option(None, "--public-url", help="Base URL the target is read at, for the rewritten "
                               "links [default: the target's own, e.g. https://BUCKET.s3.amazonaws.com/]."),
    allow_secret: list[str] = typer.Option([], "--allow-secret", help="Publish one finding of the secret scan "
                                           "that is a false alarm, named as the refusal printed it: FILE:LINE "
                                           "(e.g. runs/ID/train.log:12) or its fingerprint (sha256:...); "
                                           "repeatable. A whole file is never let through."),
    with_diff: bool = typer.Option(False, "--with-diff", help="Also publish versions/*/code.diff, the "
                                   "uncommitted code the runs used."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON for scripts."),
    fmt: str = typer.Option("files", "--format", metavar="files|eee",
                            help="files: the report and run folders; eee: Every Eval Ever records (one per config, "
                                 "under data/<benchmark>/<developer>/<model>/; see docs/publishing.md)."),
    organization: str = typer.Option("unknown", "--organization",
                                     help="With --format eee: the organization publishing the records."),
    relationship: str = typer.Option("other", "--relationship", metavar="first_party|third_party|collaborative|other",
                                     help="With --format eee: who ran the evaluation, relative to the model."),
) -> None:
    """Upload the report and runs whose content changed since the last export to TARGET, links
    rewritten to its public URLs; the export is appended to EXPORTS.md and exports.json. Every
    file is scanned for credentials first: one found stops the export (exit code 2)."""
    from benchlab.history.export import export as do_export
    from benchlab.results import find_results

    folder = find_results(results)
    if fmt not in ("files", "eee"):
        from benchlab.errors import UsageError

        raise UsageError(f"--format {fmt}: expected files or eee")
    if fmt == "eee":
        return _export_eee(folder, target, organization, relationship, dry_run=dry_run, as_json=as_json)
    result = do_export(folder, target, what=what, dry_run=dry_run, public=public, allow=allow_secret,
                       with_diff=with_diff)
    if as_json:
        print_json(result.to_json())
        return
    verb = "would upload" if dry_run else "uploaded"
    for f in result.uploaded:
        console.print(f"{verb} {f.path} ({f.bytes} bytes)", markup=False, highlight=False)
    console.print(f"{result.target}: {verb} {len(result.uploaded)} of {len(result.files)} files "
                  f"({result.uploaded_bytes} bytes); {len(result.files) - len(result.uploaded)} unchanged"
                  + (f"; links point to {result.public_url}" if result.public_url else ""),
                  markup=False, highlight=False)
    for link in result.outside_links:
        err_console.print(f"warning: not published: {link} is a symbolic link leading out of {folder}",
                          markup=False, highlight=False)
    if result.unpublished_runs:
        n = len(result.unpublished_runs)
        err_console.print(f"warning: the report links to {n} run folder{'s' if n != 1 else ''} that {result.target} "
                      f"does not hold (e.g. runs/{result.unpublished_runs[0]}/); `benchlab export {results} "
                      f"{target} --what runs` publishes them", markup=False, highlight=False)


def _export_eee(folder: Path, target: str, organization: str, relationship: str, *, dry_run: bool,
                as_json: bool) -> None:
    from benchlab.errors import UsageError
    from benchlab.history.eee import EeeSource, write_eee

    if relationship not in ("first_party", "third_party", "collaborative", "other"):
        raise UsageError(f"--relationship {relationship}: expected first_party, third_party, collaborative or other")
    paths = write_eee(folder, target, EeeSource(organization=organization, relationship=relationship),
                      dry_run=dry_run)
    if as_json:
        print_json({"target": target, "format": "eee", "records": paths, "dry_run": dry_run})
        return
    verb = "would write" if dry_run else "wrote"
    for path in paths:
        console.print(f"{verb} {path}", markup=False, highlight=False)
    console.print(f"{target}: {verb} {len(paths)} Every Eval Ever record{'s' if len(paths) != 1 else ''}",
                  markup=False, highlight=False)
