"""The evaluation server stays up under a flood of half-open connections and of slow bodies.

``benchlab serve`` runs in a subprocess with a descriptor limit of 256, and
the test opens 480 connections from eight loopback addresses that send a
request line and never finish their headers. ``/health`` and
``/benchmarks`` from another address must keep answering, each flood
connection must be closed within the header timeout, the server must keep a
third of its descriptors free, and the log must stay short.

A second flood sends whole headers (no token) and then a body a byte at a
time, from eight loopback addresses, reopening every connection the server
closes, more than the server's connection cap: ``/health`` must answer
throughout, and each slow body must end within the body timeout.
"""

from __future__ import annotations

import logging
import os
import resource
import socket
import subprocess
import sys
import threading
import time

import httpx
import pytest
from evalsvc_testkit import free_port, write_config

from benchlab.evaluate.guard import RepeatFilter

FD_LIMIT = 256


def _limit_fds() -> None:
    resource.setrlimit(resource.RLIMIT_NOFILE, (FD_LIMIT, FD_LIMIT))


def _wait_until_up(url: str, proc: subprocess.Popen) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        assert proc.poll() is None, proc.stderr.read().decode() if proc.stderr else ""
        try:
            if httpx.get(f"{url}/health", timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            time.sleep(0.2)
    raise AssertionError("the server did not start")


def _half_open(source: str, port: int) -> socket.socket | None:
    s = socket.socket()
    s.settimeout(2)
    try:
        s.bind((source, 0))
        s.connect(("127.0.0.1", port))
        s.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n")  # no blank line: the headers never end
    except OSError:
        s.close()
        return None
    return s


class _DescriptorPeak:
    """The most descriptors a process held, sampled from /proc in a thread until ``stop()``."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.most = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(5)

    def _sample(self) -> None:
        while not self._stop.is_set():
            try:
                self.most = max(self.most, len(os.listdir(f"/proc/{self.pid}/fd")))
            except OSError:
                return


def _closed_by_peer(s: socket.socket) -> bool:
    try:
        return s.recv(1) == b""
    except TimeoutError:
        return False
    except OSError:
        return True


@pytest.mark.slow
def test_health_answers_through_a_flood_of_half_open_connections(tmp_path):
    port = free_port()
    config = write_config(tmp_path, server={"header_timeout_secs": 3, "max_connections_per_client": 64})
    log = tmp_path / "serve.log"
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "benchlab", "serve", "--no-auth", "--port", str(port), "--config", str(config),
             "--log-level", "warning"],
            stdout=out, stderr=subprocess.STDOUT, env=env, preexec_fn=_limit_fds,
        )
    url = f"http://127.0.0.1:{port}"
    flood: list[socket.socket] = []
    peak = _DescriptorPeak(proc.pid)
    try:
        _wait_until_up(url, proc)
        peak.start()
        for client in range(2, 10):  # 127.0.0.2 .. 127.0.0.9, 60 each: more than the server's descriptors
            for _ in range(60):
                s = _half_open(f"127.0.0.{client}", port)
                if s is not None:
                    flood.append(s)
        assert len(flood) >= 400
        answered = 0
        for _ in range(5):  # bounded: five checks during the flood
            health = httpx.get(f"{url}/health", timeout=5)
            benchmarks = httpx.get(f"{url}/benchmarks", timeout=5)
            answered += health.status_code == 200 and benchmarks.status_code == 200
            time.sleep(0.2)
        assert answered == 5
        # Every flood connection is closed by the server within the header timeout (3 s) and some slack.
        deadline = time.monotonic() + 20
        open_ones = list(flood)
        while open_ones and time.monotonic() < deadline:
            for s in open_ones:
                s.settimeout(0.01)
            open_ones = [s for s in open_ones if not _closed_by_peer(s)]
            time.sleep(0.2)
        assert open_ones == []
        peak.stop()
        # Accepting runs ahead of the guard by a few batches; a third of the limit stays free for them.
        assert 0 < peak.most <= FD_LIMIT * 2 // 3, f"the server held {peak.most} descriptors"
        assert httpx.get(f"{url}/health", timeout=5).status_code == 200
    finally:
        peak.stop()
        for s in flood:
            s.close()
        proc.terminate()
        proc.wait(30)
    lines = log.read_text(errors="replace").splitlines()
    assert not any("Too many open files" in line for line in lines), "\n".join(lines[:40])
    assert len(lines) < 60, lines[:10]


def test_a_repeated_log_line_is_written_once_per_window_then_counted():
    now = [0.0]
    repeat = RepeatFilter(window=10, clock=lambda: now[0])

    def record(msg: str) -> logging.LogRecord:
        return logging.LogRecord("asyncio", logging.ERROR, __file__, 1, msg, None, None)

    passed = [repeat.filter(record("socket.accept() out of system resource")) for _ in range(1000)]
    assert passed.count(True) == 1
    assert repeat.filter(record("another message"))
    now[0] = 10.5
    later = record("socket.accept() out of system resource")
    assert repeat.filter(later)
    assert "999 more like this" in later.getMessage()


class _SlowBodies:
    """Connections from ``sources`` that send a POST's headers, then its body a byte every ``pace`` seconds.

    Each source keeps ``per_source`` connections open, reopening those the server closes, until
    ``stop()`` or ``duration`` seconds (bounded: the flood ends by itself).
    """

    def __init__(self, port: int, sources: list[str], per_source: int, pace: float = 0.3,
                 duration: float = 30.0) -> None:
        self.port, self.sources, self.per_source, self.pace, self.duration = port, sources, per_source, pace, duration
        self.opened = self.refused = self.timeouts_408 = 0
        self.lifetimes: list[float] = []  # seconds from the headers to the server's close, per connection
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(30)

    def _open(self, source: str) -> tuple[socket.socket, float] | None:
        s = socket.socket()
        s.settimeout(2)
        try:
            s.bind((source, 0))
            s.connect(("127.0.0.1", self.port))
            s.sendall(f"POST /evaluate HTTP/1.1\r\nHost: 127.0.0.1:{self.port}\r\n"
                      "Content-Type: application/json\r\nContent-Length: 60000\r\n\r\n{".encode())
        except OSError:
            s.close()
            self.refused += 1
            return None
        s.setblocking(False)
        self.opened += 1
        return s, time.monotonic()

    def _closed(self, s: socket.socket) -> bool:
        try:
            data = s.recv(4096)
        except BlockingIOError:
            return False
        except OSError:
            return True
        if b" 408 " in data:
            self.timeouts_408 += 1
        return True  # an answer (the 408) or the end of the connection: either way it is over

    def _run(self) -> None:
        open_ones: dict[str, list[tuple[socket.socket, float]]] = {src: [] for src in self.sources}
        end = time.monotonic() + self.duration
        try:
            while not self._stop.is_set() and time.monotonic() < end:
                for src, conns in open_ones.items():
                    alive = []
                    for s, since in conns:
                        if self._closed(s):
                            self.lifetimes.append(time.monotonic() - since)
                            s.close()
                            continue
                        try:
                            s.send(b" ")
                            alive.append((s, since))
                        except OSError:
                            self.lifetimes.append(time.monotonic() - since)
                            s.close()
                    while len(alive) < self.per_source:
                        got = self._open(src)
                        if got is None:
                            break
                        alive.append(got)
                    open_ones[src] = alive
                time.sleep(self.pace)
        finally:
            for conns in open_ones.values():
                for s, _ in conns:
                    s.close()


@pytest.mark.slow
def test_health_answers_through_a_flood_of_slow_bodies_and_each_body_ends_at_its_timeout(tmp_path):
    port = free_port()
    # A cap of 48 connections against 8 sources x 12 slow bodies: the flood is always at the cap.
    config = write_config(tmp_path, server={"max_connections": 48, "max_connections_per_client": 12,
                                            "header_timeout_secs": 2, "body_timeout_secs": 2})
    log = tmp_path / "serve.log"
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "BENCHLAB_EVAL_TOKEN": "flood-test-token-0123456789"}
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "benchlab", "serve", "--port", str(port), "--config", str(config),
             "--log-level", "warning"],
            stdout=out, stderr=subprocess.STDOUT, env=env,
        )
    url = f"http://127.0.0.1:{port}"
    flood = _SlowBodies(port, [f"127.0.0.{i}" for i in range(2, 10)], per_source=12)
    latencies: list[float] = []
    try:
        _wait_until_up(url, proc)
        flood.start()
        time.sleep(1.0)  # the flood reaches the cap
        for _ in range(20):  # bounded: twenty checks over about eight seconds of flood
            start = time.monotonic()
            health = httpx.get(f"{url}/health", timeout=5)
            assert health.status_code == 200
            latencies.append(time.monotonic() - start)
            time.sleep(0.4)
    finally:
        flood.stop()
        proc.terminate()
        proc.wait(30)
    latencies.sort()
    print(f"slow-body flood: {flood.opened} connections opened from 8 sources ({flood.refused} refused at once), "
          f"{flood.timeouts_408} answered 408, {len(flood.lifetimes)} closed by the server; longest life "
          f"{max(flood.lifetimes):.1f}s; /health {len(latencies)}/20 answered, median "
          f"{latencies[len(latencies) // 2] * 1000:.0f} ms, max {latencies[-1] * 1000:.0f} ms")
    assert len(latencies) == 20  # each within its 5 s timeout (a refused or dropped connection raises)
    assert flood.opened > 48 * 2  # the server freed its connections again and again
    # A slow body ends by its timeout (2 s; the connection goes a second later at most), or sooner when
    # the cap makes room for a newer connection; the slack is for a loaded machine's event loop.
    assert flood.lifetimes and max(flood.lifetimes) < 2 + 1 + 4
    lines = log.read_text(errors="replace").splitlines()
    assert len(lines) < 60, lines[:10]


@pytest.mark.slow
def test_a_body_late_past_its_timeout_gets_one_408_line_naming_the_body_and_the_connection_closes(tmp_path):
    import json

    from evalsvc_testkit import TOKEN, ServerThread

    from benchlab.evaluate.config import load_config
    from benchlab.evaluate.server import create_app

    config = load_config(write_config(tmp_path, server={"body_timeout_secs": 1}))
    server = ServerThread(create_app(config, token=TOKEN)).start()
    try:
        with socket.create_connection(("127.0.0.1", server.port), timeout=10) as s:
            s.sendall(f"POST /evaluate HTTP/1.1\r\nHost: 127.0.0.1:{server.port}\r\nContent-Type: application/json\r\n"
                      "Content-Length: 500\r\n\r\n{\"rollout_id\": 1".encode())
            start = time.monotonic()
            answer = b""
            while chunk := s.recv(4096):  # until the server closes the connection
                answer += chunk
            waited = time.monotonic() - start
    finally:
        server.stop()
    head, _, body = answer.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 408 ") and b"connection: close" in head.lower()
    assert json.loads(body)["detail"] == "body: not received within 1s (server.body_timeout_secs)"
    assert 0.9 < waited < 5
