"""A ledger written by a newer benchlab (a schema version above this one's) is refused when it is
opened, to read or to write, with one line saying so, and is never written: not by `run`, not by
`status`, not by `collect --rebuild`."""

from __future__ import annotations

import hashlib
import json
import sqlite3
import textwrap
from pathlib import Path

import pytest

from benchlab.errors import NewerLedger
from benchlab.ledger import DB_NAME, SCHEMA_VERSION, Store
from benchlab.ledger.migrations import MIGRATIONS
from benchlab_testing import run_cli

SPEC = """
name: newer
tasks: [{name: t1}]
configs: [{name: a}]
seeds: 1
command: python run.py
metrics: {primary: score}
"""


def _digest(folder: Path) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(folder.glob(f"{DB_NAME}*"))}


@pytest.fixture
def newer(tmp_path: Path) -> tuple[Path, Path]:
    """A spec's folder whose results ledger says it was written at schema SCHEMA_VERSION + 3."""
    (tmp_path / "bench.yaml").write_text(textwrap.dedent(SPEC).lstrip())
    (tmp_path / "run.py").write_text("import benchlab\nbenchlab.log(score=1.0)\n")
    run_cli("run", "bench.yaml", "--no-report", cwd=tmp_path, check=True)
    folder = tmp_path / "results" / "newer"
    conn = sqlite3.connect(folder / DB_NAME)
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.execute("PRAGMA journal_mode=DELETE")
    conn.execute("UPDATE meta SET value = ? WHERE key = 'schema_version'", (json.dumps(SCHEMA_VERSION + 3),))
    conn.commit()
    conn.close()
    return tmp_path, folder


def test_the_schema_version_is_one_past_the_last_migration_step():
    # A step appended without moving the version would let an older benchlab write a newer ledger.
    assert SCHEMA_VERSION == MIGRATIONS[-1].number + 1


def test_a_new_ledger_records_this_schema_version(tmp_path: Path):
    Store.create(tmp_path).close()
    conn = sqlite3.connect(tmp_path / DB_NAME)
    (value,) = conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
    conn.close()
    assert json.loads(value) == SCHEMA_VERSION


@pytest.mark.parametrize("read_only", [True, False, None])
def test_opening_a_newer_ledger_raises_and_leaves_it_as_it_was(newer, read_only):
    _, folder = newer
    before = _digest(folder)
    with pytest.raises(NewerLedger) as raised:
        Store.open(folder, read_only=read_only)
    assert raised.value.schema == SCHEMA_VERSION + 3
    with pytest.raises(NewerLedger):
        Store.create(folder)  # what `benchlab run` does with its folder
    assert _digest(folder) == before


def test_the_commands_refuse_it_in_one_line_and_write_nothing(newer):
    root, folder = newer
    before = _digest(folder)
    expected = f"written by a newer benchlab (schema {SCHEMA_VERSION + 3}); upgrade benchlab"
    for args, cwd in ((("status", str(folder)), None), (("run", "bench.yaml", "--no-report"), root),
                      (("collect", str(folder), "--rebuild"), None), (("report", str(folder)), None)):
        proc = run_cli(*args, cwd=cwd)
        assert proc.returncode == 2, (args, proc.stdout, proc.stderr)
        assert expected in " ".join(proc.stderr.split()), (args, proc.stderr)
        assert "Traceback" not in proc.stderr
    assert _digest(folder) == before
    assert not list(folder.glob(f"{DB_NAME}.bak-*"))  # the rebuild did not set it aside either
