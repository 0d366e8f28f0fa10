"""The report's tables of a folder never reported are computed, while the dashboard starts, by a
process of their own (benchlab.ui.first_tables); the dashboard shows them only while they are the
tables of the folder as it is, and computes them itself otherwise."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import psutil
import pytest
from report_world import add_completed_run, build_store_world
from ui_testkit import get, ui_server, wait_for

from benchlab.names import report_tables
from benchlab.names.results_files import report_tables_file
from benchlab.report import write_report
from benchlab.ui import tables
from benchlab.ui.first_tables import FirstTables

VALUES = {("walk", "a"): [0.1, 0.2, 0.4], ("walk", "b"): [0.3, 0.5, 0.6], ("run", "a"): [1.0, 1.2, 1.1],
          ("run", "b"): [1.4, 1.3, 1.5]}


def _refuse_computing(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(folder: Path) -> None:
        raise AssertionError("the tables were computed in the dashboard's process")

    monkeypatch.setattr(tables, "computed_numbers", refuse)


def test_the_worker_prints_the_tables_of_each_folder_never_reported_under_the_key_of_what_it_read(tmp_path: Path):
    never = build_store_world(tmp_path / "root" / "never", VALUES, baseline="a")
    reported = build_store_world(tmp_path / "root" / "reported", VALUES, baseline="b")
    write_report(reported, plots=False, html=False)
    done = subprocess.run([sys.executable, "-m", "benchlab.ui.first_tables", str(tmp_path / "root")],
                          capture_output=True, text=True, timeout=300, check=True)
    said = {Path(d["folder"]).name: d["tables"] for d in map(json.loads, done.stdout.splitlines())}
    assert said.keys() == {"never", "reported"}
    assert said["reported"] is None  # the report kept current tables: nothing to compute
    shown = report_tables.decode(said["never"], tables.current_key(never))
    assert shown is not None and shown == tables.computed_numbers(never)
    assert shown.baseline == "a" and {t.name for t in shown.task_tables} == {"walk", "run"}
    assert not report_tables_file(never).exists()  # nothing written


def test_the_dashboard_shows_the_workers_tables_without_computing_them(tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch):
    folder = build_store_world(tmp_path / "res", VALUES, baseline="a")
    expected = tables.computed_numbers(folder)
    first = FirstTables.start([folder])
    try:
        _refuse_computing(monkeypatch)
        assert tables.report_numbers(folder, first) == expected
    finally:
        first.close()


def test_tables_of_a_folder_that_changed_after_the_worker_read_it_are_computed_again(tmp_path: Path):
    folder = build_store_world(tmp_path / "res", VALUES, baseline="a")
    first = FirstTables.start([folder])
    first.wait()
    add_completed_run(folder, "walk", "b", 7, 0.9)  # after the worker's read: its tables are of the folder before
    shown = tables.report_numbers(folder, first)
    assert shown == tables.computed_numbers(folder)
    walk = next(t for t in shown.task_tables if t.name == "walk")
    row = next(r for r in walk.rows if r.config.split()[0] == "b")
    assert row.cells[[c.name for c in walk.columns].index("seeds")].startswith("4")  # the new run counts


def test_each_folders_tables_are_given_once_and_a_worker_that_ended_without_them_gives_none(tmp_path: Path):
    folder = build_store_world(tmp_path / "res", VALUES, baseline="a")
    first = FirstTables.start([folder])
    key = tables.current_key(folder)
    assert first.take(folder, key) is not None
    assert first.take(folder, key, timeout=5) is None  # taken: the dashboard's cache holds it now
    broken = FirstTables.start([tmp_path / "no such folder"])  # the worker fails at once
    assert broken.take(folder, key, timeout=60) is None
    assert tables.report_numbers(folder, broken) == tables.computed_numbers(folder)


def test_benchlab_ui_answers_the_tables_of_a_folder_never_reported_and_leaves_no_worker(tmp_path: Path):
    folder = build_store_world(tmp_path / "res", VALUES, baseline="a")
    expected = tables.computed_numbers(folder)
    assert expected is not None
    with ui_server(folder) as (port, proc):
        status, _, body = get(port, "/b/res/numbers")

        def workers() -> list[psutil.Process]:
            found = []
            for c in psutil.Process(proc.pid).children(recursive=True):
                try:
                    if c.status() == psutil.STATUS_ZOMBIE or "benchlab.ui.first_tables" in " ".join(c.cmdline()):
                        found.append(c)
                except psutil.ZombieProcess:  # ended, not reaped
                    found.append(c)
                except psutil.NoSuchProcess:  # reaped meanwhile
                    pass
            return found

        # Done once its tables are printed, and reaped by the dashboard (no zombie for its life).
        assert wait_for(lambda: not workers(), timeout=30)
    assert status == 200
    page = body.decode()
    shown = [n for t in expected.task_tables for r in t.rows for c in r.cells for n in re.findall(r"\d+\.\d+", c)]
    assert len(shown) > 8 and all(n in page for n in shown)
    assert not report_tables_file(folder).exists()
