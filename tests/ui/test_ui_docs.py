"""docs/ui.md says what the command does: its messages, its addresses, its screenshots."""

from __future__ import annotations

import re
import struct
from pathlib import Path

import pytest

from benchlab_testing import run_cli

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "ui.md"


def test_the_refusal_quoted_in_the_doc_is_the_commands(tmp_path: Path):
    quoted = next(ln for ln in DOC.read_text().splitlines() if ln.startswith("error: refusing to listen"))
    (tmp_path / "benchlab.db").write_bytes(b"")
    done = run_cli("ui", str(tmp_path), "--host", "0.0.0.0")
    assert done.returncode == 2
    assert " ".join(done.stderr.split()) == quoted


def test_every_screenshot_the_doc_shows_is_a_small_png():
    images = re.findall(r"!\[[^\]]*\]\((images/[^)]+)\)", DOC.read_text())
    assert len(images) >= 3
    for rel in images:
        data = (ROOT / "docs" / rel).read_bytes()
        assert data[:8] == b"\x89PNG\r\n\x1a\n", rel
        width, height = struct.unpack(">II", data[16:24])
        assert width >= 800 and height >= 300, (rel, width, height)
        assert len(data) < 250_000, (rel, len(data))


@pytest.mark.slow
def test_the_addresses_in_the_doc_answer(tmp_path: Path):
    from ui_testkit import SLOW_SCRIPT, SLOW_SPEC, get, ui_server

    (tmp_path / "run.py").write_text(SLOW_SCRIPT)
    (tmp_path / "bench.yaml").write_text(SLOW_SPEC.format(seeds=2, steps=3, pause=0))
    run_cli("run", "bench.yaml", "--results", "out/slowbench", "--no-report", cwd=tmp_path, timeout=300)
    import sqlite3

    con = sqlite3.connect(tmp_path / "out" / "slowbench" / "benchlab.db")
    (rid,) = con.execute("SELECT run_id FROM runs WHERE status = 'completed' LIMIT 1").fetchone()
    con.close()
    addresses = set(re.findall(r"`(/[^`]*)`", DOC.read_text()))
    filled = {a.replace("<name>", "slowbench").replace("<run id>", rid).replace("<file>", "train.log")
              .replace("task=…", "task=walk").replace("metric=…", "metric=reward") for a in addresses
              if not a.startswith("/login")}
    filled = {a for a in filled if " " not in a}
    assert {"/", "/api/changes", f"/b/slowbench/runs/{rid}"} <= filled and len(filled) >= 8
    with ui_server(tmp_path / "out") as (port, _):
        for address in sorted(filled):
            status, _, body = get(port, address)
            assert status == 200, (address, status, body[:200])
