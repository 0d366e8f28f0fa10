"""After ``kill -9`` of ``benchlab serve`` and a quick restart, the job that was in flight ends.

Real processes: ``benchlab serve`` in a subprocess, killed with SIGKILL while a job runs against
a slow stub model. The restart is as quick as it gets: the next server, on the same state folder,
is already up (on another port) when the first is killed, so the dead server's heartbeat is
fresh when the next one starts (a start takes seconds; a supervisor restarts within them). A
trainer polling ``/status/{job_id}`` must see the job fail (it cannot finish: its process is gone)
well within the server's deadline, never "running" for ever (``test_server.py`` shows that sending
the request again then evaluates it).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
from evalsvc_testkit import TOKEN, ServerThread, free_port, write_config

from benchlab.evaluate.config import load_config
from benchlab.evaluate.stub import StubSettings, create_stub_app

AUTH = {"Authorization": f"Bearer {TOKEN}"}
DEADLINE_SECS = 40


def _serve(config: Path, port: int, log: Path) -> subprocess.Popen[bytes]:
    with log.open("ab") as out:
        return subprocess.Popen(
            [sys.executable, "-m", "benchlab", "serve", "--port", str(port), "--config", str(config),
             "--log-level", "warning"],
            stdout=out, stderr=subprocess.STDOUT, env={**os.environ, "BENCHLAB_EVAL_TOKEN": TOKEN},
        )


def _wait_until_up(url: str, proc: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 60
    while True:
        assert proc.poll() is None and time.monotonic() < deadline, "the server did not start"
        try:
            if httpx.get(f"{url}/health", timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            time.sleep(0.1)


@pytest.mark.slow
def test_a_job_in_flight_when_serve_is_killed_fails_soon_after_a_quick_restart(tmp_path):
    config_path = write_config(tmp_path, model={"concurrency": 1, "backoff_secs": 0.01, "request_timeout_secs": 5},
                               server={"deadline_secs": DEADLINE_SECS})
    stub = ServerThread(create_stub_app(load_config(config_path), StubSettings(seed=1, latency_secs=1.5))).start()
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    log = tmp_path / "serve.log"
    payload = {"rollout_id": 3, "router_url": stub.url, "benchmarks": [{"name": "arith"}]}
    first_port = free_port()
    first_url = f"http://127.0.0.1:{first_port}"
    first = _serve(config_path, first_port, log)
    second = None
    try:
        _wait_until_up(first_url, first)
        job = httpx.post(f"{first_url}/evaluate", json={**payload, "async": True}, headers=AUTH, timeout=10).json()
        second = _serve(config_path, port, log)
        _wait_until_up(url, second)
        while httpx.get(f"{stub.url}/stats", timeout=5).json()["requests"] < 2:  # the job is at it
            time.sleep(0.05)
        first.send_signal(signal.SIGKILL)
        first.wait(10)
        killed = time.monotonic()
        seen = []
        while time.monotonic() - killed < DEADLINE_SECS:
            status = httpx.get(f"{url}/status/{job['job_id']}", headers=AUTH, timeout=10).json()
            seen.append(status["status"])
            if status["status"] not in ("queued", "running"):
                break
            time.sleep(0.5)
        ended = time.monotonic() - killed
        print(f"job of the killed server: {seen[0]} at first, {status['status']} {ended:.1f}s after the kill")
        assert seen[0] == "running"  # the next server started while the job still looked alive
        assert status["status"] == "failed" and "send the request again" in status["error"]
        assert ended < 15  # the stale heartbeat (10 s) and one beat (2 s), well within the deadline
    finally:
        for proc in (first, second):
            if proc is not None and proc.poll() is None:
                proc.terminate()
                proc.wait(30)
        stub.stop()


def test_a_server_whose_job_was_marked_failed_cannot_write_its_end_later(tmp_path):
    from benchlab.evaluate.jobs import JobStatus, JobStore
    from benchlab.evaluate.protocol import EvaluateRequest

    path = tmp_path / "jobs.sqlite"
    frozen = JobStore(path, owner="frozen")
    request = EvaluateRequest.model_validate({"rollout_id": 1, "router_url": "http://127.0.0.1:1",
                                              "benchmarks": [{"name": "words"}]})
    job = frozen.create("key", request)
    frozen.set_running(job.job_id)
    time.sleep(0.05)
    other = JobStore(path, owner="other")
    assert other.mark_interrupted(stale_after=0.01) == 1  # its heartbeat stopped (the process froze)
    frozen.complete(job.job_id, {"job_id": job.job_id})  # type: ignore[typeddict-item]
    ended = other.get(job.job_id)
    assert ended is not None and ended.status == JobStatus.FAILED and ended.result is None
    frozen.close()
    other.close()
