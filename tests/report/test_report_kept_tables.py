"""The dashboard shows the report's tables that `benchlab report` kept (report-tables.json) while
they were computed from the folder as it is, and computes them again as soon as they are not: a run
added, a metric changed, other options, another file in its place."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from report_world import add_completed_run, build_store_world

from benchlab.ledger import Store
from benchlab.names import report_tables
from benchlab.names.results_files import report_tables_file
from benchlab.report import write_report
from benchlab.results import tables_key
from benchlab.ui import tables as views
from benchlab_testing import run_cli

VALUES = {("walk", "a"): [0.1, 0.2, 0.4], ("walk", "b"): [0.3, 0.5, 0.6], ("run", "a"): [1.0, 1.2, 1.1],
          ("run", "b"): [1.4, 1.3, 1.5]}


def _reported(tmp_path: Path) -> Path:
    folder = build_store_world(tmp_path / "res", VALUES, baseline="a")
    write_report(folder, plots=False, html=False)
    return folder


def _no_computing(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(folder: Path) -> None:
        raise AssertionError("the tables were computed again")

    monkeypatch.setattr(views, "computed_numbers", refuse)


def _seeds_cell(numbers: report_tables.ReportNumbers, task: str, config: str) -> str:
    table = next(t for t in numbers.task_tables if t.name == task)
    row = next(r for r in table.rows if r.config.split()[0] == config)
    return row.cells[[c.name for c in table.columns].index("seeds")]


def test_the_kept_tables_are_the_ones_the_dashboard_computes(tmp_path: Path):
    folder = _reported(tmp_path)
    kept = views.kept_numbers(folder)
    assert kept is not None
    assert kept == views.computed_numbers(folder)
    assert _seeds_cell(kept, "walk", "a") == "3/3"
    # What the file holds is what the report printed: its cells are BENCHMARK_REPORT.md's.
    report = (folder / "BENCHMARK_REPORT.md").read_text()
    for table in kept.task_tables:
        for row in table.rows:
            assert " | ".join(row.cells) in report


def test_unchanged_the_dashboard_takes_the_kept_tables_without_computing(tmp_path: Path, monkeypatch):
    folder = _reported(tmp_path)
    expected = views.computed_numbers(folder)
    _no_computing(monkeypatch)
    assert views.report_numbers(folder) == expected


def test_a_run_added_after_the_report_shows_in_the_tables_at_once(tmp_path: Path):
    folder = _reported(tmp_path)
    before = views.report_numbers(folder)
    assert before is not None and _seeds_cell(before, "walk", "a") == "3/3"
    add_completed_run(folder, "walk", "a", 3, 0.9)
    assert views.kept_numbers(folder) is None
    after = views.report_numbers(folder)
    assert after is not None and _seeds_cell(after, "walk", "a") == "4/4"
    assert after == views.computed_numbers(folder) != before


def test_a_run_added_after_the_report_shows_on_the_page_of_a_dashboard_started_then(tmp_path: Path):
    from starlette.testclient import TestClient

    from benchlab.ui.app import create_app
    from benchlab.ui.library import Library

    folder = _reported(tmp_path)
    add_completed_run(folder, "walk", "a", 3, 0.9)
    with TestClient(create_app(Library([folder]), warm_up=False)) as client:
        page = client.get("/b/res/numbers")
    assert page.status_code == 200
    assert "4/4" in page.text and "3/3" in page.text  # walk/a has its new seed; the others do not


def test_a_metric_changed_by_one_ulp_is_a_change(tmp_path: Path):
    folder = _reported(tmp_path)
    with Store.open(folder) as store:
        digest = store.content_digest()
        assert store.content_digest() == digest  # the same ledger, the same digest
        store.replace_metrics("walk-a-0", {"score": float(np.nextafter(0.1, 1.0))}, {})
        assert store.content_digest() != digest
    assert views.kept_numbers(folder) is None


def test_tables_computed_with_other_options_are_not_taken_for_the_dashboards(tmp_path: Path):
    folder = build_store_world(tmp_path / "res", VALUES, baseline="a")
    write_report(folder, plots=False, html=False, reps=500)
    assert report_tables_file(folder).is_file()
    assert views.kept_numbers(folder) is None
    write_report(folder, plots=False, html=False)
    assert views.kept_numbers(folder) is not None


def test_a_report_written_elsewhere_keeps_no_tables(tmp_path: Path):
    folder = build_store_world(tmp_path / "res", VALUES, baseline="a")
    write_report(folder, tmp_path / "elsewhere", plots=False, html=False)
    assert not report_tables_file(folder).exists() and not report_tables_file(tmp_path / "elsewhere").exists()


def test_a_report_whose_out_names_the_results_folder_keeps_the_tables_under_its_ledgers_key(tmp_path: Path,
                                                                                            monkeypatch):
    folder = build_store_world(tmp_path / "res", VALUES, baseline="a")
    monkeypatch.chdir(tmp_path)
    write_report(folder, Path("res/../res"), plots=False, html=False)  # the folder, spelt otherwise
    _no_computing(monkeypatch)
    assert views.kept_numbers(folder) is not None


def _tampered_cell(path: Path) -> None:
    data = json.loads(path.read_text())
    data["numbers"]["task_tables"][0]["rows"][0]["cells"][1] = "9.99 ± 0.01"
    path.write_text(json.dumps(data))


def _wrong_type_with_its_checksum(path: Path) -> None:
    data = json.loads(path.read_text())
    data["numbers"]["task_tables"][0]["rows"][0]["cells"] = [1, 2]
    data["sha256"] = report_tables._checksum(data["numbers"])
    path.write_text(json.dumps(data))


def _another_format(path: Path) -> None:
    data = json.loads(path.read_text())
    data["format"] = report_tables.FORMAT + 1
    path.write_text(json.dumps(data))


DAMAGE = {
    "truncated": lambda p: p.write_bytes(p.read_bytes()[: len(p.read_bytes()) // 2]),
    "not text": lambda p: p.write_bytes(b"\xff\xfe\x00binary"),
    "a JSON list": lambda p: p.write_text("[1, 2, 3]"),
    "another program's file": lambda p: p.write_text(json.dumps({"kind": "something else", "numbers": {}})),
    "a cell edited by hand": _tampered_cell,
    "a field of the wrong type, checksum redone": _wrong_type_with_its_checksum,
    "another format": _another_format,
    "a folder in its place": lambda p: (p.unlink(), p.mkdir()),
    "deeply nested": lambda p: p.write_text("[" * 100_000 + "]" * 100_000),
}


@pytest.mark.parametrize("damage", list(DAMAGE))
def test_a_damaged_or_foreign_file_is_ignored_and_the_tables_computed_again(tmp_path: Path, damage: str):
    from starlette.testclient import TestClient

    from benchlab.ui.app import create_app
    from benchlab.ui.library import Library

    folder = _reported(tmp_path)
    expected = views.computed_numbers(folder)
    DAMAGE[damage](report_tables_file(folder))
    assert views.kept_numbers(folder) is None
    assert views.report_numbers(folder) == expected
    with TestClient(create_app(Library([folder]), warm_up=False)) as client:
        page = client.get("/b/res/numbers")
    assert page.status_code == 200 and "9.99" not in page.text and "walk" in page.text


def test_the_file_the_dashboard_trusts_is_one_the_key_names(tmp_path: Path, monkeypatch):
    # A record written under the folder's key is shown as it is (here with a planted cell): the
    # dashboard takes the file only for what the key says it was computed from.
    folder = _reported(tmp_path)
    kept = views.kept_numbers(folder)
    assert kept is not None
    table = kept.task_tables[0]
    row = replace(table.rows[0], cells=("planted", *table.rows[0].cells[1:]))
    planted = replace(kept, task_tables=(replace(table, rows=(row, *table.rows[1:])), *kept.task_tables[1:]))
    with Store.open(folder) as store:
        key = tables_key(folder, store.content_digest())
    report_tables.write(report_tables_file(folder), planted, key)
    _no_computing(monkeypatch)
    assert views.report_numbers(folder) == planted
    # The same record under another key (one resample more) is not shown.
    report_tables.write(report_tables_file(folder), planted, tables_key(folder, key.ledger, reps=key.reps + 1))
    assert views.kept_numbers(folder) is None


def test_markup_in_a_kept_file_under_the_right_key_reaches_the_page_as_text(tmp_path: Path):
    # Anyone who can write the results folder can redo the key and the checksum: the page must
    # escape what the file holds, as it escapes what it computes.
    from starlette.testclient import TestClient

    from benchlab.ui.app import create_app
    from benchlab.ui.library import Library

    folder = _reported(tmp_path)
    kept = views.kept_numbers(folder)
    assert kept is not None
    table = kept.task_tables[0]
    evil = "<img src=x onerror=alert(1)>"
    row = replace(table.rows[0], config=evil, cells=(evil, *table.rows[0].cells[1:]))
    planted = replace(kept, primary=evil, task_tables=(replace(table, rows=(row, *table.rows[1:])),
                                                       *kept.task_tables[1:]))
    with Store.open(folder) as store:
        key = tables_key(folder, store.content_digest())
    report_tables.write(report_tables_file(folder), planted, key)
    with TestClient(create_app(Library([folder]), warm_up=False)) as client:
        page = client.get("/b/res/numbers")
    assert page.status_code == 200
    assert "&lt;img src=x onerror=alert(1)&gt;" in page.text and "<img src=x" not in page.text


def test_per_question_record_files_are_part_of_the_key(tmp_path: Path):
    from benchlab.collect.samples import EVAL_MARKER, records_signature

    runs = tmp_path / "runs"
    (runs / "r1").mkdir(parents=True)
    assert records_signature(runs) is None  # no records: nothing to sign
    (runs / "r1" / EVAL_MARKER).write_text("{}")
    records = runs / "r1" / "samples.jsonl"
    records.write_text('{"question": "q1", "score": 1}\n')
    first = records_signature(runs)
    assert first is not None and records_signature(runs) == first
    records.write_text('{"question": "q1", "score": 0}\n{"question": "q2", "score": 1}\n')
    assert records_signature(runs) != first


def test_benchlab_report_writes_the_tables_and_export_publishes_them_with_the_report(tmp_path: Path):
    from benchlab.history.export import files_to_export

    folder = build_store_world(tmp_path / "res", VALUES, baseline="a")
    run_cli("report", str(folder), "--no-plots", "--no-html", check=True)
    assert views.kept_numbers(folder) == views.computed_numbers(folder) is not None
    assert Path(report_tables_file(folder).name) in files_to_export(folder, "report")


def test_after_the_warm_up_imports_computing_the_tables_imports_no_library_of_note(tmp_path: Path):
    # The warm-up pays the views' imports before any page is asked for; one it missed (pandas
    # was) is paid by the first page of the report's tables instead.
    folder = build_store_world(tmp_path / "res", VALUES, baseline="a")
    code = ("import sys; from pathlib import Path; from benchlab.ui import tables as views; views.load_analysis(); "
            "before = set(sys.modules); views.computed_numbers(Path(sys.argv[1])); "
            "print(sorted(m for m in set(sys.modules) - before if '.' not in m))")
    out = subprocess.run([sys.executable, "-c", code, str(folder)], capture_output=True, text=True, check=True)
    assert set(ast.literal_eval(out.stdout)) <= {"threadpoolctl"}, out.stdout  # read at the first call, a few ms


def test_with_every_benchmarks_tables_kept_the_warm_up_fills_the_cache_before_any_statistics_import(tmp_path: Path):
    # In a fresh interpreter: the kept tables are in the cache before pandas is imported, and the
    # imports wait (`quiet`) for the pages being asked for; a folder never reported does not wait.
    reported = _reported(tmp_path / "a")
    never = build_store_world(tmp_path / "b" / "res", VALUES, baseline="a")
    code = """
import sys
from pathlib import Path
from benchlab.ui import app
from benchlab.ui import tables as views
from benchlab.ui.library import Library

for folder in sys.argv[1:]:
    library = Library([Path(folder)])
    cache = app._Cache()
    seen = []
    def quiet():
        (b,) = library.benchmarks()
        made = cache._values.get(("numbers", b.key))
        seen.append(("pandas" in sys.modules, made is not None and made.value == views.kept_numbers(b.folder)))
    app._warm(library, cache, quiet)
    (b,) = library.benchmarks()
    print(seen, cache._values[("numbers", b.key)].value == views.computed_numbers(b.folder))
"""
    out = subprocess.run([sys.executable, "-c", code, str(reported), str(never)], capture_output=True, text=True,
                         check=True).stdout.splitlines()
    assert out == ["[(False, True)] True", "[] True"]


def test_the_warm_up_waits_until_no_page_has_been_served_for_a_while():
    from benchlab.ui.app import _Activity

    now = [0.0]
    activity = _Activity(clock=lambda: now[0])

    def sleep(s: float) -> None:
        now[0] += s

    activity.enter()  # a page being served: the wait runs to its limit
    activity.wait_quiet(1.0, 3.0, sleep)
    assert now[0] == pytest.approx(3.0, abs=0.06)
    activity.leave()
    left = now[0]
    activity.wait_quiet(1.0, 30.0, sleep)  # then one quiet second after it ended
    assert now[0] - left == pytest.approx(1.0, abs=0.06)


def test_tables_another_build_of_benchlab_computed_are_computed_again(tmp_path: Path, monkeypatch):
    # The release string stays 0.1.0 between two development builds; the key holds the source.
    folder = _reported(tmp_path)
    assert views.kept_numbers(folder) is not None
    monkeypatch.setattr(report_tables, "_installed_code_digest", lambda: "0" * 64)
    assert views.kept_numbers(folder) is None


def test_the_code_digest_moves_with_any_byte_or_name_of_the_source_and_with_the_numeric_libraries(
        tmp_path: Path, monkeypatch):
    import shutil

    import benchlab

    copy = tmp_path / "benchlab"
    shutil.copytree(Path(benchlab.__file__).parent, copy, ignore=shutil.ignore_patterns("__pycache__"))
    digest = report_tables.code_digest(copy)
    assert report_tables.code_digest(copy) == digest == report_tables.code_digest()
    (copy / "__pycache__").mkdir(exist_ok=True)
    (copy / "__pycache__" / "x.pyc").write_bytes(b"compiled")  # not source: no change
    assert report_tables.code_digest(copy) == digest
    source = copy / "stats" / "describe.py"
    text = source.read_bytes()
    source.write_bytes(text + b"\n")  # one byte more
    assert report_tables.code_digest(copy) != digest
    source.write_bytes(text)
    assert report_tables.code_digest(copy) == digest
    source.rename(copy / "stats" / "describe2.py")
    assert report_tables.code_digest(copy) != digest
    source.with_name("describe2.py").rename(source)
    import importlib.metadata

    real = importlib.metadata.version
    monkeypatch.setattr(importlib.metadata, "version", lambda name: "0.0" if name == "scipy" else real(name))
    assert report_tables.code_digest(copy) != digest
