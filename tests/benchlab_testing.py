"""Helpers shared by the tests: the real `benchlab` command and throwaway benchmarks.

Import them as ``from benchlab_testing import run_cli, BASIC_SPEC``; a module of
its own, unlike ``conftest``, cannot be shadowed by another folder's conftest.
"""

from __future__ import annotations

import ast
import os
import re
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

# A run script for throwaway benchmarks: behaviour chosen by its arguments.
SCRIPT = '''
import json, os, sys, time
args = dict(a.split("=", 1) for a in sys.argv[1:])
run_dir = os.environ["BENCHLAB_RUN_DIR"]
seed = int(os.environ["BENCHLAB_SEED"])
with open(os.path.join(run_dir, "env.json"), "w") as f:
    json.dump({k: v for k, v in os.environ.items() if k.startswith(("BENCHLAB_", "CUDA_"))}, f)
print("start", args, flush=True)
if "sleep" in args:
    time.sleep(float(args["sleep"]))
if "sleep_file" in args and os.path.exists(args["sleep_file"]):
    time.sleep(float(open(args["sleep_file"]).read()))
while "wait_file" in args and os.path.exists(args["wait_file"]):
    time.sleep(0.05)
if args.get("fail_seed") == str(seed):
    print("Traceback (most recent call last):\\n  File \\"x.py\\", line 1\\nValueError: seed is cursed")
    sys.exit(3)
score = float(args.get("base", 0.5)) + seed / 100
with open(os.path.join(run_dir, "metrics.json"), "w") as f:
    json.dump({"score": score, "time": 1.0 + seed}, f)
with open(os.path.join(run_dir, "metrics.jsonl"), "w") as f:
    for step in range(3):
        f.write(json.dumps({"step": step * 10, "score": score * (step + 1) / 3}) + "\\n")
print("done", score)
'''


@dataclass
class Bench:
    """A throwaway benchmark: a spec file, its run script, and a results folder."""

    root: Path
    spec: Path
    results: Path

    def cli(self, *args: str, timeout: float = 120, check: bool = False) -> subprocess.CompletedProcess[str]:
        return run_cli(*args, cwd=self.root, timeout=timeout, check=check)


# Processes a test started in the background (``started``): whatever one left running when it
# ended, a failed assertion included, is stopped at its teardown (tests/conftest.py), so that it
# neither outlives its test nor surfaces later as another test's ResourceWarning.
_STARTED: list[subprocess.Popen] = []  # type: ignore[type-arg]


def started(proc: subprocess.Popen) -> subprocess.Popen:  # type: ignore[type-arg]
    """``proc``, registered to be stopped at the end of the test that started it."""
    _STARTED.append(proc)
    return proc


def stop_started(grace: float = 10.0) -> list[int]:
    """Stop (SIGTERM, then SIGKILL after ``grace`` s) every registered process still running, close
    their pipes, and forget them all; the pids that were still running."""
    left = []
    while _STARTED:
        proc = _STARTED.pop()
        if proc.poll() is None:
            left.append(proc.pid)
            proc.terminate()
            try:
                proc.wait(grace)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        for stream in (proc.stdin, proc.stdout, proc.stderr):
            if stream is not None:
                stream.close()
    return left


def run_cli(*args: str, cwd: Path | None = None, timeout: float = 120,
            check: bool = False, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """Run the real `benchlab` command in a process of its own (``python -m benchlab ARGS``); stdout
    and stderr captured as text. The process is forked from a server that has the heavy libraries
    imported already (tests/cli_forkserver.py) where it can be, else started as a plain subprocess."""
    full_env = {**os.environ, "COLUMNS": "200", "NO_COLOR": "1", **(env or {})}
    cmd = [sys.executable, "-m", "benchlab", *args]
    forked = _forkserver.run(cmd, list(args), cwd, full_env, timeout)
    proc = forked if forked is not None else subprocess.run(
        cmd, cwd=cwd, capture_output=True, text=True, timeout=timeout, env=full_env)
    if check and proc.returncode != 0:
        raise AssertionError(f"benchlab {' '.join(args)} exited {proc.returncode}:\n{proc.stdout}\n{proc.stderr}")
    return proc


class _Refused(Exception):
    """The fork server refused a command's connection: it never saw the command."""


class _ForkServer:
    """This process's fork server (tests/cli_forkserver.py), started at the first command."""

    def __init__(self) -> None:
        self.proc: subprocess.Popen[bytes] | None = None
        self.path = ""
        self.env: dict[str, str] = {}
        self.cpu_used = 0.0  # seconds of CPU the forked commands took, for the suite's own accounting
        self.failed = os.environ.get("BENCHLAB_TEST_FORKSERVER", "1") == "0" or not sys.platform.startswith("linux")
        self.why_plain = "turned off" if self.failed else ""  # why the last command was not forked
        self.lock = threading.Lock()
        self.registered = False  # whether the exit function that stops the server is registered
        self.unforked: list[str] = []  # why commands ran unforked through the server's fault

    def _start(self) -> bool:
        import atexit

        assert self.proc is None, "a running server is never replaced: stop it first"
        import tempfile

        from cli_forkserver import IMPORT_TIME_ENV

        self.import_time_env = IMPORT_TIME_ENV
        self.path = os.path.join(tempfile.mkdtemp(prefix="benchlab-forkserver-"), "socket")
        self.env = dict(os.environ)
        self.proc = subprocess.Popen([sys.executable, str(Path(__file__).with_name("cli_forkserver.py")), self.path],
                                     stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, env=self.env)
        assert self.proc.stdout is not None
        ready = self.proc.stdout.readline()
        if ready != b"ready\n":
            self._stop()
            self.failed = True
            self.why_plain = f"the server did not start (it said {ready[:200]!r})"
            return False
        if not self.registered:
            atexit.register(self._stop)  # the server of the moment, whichever that is by then
            self.registered = True
        return True

    def _stop(self) -> None:
        """Kill the server, reap it and close its pipe (else each one left warns at exit)."""
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait()
            if self.proc.stdout is not None:
                self.proc.stdout.close()
            self.proc = None

    def _differs(self, env: dict[str, str], base: dict[str, str]) -> list[str]:
        """The names, read when the libraries are imported, whose values ``env`` and ``base`` disagree on."""
        return sorted(k for k in set(env) | set(base)
                      if k.startswith(self.import_time_env) and env.get(k) != base.get(k))

    def run(self, cmd: list[str], args: list[str], cwd: Path | None, env: dict[str, str],
            timeout: float) -> subprocess.CompletedProcess[str] | None:
        """The command's result, or None where it was not forked (the caller starts it itself, and
        ``why_plain`` says why; ``unforked`` keeps the reasons that are the server's fault, which
        the session's summary prints: each such command costs the suite seconds of CPU unseen)."""
        done = self._run(cmd, args, cwd, env, timeout)
        if done is not None:
            self.why_plain = ""
        elif self.why_plain != "turned off" and not self.why_plain.startswith("the command sets"):
            self.unforked.append(self.why_plain)
        return done

    def _run(self, cmd: list[str], args: list[str], cwd: Path | None, env: dict[str, str],
             timeout: float) -> subprocess.CompletedProcess[str] | None:
        # Tests run commands from threads too: the server is started and stopped by one at a time,
        # and never replaced while running (a Popen dropped unreaped warns, failing the test it is
        # collected in).
        with self.lock:
            if self.proc is not None and self.proc.poll() is not None:
                # Gone: the server dies with the thread that started it (PR_SET_PDEATHSIG follows the
                # thread, not the process), so a first command run from a short-lived thread takes it
                # along when that thread ends. Start another rather than run every later command plain.
                self._stop()
            if self.proc is not None and self._differs(dict(os.environ), self.env):
                # This process's own environment changed since the server started (a fixture set a
                # variable for a while): a server of the old one would fork no command again.
                self._stop()
            if self.failed or (self.proc is None and not self._start()):
                return None
            server = self.proc
        differs = self._differs(env, self.env)
        if differs:
            self.why_plain = f"the command sets {', '.join(differs)}, which the libraries read at import"
            return None
        try:
            return self._fork(cmd, args, cwd, env, timeout)
        except _Refused:
            pass
        # The server refused the connection (its socket gone, or it died since the check above): it
        # never saw the command. Start another, unless another thread did already, and hand it over once.
        with self.lock:
            if self.proc is server:
                self._stop()
            if self.proc is None and not self._start():
                return None
        try:
            return self._fork(cmd, args, cwd, env, timeout)
        except _Refused:
            return None

    def _fork(self, cmd: list[str], args: list[str], cwd: Path | None, env: dict[str, str],
              timeout: float) -> subprocess.CompletedProcess[str] | None:
        import selectors
        import signal
        import socket
        import time

        from cli_forkserver import recv_message, send_message

        out_r, out_w = os.pipe()
        err_r, err_w = os.pipe()
        null = os.open(os.devnull, os.O_RDONLY)
        conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        taken = False
        try:
            conn.connect(self.path)
            taken = True  # from here on the command may have started: never sent twice
            send_message(conn, {"args": args, "cwd": str(cwd or os.getcwd()), "env": env}, [null, out_w, err_w])
            started, _ = recv_message(conn)
        except (OSError, ConnectionError) as error:
            for fd in (out_r, err_r):
                os.close(fd)
            conn.close()
            self.why_plain = f"the server {'dropped' if taken else 'refused'} the command ({error})"
            if not taken:
                raise _Refused from error
            return None
        finally:
            for fd in (null, out_w, err_w):
                os.close(fd)
        pid = started["pid"]  # type: ignore[index]
        chunks: dict[int, list[bytes]] = {out_r: [], err_r: []}
        deadline = time.monotonic() + timeout
        timed_out = False
        with selectors.DefaultSelector() as sel:
            for fd in chunks:
                sel.register(fd, selectors.EVENT_READ)
            while sel.get_map():
                left = deadline - time.monotonic()
                if left <= 0 and not timed_out:
                    timed_out = True
                    try:
                        os.kill(pid, signal.SIGKILL)
                    except ProcessLookupError:
                        pass
                for key, _ in sel.select(timeout=max(left, 0.1) if not timed_out else 5):
                    data = os.read(key.fd, 65536)
                    if data:
                        chunks[key.fd].append(data)
                    else:
                        sel.unregister(key.fd)
                        os.close(key.fd)
                if timed_out and time.monotonic() > deadline + 30:  # a descendant keeps the pipe open
                    for fd in list(sel.get_map()):
                        sel.unregister(fd)
                        os.close(fd)
        try:
            ended, _ = recv_message(conn)
            code = ended["code"]  # type: ignore[index]
            self.cpu_used += ended.get("cpu", 0.0)  # type: ignore[union-attr]
        finally:
            conn.close()
        out, err = (_text(b"".join(chunks[fd])) for fd in (out_r, err_r))
        if timed_out:
            raise subprocess.TimeoutExpired(cmd, timeout, output=out, stderr=err)
        return subprocess.CompletedProcess(cmd, code, out, err)


def _text(data: bytes) -> str:
    """Bytes as ``subprocess.run(text=True)`` decodes them (the locale's encoding, universal newlines)."""
    import io
    import locale

    return io.TextIOWrapper(io.BytesIO(data), encoding=locale.getpreferredencoding(False)).read()


_forkserver = _ForkServer()


def doc_blocks(doc: Path, lang: str) -> list[str]:
    """The fenced ``lang`` code blocks of a Markdown file, in order, without their fences."""
    return re.findall(rf"```{lang}\n(.*?)```", doc.read_text(), flags=re.S)


def run_python_blocks(doc: Path, *, shared: bool = False) -> int:
    """Run every ``python`` block of ``doc``, each in a fresh namespace (with ``shared``: all in one,
    in order, as a notebook's cells); a doc with none fails.

    Returns how many ``assert`` statements the blocks hold: a doc's examples state
    their claims as asserts, and a caller checks that there are claims to check.
    """
    blocks = doc_blocks(doc, "python")
    assert blocks, f"{doc.name} has no python example"
    claims = 0
    namespace: dict[str, object] = {}
    for code in blocks:
        tree = ast.parse(code, str(doc))
        claims += sum(isinstance(node, ast.Assert) for node in ast.walk(tree))
        exec(compile(tree, str(doc), "exec"), namespace if shared else {})
    return claims


BASIC_SPEC = """
name: basic
tasks:
  - name: t1
    params: {base: 0.5}
  - name: t2
    params: {base: 0.7}
configs:
  - name: a
    params: {extra: 1}
  - name: b
    params: {extra: 2}
seeds: 2
command: python run.py base={base} extra={extra}
metrics:
  primary: {name: score, goal: max}
  secondary: [{name: time, goal: min}]
baseline: a
retries: 1
"""


_SCORE_LINK = re.compile(r"^\[(?P<score>[^\]]+)\]\((?P<href>[^)\s]+)\)(?P<rest>.*)$")


def unlink_score(cell: str) -> tuple[str, str]:
    """A BENCHMARKS.md score cell ``[0.95 ± 0.01](runs/ab12/) ✅ (3/5 seeds)`` as the text a reader
    sees (``0.95 ± 0.01 ✅ (3/5 seeds)``) and the link's target (``runs/ab12/``)."""
    m = _SCORE_LINK.match(cell)
    assert m is not None, f"not a linked score: {cell!r}"
    return m["score"] + m["rest"], m["href"]


def linked_run(md_dir: Path, href: str) -> dict[str, object]:
    """The ``config.yaml`` of the run folder a relative link of a file in ``md_dir`` points to
    (which must exist on disk): ``task``, ``config``, ``seed``, ..."""
    import yaml

    folder = (md_dir / href).resolve()
    assert href.endswith("/") and folder.is_dir(), f"{href} (from {md_dir}) is no run folder"
    return dict(yaml.safe_load((folder / "config.yaml").read_text()))


# A run printing far more than its log's cap, for the tests that every backend caps a log alike:
# a first line, 6 MiB of filler, and its score last, where the regex extractor reads it.
CHATTY_RUN = '''
import sys
out = sys.stdout.buffer
out.write(b"first line of the log\\n")
line = b"y" * 1023 + b"\\n"
for _ in range(6 * 1024):
    out.write(line)
out.write(b"score: 0.75\\n")
out.flush()
'''
#: Every byte CHATTY_RUN prints, in order.
CHATTY_OUTPUT = b"first line of the log\n" + (b"y" * 1023 + b"\n") * (6 * 1024) + b"score: 0.75\n"
#: The spec of one CHATTY_RUN run (``python chatty.py``) under a cap of 1 MiB, its score read from its log.
CHATTY_SPEC = """
name: {name}
tasks: [{{name: t}}]
configs: [{{name: loud}}]
seeds: 1
command: python chatty.py
log_cap_mb: 1
metrics:
  primary: {{name: score, goal: max, from: {{regex: 'score: (?P<value>[\\d.]+)'}}}}
"""


def capped_chatty_log(tmp: Path) -> bytes:
    """CHATTY_OUTPUT as a 1 MiB cap leaves it (``logcap.cut``, the one cut every backend's log gets)."""
    from benchlab.execute.logcap import cut

    path = tmp / "expected.log"
    path.write_bytes(CHATTY_OUTPUT)
    assert cut(path, 1 << 20) == len(CHATTY_OUTPUT) - (1 << 20)
    return path.read_bytes()


def start_ray_cluster(head: dict[str, object], *workers: dict[str, object], attempts: int = 2) -> tuple[object, list]:
    """A Ray cluster of several nodes on this machine (``ray.cluster_utils.Cluster``): a head
    started with ``head``'s arguments, then a node for each of ``workers``, all registered; the
    cluster and the worker nodes.

    Ray gives each node it starts 30 s, a constant in its code, to register with the cluster; on
    two busy cores a node can miss it, and Ray raises with that node's processes still running.
    Such a start is taken down whole (the nodes that came up, then every process this start left
    behind) and made again, ``attempts`` times in all."""
    import psutil
    from ray.cluster_utils import Cluster

    me = psutil.Process()
    for attempt in range(1, attempts + 1):
        before = {p.pid for p in me.children(recursive=True)}
        cluster = Cluster()
        try:
            cluster.add_node(**head)
            nodes = [cluster.add_node(**w) for w in workers]
            cluster.wait_for_nodes()
            return cluster, nodes
        except Exception as exc:
            if attempt == attempts or "timed out during startup" not in str(exc):
                raise
            print(f"Ray cluster start {attempt} of {attempts} failed ({exc}); starting it again", file=sys.stderr)
            cluster.shutdown()
            left = [p for p in me.children(recursive=True) if p.pid not in before]
            for p in left:
                try:
                    p.kill()
                except psutil.NoSuchProcess:
                    pass
            psutil.wait_procs(left, timeout=30)
    raise AssertionError("unreachable")


def skip_unless_installed(name: str, reason: str = "") -> None:
    """At a test module's top: skip the module when ``name`` is not installed, as
    ``pytest.importorskip`` does, but without importing it. Every worker imports every test module
    to collect it; a library only a few tests use (mlflow, Inspect AI, wandb, scikit-learn: one to
    three seconds of CPU each) is then imported by the workers that run those tests, not by all."""
    import importlib.util

    import pytest

    if importlib.util.find_spec(name) is None:
        pytest.skip(reason or f"could not import {name!r}: not installed", allow_module_level=True)


@contextmanager
def stub_model_server(models: dict[str, float]) -> Iterator[str]:
    """benchlab's stub model endpoint (``python -m benchlab.evaluate.stub``) on a free port of
    127.0.0.1, its ``models`` each answering right with the given probability; its base URL."""
    import socket
    import time
    import urllib.request

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    args = [a for name, p in models.items() for a in ("--model", f"{name}={p}")]
    proc = subprocess.Popen([sys.executable, "-m", "benchlab.evaluate.stub", "--port", str(port), *args],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                urllib.request.urlopen(url + "/v1/models", timeout=1).read()
                break
            except OSError:
                if time.monotonic() > deadline or proc.poll() is not None:
                    raise RuntimeError("the stub model server did not start") from None
                time.sleep(0.2)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
