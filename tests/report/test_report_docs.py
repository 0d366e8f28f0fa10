"""docs/reports.md says what the code does: its examples are run here."""

from __future__ import annotations

import re
from pathlib import Path

from report_world import build_store_world

from benchlab.report import write_report
from benchlab_testing import doc_blocks, run_python_blocks

DOC = Path(__file__).parents[2] / "docs" / "reports.md"


def test_python_examples_in_the_doc_run():
    assert run_python_blocks(DOC) >= 7  # the example's own asserts, all of which ran


def test_benchmarks_md_example_is_what_the_report_writes(tmp_path: Path):
    # The world the doc describes in words.
    values = {("m1", "x"): [0.9, 1.0], ("m1", "y"): [1.2, 1.2], ("m1", "z"): [1.3, 1.4],
              ("m2", "x"): [3.0, 5.0], ("m2", "y"): [2.0, 2.0], ("m2", "z"): [1.0, 1.0]}
    folder = build_store_world(tmp_path / "res", values, goal="min",
                               targets={"m1": 1.0, "m2": None})
    write_report(folder, plots=False, html=False)  # into the results folder: links read runs/<id>/
    written = (folder / "BENCHMARKS.md").read_text().splitlines()
    (example,) = doc_blocks(DOC, "markdown")
    for line in example.strip().splitlines():
        assert line in written


def test_every_file_the_doc_lists_is_written(tmp_path: Path):
    values = {(t, c): [0.1 * i + 0.01 * s + 0.02 * j for s in range(3)]
              for i, t in enumerate(("t1", "t2", "t3"), start=1)
              for j, c in enumerate(("a", "b", "c"))}
    folder = build_store_world(tmp_path / "res", values, baseline="a", curves=True)
    files = write_report(folder, tmp_path / "rep")
    written = {str(p.relative_to(files.folder)) for p in [files.markdown, files.csv, *files.extra]}
    files_table = DOC.read_text().split("## The files")[1].split("\n## ")[0]
    listed = re.findall(r"^\| `([^`]+)` \|", files_table, flags=re.M)
    listed = [p.replace("<metric>", "score").replace("<primary>", "score") for p in listed]
    assert set(listed) - {"report-tables.json"} == written  # kept only in the results folder itself
    in_place = write_report(folder)
    assert in_place.extra[1] == folder / "report-tables.json" and in_place.extra[1].is_file()
    assert set(listed) == {str(p.relative_to(folder)) for p in [in_place.markdown, in_place.csv, *in_place.extra]}
    console = doc_blocks(DOC, "console")[0]
    for path in written:
        assert f"wrote report/{path}" in console


def test_public_api_of_the_report_package_is_pinned():
    import benchlab.report

    assert sorted(benchlab.report.__all__) == [
        "DEFAULT_REPS", "ReportData", "ReportFiles", "analyze", "gather", "leaderboard", "status",
        "write_report"]
    for name in benchlab.report.__all__:
        assert getattr(benchlab.report, name).__doc__ or name == "DEFAULT_REPS"
