"""The dashboard opens ledgers read-only while it serves a request, and only then: a program that
builds the dashboard's app in its own process still writes its ledgers."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from benchlab.ledger import Store, read_only_ledgers


def _ledger(folder: Path) -> Path:
    with Store.create(folder) as store:
        store._set_meta(name="tiny")
    return folder


def test_building_the_dashboard_in_process_leaves_ledgers_writable(tmp_path: Path):
    from benchlab.ui.app import create_app
    from benchlab.ui.library import Library

    folder = _ledger(tmp_path / "out")
    create_app(Library([folder]), warm_up=False)
    # In the same test, after the app is built: no fixture of the suite has reset anything yet.
    with Store.open(folder) as store:
        assert not store.read_only
        store._set_meta(name="renamed")
    with Store.open(folder) as store:
        assert store._meta()["name"] == "renamed"


def test_a_ledger_opened_while_the_dashboard_serves_a_request_is_read_only(tmp_path: Path,
                                                                           monkeypatch: pytest.MonkeyPatch):
    from starlette.testclient import TestClient

    from benchlab.ui.app import create_app
    from benchlab.ui.library import Library

    folder = _ledger(tmp_path / "out")
    opened: list[bool] = []
    real = Store.__init__

    def recording(self: Store, *args: object, **kwargs: object) -> None:
        real(self, *args, **kwargs)  # type: ignore[arg-type]
        opened.append(self.read_only)

    monkeypatch.setattr(Store, "__init__", recording)
    with TestClient(create_app(Library([folder]), warm_up=False), raise_server_exceptions=False) as client:
        # The numbers page reads the ledger through the report's reader, which opens it with no flag.
        client.get("/b/out/numbers")
        served = list(opened)
        with Store.open(folder) as store:  # this thread is no request: it may write
            store._set_meta(name="written beside the dashboard")
    assert served and all(served)
    assert opened[len(served)] is False


def test_read_only_ledgers_refuses_writes_inside_and_only_inside(tmp_path: Path):
    folder = _ledger(tmp_path / "out")
    with read_only_ledgers():
        with Store.open(folder) as store:
            with pytest.raises(sqlite3.OperationalError, match="readonly"):
                store._set_meta(name="changed")
    with Store.open(folder) as store:
        assert store._meta()["name"] == "tiny"
        store._set_meta(name="changed")
    with Store.open(folder) as store:
        assert store._meta()["name"] == "changed"
