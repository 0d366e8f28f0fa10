"""A real `benchlab ui` on 127.0.0.1 for the tests, and a slow sweep for it to watch."""

from __future__ import annotations

import http.client
import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

# A run that takes a while and says so: a log line and a logged point every `pause` seconds,
# then its final score. Seed 3 of config `bad` fails with a traceback.
SLOW_SCRIPT = '''
import json, os, sys, time
args = dict(a.split("=", 1) for a in sys.argv[1:])
run_dir = os.environ["BENCHLAB_RUN_DIR"]
seed = int(os.environ["BENCHLAB_SEED"])
steps, pause = int(args.get("steps", 6)), float(args.get("pause", 0.4))
base = float(args["base"])
if args.get("fail_seed") == str(seed):
    print("Traceback (most recent call last):\\n  File \\"run.py\\", line 9\\nValueError: seed is cursed", flush=True)
    sys.exit(3)
with open(os.path.join(run_dir, "metrics.jsonl"), "a") as f:
    for step in range(1, steps + 1):
        value = base * step / steps + seed / 100
        print(f"step {step} reward {value:.4f}", flush=True)
        f.write(json.dumps({"step": step * 10, "reward": value}) + "\\n")
        f.flush()
        time.sleep(pause)
with open(os.path.join(run_dir, "metrics.json"), "w") as f:
    json.dump({"reward": value}, f)
print("done", value, flush=True)
'''

SLOW_SPEC = """
name: slowbench
tasks:
  - name: walk
    params: {{base: 0.5}}
    target: 0.5
configs:
  - name: base
    params: {{fail: -1}}
  - name: bad
    params: {{fail: 3}}
seeds: {seeds}
command: python run.py base={{base}} fail_seed={{fail}} steps={steps} pause={pause}
metrics:
  primary: {{name: reward, goal: max}}
baseline: base
retries: 0
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def get(port: int, path: str, headers: dict[str, str] | None = None,
        host: str = "127.0.0.1") -> tuple[int, dict[str, str], bytes]:
    """One raw GET (the path sent exactly as given: no client-side normalisation of ``..``)."""
    conn = http.client.HTTPConnection(host, port, timeout=30)
    try:
        conn.request("GET", path, headers=headers or {})
        r = conn.getresponse()
        return r.status, {k.lower(): v for k, v in r.getheaders()}, r.read()
    finally:
        conn.close()


def get_json(port: int, path: str) -> object:
    status, _, body = get(port, path)
    assert status == 200, (path, status, body[:300])
    return json.loads(body)


@contextmanager
def ui_server(*folders: Path, extra: tuple[str, ...] = (), host: str | None = "127.0.0.1",
              token: str | None = None, nice: bool = False) -> Iterator[tuple[int, subprocess.Popen[str]]]:
    """`benchlab ui FOLDERS` in a subprocess until the block ends; yields (port, process).

    ``host=None`` passes no ``--host``: the command's default. The server runs at normal
    priority unless ``nice``: these tests check what the pages show and when, and at nice 19 on
    a machine whose cores are busy (the test suite's own sweeps and servers) the server gets a
    few percent of a core, so a first page's statistics (about 3 s of CPU) take minutes.
    """
    port = free_port()
    args = [sys.executable, "-m", "benchlab", "ui", *map(str, folders), "--port", str(port), *extra]
    if not nice:
        args.append("--no-nice")
    if host is not None:
        args += ["--host", host]
    host = host or "127.0.0.1"
    if token:
        args += ["--token", token]
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "COLUMNS": "200", "NO_COLOR": "1"})
    try:
        deadline = time.monotonic() + 60
        while True:
            if proc.poll() is not None:
                raise AssertionError(f"benchlab ui exited {proc.returncode}: {proc.stderr.read()}")
            try:
                socket.create_connection((host, port), timeout=0.5).close()
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise AssertionError("benchlab ui did not start listening in 60 s") from None
                time.sleep(0.1)
        yield port, proc
    finally:
        stop(proc, timeout=15)
        for stream in (proc.stdout, proc.stderr):
            if stream is not None:
                stream.close()


def stop(proc: subprocess.Popen, timeout: float) -> None:  # type: ignore[type-arg]
    """Ask a process to end (SIGTERM), and kill it if it has not within ``timeout`` seconds."""
    proc.terminate()
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def wait_for(predicate, timeout: float = 60.0, every: float = 0.2):  # type: ignore[no-untyped-def]
    """Poll ``predicate`` until it returns something true; that value, or AssertionError."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"not true within {timeout} s")
        time.sleep(every)
