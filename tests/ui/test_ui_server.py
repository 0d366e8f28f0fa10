"""`benchlab ui` as a real server on 127.0.0.1: read-only, confined, guarded by its token, live."""

from __future__ import annotations

import hashlib
import os
import re
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import psutil
import pytest
from ui_testkit import SLOW_SCRIPT, SLOW_SPEC, free_port, get, get_json, stop, ui_server, wait_for

from benchlab_testing import run_cli

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def finished(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A sweep run to its end: 2 configs x 4 seeds, seed 3 of `bad` failed."""
    root = tmp_path_factory.mktemp("ui")
    (root / "run.py").write_text(SLOW_SCRIPT)
    (root / "bench.yaml").write_text(SLOW_SPEC.format(seeds=4, steps=3, pause=0))
    done = run_cli("run", "bench.yaml", "-j", "2", "--results", "out/slowbench", cwd=root, timeout=300)
    assert done.returncode == 1, done.stderr  # one run failed on purpose
    return root / "out" / "slowbench"


def _tree(folder: Path) -> dict[str, tuple[int, int, str]]:
    """Every file under ``folder`` but SQLite's shared-memory and WAL files: size, mtime, digest."""
    out = {}
    for p in sorted(folder.rglob("*")):
        if p.is_file() and not p.name.endswith(("-shm", "-wal")):
            out[str(p.relative_to(folder))] = (p.stat().st_size, p.stat().st_mtime_ns,
                                               hashlib.sha256(p.read_bytes()).hexdigest())
    return out


def _run_ids(folder: Path) -> list[str]:
    con = sqlite3.connect(f"file:{folder / 'benchlab.db'}?mode=ro", uri=True)
    try:
        return [r for (r,) in con.execute("SELECT run_id FROM runs ORDER BY rowid")]
    finally:
        con.close()


def test_every_page_answers_and_no_file_of_the_results_folder_changes(finished: Path):
    before = _tree(finished)
    rid = _run_ids(finished)[0]
    with ui_server(finished) as (port, _):
        for path in ("/", "/b/slowbench", "/b/slowbench/curves", f"/b/slowbench/runs/{rid}",
                     f"/b/slowbench/runs/{rid}/log", f"/b/slowbench/runs/{rid}/files/train.log",
                     "/b/slowbench/curves.json?task=walk&metric=reward", "/api/changes", "/static/plotly.min.js"):
            status, _, body = get(port, path)
            assert status == 200, (path, status, body[:200])
    assert _tree(finished) == before


def test_a_ledger_opened_by_the_server_refuses_writes(finished: Path):
    from benchlab.ledger import Store, read_only_ledgers

    with read_only_ledgers(), Store.open(finished) as store:
        with pytest.raises(sqlite3.OperationalError, match="readonly"):
            store._set_meta(name="changed")
    with Store.open(finished) as store:
        assert store._meta()["name"] == "slowbench"


@pytest.mark.parametrize("path", [
    "/b/slowbench/runs/../benchlab.db",
    "/b/slowbench/runs/..%2Fbenchlab.db/files/x",
    "/b/slowbench/runs/{rid}/files/../../benchlab.db",
    "/b/slowbench/runs/{rid}/files/..%2F..%2Fbenchlab.db",
    "/b/slowbench/runs/{rid}/files/%2Fetc%2Fpasswd",
    "/b/slowbench/runs/{rid}/files//etc/passwd",
    "/b/slowbench/runs/{rid}/files/link-out",
    "/b/slowbench/runs/..%2F..%2F..%2Fetc/log",
    "/b/slowbench/runs/nosuchrun",
    "/b/slowbench/runs/{rid}/files/nosuchfile",
    "/b/..%2F..%2Fetc",
    "/static/..%2F..%2F__init__.py",
    "/static/../library.py",
])
def test_paths_outside_the_results_folders_get_404(finished: Path, path: str):
    rid = _run_ids(finished)[0]
    link = finished / "runs" / rid / "link-out"
    if not link.exists():
        link.symlink_to("/etc/passwd")
    try:
        with ui_server(finished) as (port, _):
            status, _, body = get(port, path.format(rid=rid))
    finally:
        link.unlink()
    assert status == 404, body[:300]
    assert b"root:" not in body and b"SQLite format" not in body


def test_a_run_file_inside_its_folder_is_served(finished: Path):
    rid = _run_ids(finished)[0]
    with ui_server(finished) as (port, _):
        status, _, body = get(port, f"/b/slowbench/runs/{rid}/files/train.log")
    assert status == 200
    assert body == (finished / "runs" / rid / "train.log").read_bytes()


def test_binding_another_address_without_a_token_is_refused(finished: Path):
    done = run_cli("ui", str(finished), "--host", "0.0.0.0", "--port", "1")
    assert done.returncode == 2
    assert "refusing to listen on 0.0.0.0 without a token" in done.stderr
    assert "Traceback" not in done.stderr


def test_it_binds_loopback_by_default(finished: Path):
    with ui_server(finished, host=None) as (port, proc):
        line = proc.stderr.readline()
        assert f"on http://127.0.0.1:{port}/" in line
        listening = [c for c in psutil.Process(proc.pid).net_connections("tcp") if c.status == "LISTEN"]
    assert [c.laddr.ip for c in listening] == ["127.0.0.1"]


def test_with_a_token_only_the_bearer_or_the_one_time_url_gets_in(finished: Path):
    token = "s3cret-token-42"
    with ui_server(finished, token=token) as (port, proc):
        assert get(port, "/")[0] == 401
        assert get(port, "/api/changes")[0] == 401
        assert get(port, "/", {"Authorization": "Bearer wrong-token"})[0] == 401
        assert get(port, "/", {"Authorization": f"Bearer {token}"})[0] == 200
        # The one-time URL the command printed sets a cookie, once.
        line = ""
        deadline = time.monotonic() + 30
        while "login/" not in line and time.monotonic() < deadline:
            line = proc.stderr.readline()
        code = re.search(r"/login/(\S+)", line).group(1)
        status, headers, _ = get(port, f"/login/{code}")
        assert status == 303
        cookie = headers["set-cookie"].split(";")[0]
        assert token not in cookie
        assert get(port, "/b/slowbench", {"Cookie": cookie})[0] == 200
        assert get(port, f"/login/{code}")[0] == 401  # used already
        assert get(port, "/", {"Cookie": "benchlab_ui=guessed"})[0] == 401
        # ?token= logs in too, and the token leaves the address.
        status, headers, _ = get(port, f"/b/slowbench?token={token}")
        assert status == 303 and headers["location"] == "/b/slowbench"
        assert "benchlab_ui=" in headers["set-cookie"]


def test_the_change_feed_moves_when_the_ledger_changes_and_only_then(finished: Path, tmp_path: Path):
    import shutil

    from benchlab.ledger import Store

    copy = tmp_path / "slowbench"
    shutil.copytree(finished, copy)
    with ui_server(copy) as (port, _):
        first = get_json(port, "/api/changes")["benchmarks"]["slowbench"]
        time.sleep(0.6)
        assert get_json(port, "/api/changes")["benchmarks"]["slowbench"] == first
        with Store.open(copy) as store:
            store._set_meta(description="touched")
        started = time.monotonic()
        wait_for(lambda: get_json(port, "/api/changes")["benchmarks"]["slowbench"] > first, timeout=5, every=0.1)
        assert time.monotonic() - started < 2


def test_a_root_folder_shows_every_benchmark_under_it(finished: Path, tmp_path: Path):
    import shutil

    shutil.copytree(finished, tmp_path / "one")
    shutil.copytree(finished, tmp_path / "two")
    with ui_server(tmp_path) as (port, _):
        status, _, body = get(port, "/")
        assert status == 200
        assert b'href="/b/one"' in body and b'href="/b/two"' in body
        # A sweep started after the dashboard shows up without a restart.
        shutil.copytree(finished, tmp_path / "three")
        wait_for(lambda: b'href="/b/three"' in get(port, "/")[2], timeout=10)


def test_the_benchmark_page_shows_the_failure_with_its_log_tail(finished: Path):
    with ui_server(finished) as (port, _):
        status, _, body = get(port, "/b/slowbench")
    text = body.decode()
    assert status == 200
    failures = text[text.index("<h2>Failures</h2>"):text.index('id="results"')]
    assert "<b>exception</b> · 1 run · ValueError: seed is cursed" in failures
    assert "walk/bad/s3" in failures
    assert "ValueError: seed is cursed" in text
    assert text.count('data-state="failed"') == 1
    assert text.count('data-state="completed"') == 7


def test_the_curves_data_hold_the_mean_and_the_95_band_of_the_seeds(finished: Path):
    from scipy import stats

    with ui_server(finished) as (port, _):
        data = get_json(port, "/b/slowbench/curves.json?task=walk&metric=reward")
    base = next(c for c in data["configs"] if c["name"] == "base")
    # SLOW_SCRIPT logs base * step / steps + seed / 100 at steps 10, 20, 30; seeds 0-3 completed.
    values = np.array([[0.5 * k / 3 + seed / 100 for k in (1, 2, 3)] for seed in range(4)])
    assert base["n"] == 4 and base["x"] == [10.0, 20.0, 30.0]
    assert base["mean"] == pytest.approx(values.mean(axis=0))
    low, high = stats.t.interval(0.95, df=3, loc=values.mean(axis=0), scale=stats.sem(values, axis=0))
    assert base["low"] == pytest.approx(low) and base["high"] == pytest.approx(high)
    assert sorted(s["seed"] for s in base["seeds"]) == [0, 1, 2, 3]
    # `bad` lost seed 3: its band is over the three that completed.
    bad = next(c for c in data["configs"] if c["name"] == "bad")
    assert bad["n"] == 3


def test_a_running_seed_is_drawn_from_its_metrics_jsonl_beside_the_band_of_the_completed(finished: Path,
                                                                                      tmp_path: Path):
    import json
    import shutil

    from benchlab.ui import views
    from benchlab.ui.library import Library

    folder = tmp_path / "slowbench"
    shutil.copytree(finished, folder)
    con = sqlite3.connect(folder / "benchlab.db")
    try:  # seed 2 of `base` as if it were still running: its curve comes from metrics.jsonl
        con.execute("UPDATE runs SET status = 'running' WHERE config = 'base' AND seed = 2")
        con.commit()
    finally:
        con.close()
    curves = views.curves_data(Library([folder]).benchmarks()[0], "walk", "reward")
    assert (curves.task, curves.metric, curves.goal) == ("walk", "reward", "max")
    base = next(c for c in curves.configs if c.name == "base")
    # SLOW_SCRIPT logs 0.5 * step / 3 + seed / 100 at steps 10, 20, 30.
    completed = np.array([[0.5 * k / 3 + seed / 100 for k in (1, 2, 3)] for seed in (0, 1, 3)])
    assert base.n == 3 and base.mean == pytest.approx(completed.mean(axis=0))
    (running,) = [s for s in base.seeds if s.state == "running"]
    assert running.seed == 2 and running.x == [10.0, 20.0, 30.0]
    assert running.y == pytest.approx([0.5 * k / 3 + 0.02 for k in (1, 2, 3)])
    assert sorted(s.seed for s in base.seeds if s.state == "completed") == [0, 1, 3]
    # The page's script reads these keys, at each level of the JSON.
    data = json.loads(json.dumps(curves.to_json()))
    assert list(data) == ["task", "metric", "goal", "configs"]
    assert list(data["configs"][0]) == ["name", "color", "n", "x", "t", "mean", "low", "high", "seeds"]
    assert list(data["configs"][0]["seeds"][0]) == ["seed", "run_id", "state", "x", "t", "y"]


def test_a_failed_runs_page_says_it_failed_rather_than_no_metric_yet(finished: Path):
    con = sqlite3.connect(f"file:{finished / 'benchlab.db'}?mode=ro", uri=True)
    try:
        (failed,) = con.execute("SELECT run_id FROM runs WHERE status = 'failed'").fetchone()
        (done,) = con.execute("SELECT run_id FROM runs WHERE status = 'completed' LIMIT 1").fetchone()
    finally:
        con.close()
    with ui_server(finished) as (port, _):
        status, _, body = get(port, f"/b/slowbench/runs/{failed}")
        _, _, other = get(port, f"/b/slowbench/runs/{done}")
    text = body.decode()
    assert status == 200
    assert "No metric yet" not in text
    assert "No metric: the run failed before it reported one" in text
    assert "No metric" not in other.decode()  # a completed run shows its metrics


def test_the_curves_use_the_reports_palette_in_config_order(finished: Path):
    with ui_server(finished) as (port, _):
        data = get_json(port, "/b/slowbench/curves.json?task=walk&metric=reward")
    # Okabe–Ito's first colours, as the report's figures give them to the first configs.
    assert [(c["name"], c["color"]) for c in data["configs"]] == [("base", "#0072B2"), ("bad", "#E69F00")]


def test_the_server_runs_at_the_lowest_cpu_priority_unless_told_not_to(finished: Path):
    # Field 19 of /proc/PID/stat is the process's nice value.
    def nice_of(pid: int) -> int:
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[16])

    # At nice 19 on a busy machine the server may take minutes to import the web stack and listen;
    # the niceness is what is checked, and it is set before those imports, so no wait for the port.
    args = [sys.executable, "-m", "benchlab", "ui", str(finished), "--port", str(free_port())]
    proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_for(lambda: proc.poll() is not None or nice_of(proc.pid) == 19, timeout=120)
        assert proc.poll() is None, f"benchlab ui exited {proc.returncode}"
    finally:
        stop(proc, timeout=15)
    with ui_server(finished) as (_, proc):  # the tests' default: --no-nice
        assert nice_of(proc.pid) == os.nice(0)
