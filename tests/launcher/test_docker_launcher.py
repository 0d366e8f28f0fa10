"""The launcher backend on a real Docker (Debian's dockerd, an image built here), with the
recipe of docs/launchers.md: a sweep with completions, a crash and a hang past its timeout;
benchlab killed mid-run and during the submit command, then run again; a status the rules do
not know; logs followed live. Containers are counted from Docker's own event log, which keeps
the creations of containers the recipe's cleanup has removed."""

from __future__ import annotations

import json
import os
import re
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import psutil
import pytest

from benchlab_testing import run_cli
from launcher_recipes import write_spec
from localdocker import LocalDocker

pytestmark = pytest.mark.slow

JOB = """\
echo "start $1 seed=$BENCHLAB_SEED"
case "$1" in
  crash) echo "Traceback (most recent call last):"; echo "ValueError: cursed"; exit 3;;
  hang) sleep 600;;
  hold) while [ -e hold ]; do sleep 0.1; done;;
esac
echo "{\\"score\\": 0.5$BENCHLAB_SEED}" > "$BENCHLAB_RUN_DIR/metrics.json"
echo done
"""


def bench(root: Path, docker: LocalDocker, body: str, **launcher: Any) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / "job.sh").write_text(JOB)
    return write_spec(root, "docker-recipe", body, variables={"image": docker.image}, **launcher)


def ledger(results: Path, sql: str) -> list[tuple[Any, ...]]:
    conn = sqlite3.connect(results / "benchlab.db", timeout=30)
    try:
        return conn.execute(sql).fetchall()
    finally:
        conn.close()


def attempts(results: Path) -> list[dict[str, Any]]:
    rows = ledger(results, "SELECT r.name, a.number, a.status, a.failure_class, a.error, p.job_id, p.state"
                           " FROM attempts a JOIN runs r USING (run_id) LEFT JOIN placements p USING (attempt_id)"
                           " ORDER BY a.attempt_id")
    keys = ("run", "number", "status", "failure_class", "error", "job_id", "state")
    return [dict(zip(keys, r, strict=True)) for r in rows]


def created(docker: LocalDocker, since: float) -> list[dict[str, str]]:
    """The attributes (name, labels) of each container Docker created since ``since``, removed ones too."""
    out = docker.docker("events", "--since", f"{since:.3f}", "--until", f"{time.time() + 1:.3f}",
                        "--filter", "type=container", "--filter", "event=create",
                        "--format", "{{json .Actor.Attributes}}", timeout=30).stdout
    return [json.loads(line) for line in out.splitlines() if line.strip()]


def wait_until(check: Any, timeout: float, what: str) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(0.2)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}")


def start_driver(spec: Path, results: Path, *args: str) -> subprocess.Popen[str]:
    env = {**os.environ, "COLUMNS": "200", "NO_COLOR": "1"}
    with open(spec.parent / "driver.log", "a") as log:
        return subprocess.Popen([sys.executable, "-m", "benchlab", "run", str(spec), "--results", str(results),
                                 "--no-report", *args], cwd=spec.parent, env=env, stdout=log,
                                stderr=subprocess.STDOUT, text=True)


def test_a_sweep_on_docker_records_completions_a_crash_and_a_hang_past_its_timeout(
        docker_daemon: LocalDocker, tmp_path: Path) -> None:
    spec = bench(tmp_path, docker_daemon, """
        name: journey
        tasks: [{name: t}]
        configs:
          - {name: ok, command: sh job.sh ok}
          - {name: crash, command: sh job.sh crash}
          - {name: hang, command: sh job.sh hang}
        seeds: 2
        metrics: {primary: score}
        resources: {gpus: 2}
        timeout: 3
        retries: 1
    """)
    out = tmp_path / "out"
    since = time.time()
    t0 = time.monotonic()
    proc = run_cli("run", str(spec), "-j", "6", "--results", str(out), "--no-report", cwd=tmp_path, timeout=240)
    wall = time.monotonic() - t0
    assert proc.returncode == 1, proc.stdout + proc.stderr  # runs failed: exit code 1
    rows = attempts(out)
    by_run: dict[str, list[dict[str, Any]]] = {}
    for r in rows:
        by_run.setdefault(r["run"], []).append(r)
    for seed in (0, 1):
        (ok,) = by_run[f"t/ok/s{seed}"]
        assert ok["status"] == "completed" and ok["state"] == "COMPLETED"
        # An exception: retried once (retries: 1), both attempts read from the container's log.
        crash = by_run[f"t/crash/s{seed}"]
        assert [(a["status"], a["failure_class"]) for a in crash] == [("failed", "exception")] * 2
        assert crash[0]["error"] == "ValueError: cursed"
        # A timeout is not retried by default; the container was killed at 3 s, not left to sleep 600.
        (hang,) = by_run[f"t/hang/s{seed}"]
        assert (hang["status"], hang["failure_class"], hang["error"]) == ("failed", "timeout", "timed out after 3s")
    assert wall < 120
    scores = dict(ledger(out, "SELECT r.name, m.value FROM metrics m JOIN runs r USING (run_id)"
                              " WHERE m.metric = 'score'"))
    assert scores == {"t/ok/s0": pytest.approx(0.50), "t/ok/s1": pytest.approx(0.51)}
    # One container per attempt, named after it, each given the run's GPU count and timeout.
    made = created(docker_daemon, since)
    assert len(made) == len(rows) == 8
    assert len({m["name"] for m in made}) == 8
    assert {(m["gpus"], m["timeout_s"]) for m in made} == {("2", "3")}
    # The recipe's cleanup removed them all.
    assert docker_daemon.containers("benchlab-journey-") == []
    status = run_cli("status", str(out), cwd=tmp_path).stdout
    assert "2 completed, 4 failed" in status
    logs = run_cli("logs", "t/crash/s0", "--results", str(out), cwd=tmp_path).stdout
    assert "start crash seed=0" in logs and "ValueError: cursed" in logs


def test_benchlab_killed_mid_run_and_run_again_follows_its_containers_without_starting_them_again(
        docker_daemon: LocalDocker, tmp_path: Path) -> None:
    spec = bench(tmp_path, docker_daemon, """
        name: resumed
        tasks: [{name: t}]
        configs: [{name: a}, {name: b}]
        seeds: 2
        command: sh job.sh hold
        metrics: {primary: score}
    """)
    (tmp_path / "hold").touch()
    out = tmp_path / "out"
    since = time.time()
    driver = start_driver(spec, out, "-j", "2")
    try:
        def two_running() -> bool:
            if not (out / "benchlab.db").exists():
                return False
            try:
                states = ledger(out, "SELECT state FROM placements")
            except sqlite3.OperationalError:
                return False
            return [s for (s,) in states].count("RUNNING") == 2
        wait_until(two_running, 90, "two containers running")
        status = run_cli("status", str(out), cwd=tmp_path).stdout
        assert status.count("running t/") == 2, status
        assert re.search(r"running t/\w/s\d \(attempt 1, job [0-9a-f]{64}, \d+s\)", status), status
    finally:
        driver.send_signal(signal.SIGKILL)
        driver.wait()
    before = {r["run"]: r["job_id"] for r in attempts(out) if not r["job_id"].startswith("intent:")}
    assert len(before) == 2
    # The journal holds each submitted job's id too, the ledger's copy for the moment before it has one.
    journal = {json.loads(p.read_text())["job_id"] for p in (out / ".launcher").glob("*.json")}
    assert set(before.values()) <= journal
    assert len(docker_daemon.containers("benchlab-resumed-")) == 2, "the containers outlive benchlab"
    (tmp_path / "hold").unlink()
    proc = run_cli("run", str(spec), "-j", "2", "--results", str(out), "--no-report", cwd=tmp_path, timeout=180)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    rows = attempts(out)
    assert [r["status"] for r in rows] == ["completed"] * 4
    assert len({r["run"] for r in rows}) == 4  # one attempt per run
    for run, job in before.items():
        assert next(r["job_id"] for r in rows if r["run"] == run) == job  # followed, not submitted again
    made = created(docker_daemon, since)
    assert len(made) == 4 and len({m["name"] for m in made}) == 4


@pytest.mark.parametrize("found_by", ["find", "journal"])
def test_benchlab_killed_during_the_submit_command_finds_the_container_again(
        docker_daemon: LocalDocker, tmp_path: Path, found_by: str) -> None:
    from launcher_recipes import recipe

    submit = recipe("docker-recipe")["launcher"]["submit"]
    # The submit command creates the container, then (while the file `slow` exists) lingers, so that
    # benchlab is killed after the container exists and before it has read the container's id.
    body = """
        name: window
        tasks: [{name: t}]
        configs: [{name: a}]
        seeds: 1
        command: sh job.sh ok
        metrics: {primary: score}
    """
    linger = " && if [ -e slow ]; then touch submitted; sleep 60; fi"
    spec = bench(tmp_path, docker_daemon, body, submit=submit + linger)
    (tmp_path / "slow").touch()
    out = tmp_path / "out"
    since = time.time()
    driver = start_driver(spec, out)
    try:
        wait_until(lambda: (tmp_path / "submitted").exists(), 90, "the submit command to create the container")
        lingering = psutil.Process(driver.pid).children(recursive=True)
    finally:
        driver.send_signal(signal.SIGKILL)
        driver.wait()
    for p in lingering:
        try:
            p.kill()
        except psutil.Error:
            pass
    (intent,) = attempts(out)
    name = intent["job_id"].removeprefix("intent:")
    assert intent["job_id"].startswith("intent:benchlab-window-")  # the ledger knows the intent only
    assert not list((out / ".launcher").glob("*.json"))  # nor did the journal get its id
    (tmp_path / "slow").unlink()
    if found_by == "journal":
        # As a benchlab killed a moment later would have left it: the id in the journal, which is then
        # the only way to the container (the spec has no `find`).
        spec = bench(tmp_path, docker_daemon, body, find=None)
        container = docker_daemon.docker("inspect", "-f", "{{.Id}}", name).stdout.strip()
        (out / ".launcher").mkdir(exist_ok=True)
        (out / ".launcher" / f"{name}.json").write_text(json.dumps({"job_id": container}))
    proc = run_cli("run", str(spec), "--results", str(out), "--no-report", cwd=tmp_path, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (only,) = attempts(out)
    assert only["status"] == "completed" and not only["job_id"].startswith("intent:")
    made = created(docker_daemon, since)
    assert [m["name"] for m in made] == [name]


def test_a_status_output_no_rule_knows_fails_the_attempt_with_that_output_and_stops_the_container(
        docker_daemon: LocalDocker, tmp_path: Path) -> None:
    from launcher_recipes import recipe

    states = [r for r in recipe("docker-recipe")["launcher"]["states"] if r["state"] != "running"]
    spec = bench(tmp_path, docker_daemon, """
        name: unknown-state
        tasks: [{name: t}]
        configs: [{name: a}]
        seeds: 1
        command: sh job.sh hang
        metrics: {primary: score}
    """, states=states, unmatched_grace_s=2)
    out = tmp_path / "out"
    since = time.time()
    proc = run_cli("run", str(spec), "--results", str(out), "--no-report", cwd=tmp_path, timeout=120)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    (only,) = attempts(out)
    assert only["status"] == "failed" and only["failure_class"] == "launch-error"
    assert "matched no rule of launcher.states for 2s: state=running exit=0" in only["error"]
    # Never shown as running, and not left running either.
    assert only["state"] != "RUNNING"
    events = docker_daemon.docker("events", "--since", f"{since:.3f}", "--until", f"{time.time() + 1:.3f}",
                                  "--filter", "event=kill", "--format", "{{.Actor.Attributes.name}}").stdout
    assert events.split() == [m["name"] for m in created(docker_daemon, since)]


def test_logs_followed_reach_the_runs_log_while_the_container_runs(docker_daemon: LocalDocker, tmp_path: Path) -> None:
    spec = bench(tmp_path, docker_daemon, """
        name: follow
        tasks: [{name: t}]
        configs: [{name: a}]
        seeds: 1
        command: sh job.sh hold
        metrics: {primary: score}
    """, logs="docker logs -f {job_id}", follow_logs=True)
    (tmp_path / "hold").touch()
    out = tmp_path / "out"
    driver = start_driver(spec, out)
    try:
        log = wait_until(lambda: next((p for p in out.glob("runs/*/train.log") if "start hold" in p.read_text()),
                                      None), 90, "the container's first line in the run's log")
        assert "done" not in log.read_text()  # it is still running: the line came while it ran
        (tmp_path / "hold").unlink()
        assert driver.wait(90) == 0, (tmp_path / "driver.log").read_text()
    finally:
        if driver.poll() is None:
            driver.kill()
    text = log.read_text()
    assert text.count("start hold") == 1 and "done" in text
