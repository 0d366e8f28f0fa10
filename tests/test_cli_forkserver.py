"""The tests' `benchlab` commands forked from a preloaded server behave as plain subprocesses do:
the same output, exit code and working directory, the environment they were given, a process of
their own, and a timeout that kills them."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

import benchlab_testing
from benchlab_testing import run_cli

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the fork server is Linux-only")


def _plain(*args: str, cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    full = {**os.environ, "COLUMNS": "200", "NO_COLOR": "1", **(env or {})}
    return subprocess.run([sys.executable, "-m", "benchlab", *args], cwd=cwd, capture_output=True, text=True,
                          env=full, timeout=120)


def _forked_cpu() -> float:
    return benchlab_testing._forkserver.cpu_used


@pytest.mark.parametrize("args", [("--help",), ("status", "no-such-folder"), ("run", "missing.yaml")])
def test_a_forked_command_prints_and_exits_as_a_plain_one(tmp_path: Path, args: tuple[str, ...]) -> None:
    before = _forked_cpu()
    forked = run_cli(*args, cwd=tmp_path)
    assert _forked_cpu() > before, f"the command was not forked: {benchlab_testing._forkserver.why_plain}"
    plain = _plain(*args, cwd=tmp_path)
    assert (forked.returncode, forked.stdout, forked.stderr) == (plain.returncode, plain.stdout, plain.stderr)


def test_a_forked_command_runs_in_its_own_process_in_its_folder_with_its_environment(make_bench) -> None:
    bench = make_bench("""
        name: env
        tasks: [{name: t}]
        configs: [{name: a}]
        seeds: 1
        command: python run.py
        metrics: {primary: score}
    """)
    before = _forked_cpu()
    done = run_cli("run", "bench.yaml", "--no-report", cwd=bench.root, env={"BENCHLAB_SEEN_BY_RUN": "yes"})
    assert done.returncode == 0, done.stderr
    assert _forked_cpu() > before, f"the command was not forked: {benchlab_testing._forkserver.why_plain}"
    (env_json,) = bench.root.glob("results/**/runs/*/env.json")  # the run script dumps BENCHLAB_* it was given
    assert '"BENCHLAB_SEEN_BY_RUN": "yes"' in env_json.read_text()


def test_a_forked_command_past_its_timeout_is_killed_and_raises_as_subprocess_run_does(tmp_path: Path) -> None:
    (tmp_path / "slow.py").write_text("import time\ntime.sleep(60)\n")
    (tmp_path / "bench.yaml").write_text(
        "name: slow\ntasks: [{name: t}]\nconfigs: [{name: a}]\nseeds: 1\ncommand: python slow.py\n"
        "metrics: {primary: score}\n")
    started = time.monotonic()
    with pytest.raises(subprocess.TimeoutExpired):
        run_cli("run", "bench.yaml", "--no-report", cwd=tmp_path, timeout=5)
    assert time.monotonic() - started < 45


def test_a_command_whose_environment_changes_what_libraries_read_at_import_is_not_forked(tmp_path: Path) -> None:
    before = _forked_cpu()
    done = run_cli("--help", cwd=tmp_path, env={"OPENBLAS_NUM_THREADS": "3", "PYTHONHASHSEED": "7"})
    assert done.returncode == 0
    assert _forked_cpu() == before


def test_a_fork_server_started_from_a_thread_that_has_ended_is_started_again(tmp_path: Path) -> None:
    """The server dies with the thread that started it (PR_SET_PDEATHSIG follows the thread); a
    test running its first command from a thread must not leave every later command unforked."""
    import threading

    benchlab_testing._forkserver._stop()
    thread = threading.Thread(target=run_cli, args=("--help",), kwargs={"cwd": tmp_path})
    thread.start()
    thread.join()
    server = benchlab_testing._forkserver.proc
    assert server is not None
    server.wait(timeout=10)  # killed with its thread
    before = _forked_cpu()
    run_cli("--help", cwd=tmp_path)
    assert _forked_cpu() > before, f"the command was not forked: {benchlab_testing._forkserver.why_plain}"


def test_a_fork_server_whose_socket_is_gone_is_started_again_and_takes_the_command(tmp_path: Path) -> None:
    run_cli("--help", cwd=tmp_path)
    server = benchlab_testing._forkserver
    assert server.proc is not None
    os.unlink(server.path)  # the server lives on, but no command can reach it
    before = _forked_cpu()
    done = run_cli("status", "no-such-folder", cwd=tmp_path)
    assert _forked_cpu() > before, f"the command was not forked: {server.why_plain}"
    assert (done.returncode, done.stderr) == (_plain("status", "no-such-folder", cwd=tmp_path).returncode,
                                              _plain("status", "no-such-folder", cwd=tmp_path).stderr)


def test_commands_are_forked_while_and_after_a_fixture_changes_what_the_libraries_read(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    run_cli("--help", cwd=tmp_path)
    monkeypatch.setenv("TZ", "Asia/Tokyo")  # read once, when the interpreter starts
    before = _forked_cpu()
    done = run_cli("--help", cwd=tmp_path)
    assert done.returncode == 0
    assert _forked_cpu() > before, f"the command was not forked: {benchlab_testing._forkserver.why_plain}"
    assert benchlab_testing._forkserver.env["TZ"] == "Asia/Tokyo"  # a server of this environment forked it
    monkeypatch.undo()
    before = _forked_cpu()
    run_cli("--help", cwd=tmp_path)
    assert _forked_cpu() > before, f"the command was not forked: {benchlab_testing._forkserver.why_plain}"
    assert benchlab_testing._forkserver.env.get("TZ") == os.environ.get("TZ")


def test_commands_from_several_threads_at_once_start_one_server_and_drop_none(tmp_path: Path) -> None:
    """Threads that find no server at the same moment start one between them: a second one
    started over the first would leave a running Popen to be collected, warning in some later test."""
    import gc
    from concurrent.futures import ThreadPoolExecutor

    benchlab_testing._forkserver._stop()
    started = []
    real_start = benchlab_testing._ForkServer._start

    def counting_start(self: benchlab_testing._ForkServer) -> bool:
        started.append(1)
        return real_start(self)

    benchlab_testing._ForkServer._start = counting_start  # type: ignore[method-assign]
    try:
        with ThreadPoolExecutor(4) as pool:
            done = list(pool.map(lambda _: run_cli("--help", cwd=tmp_path), range(4)))
    finally:
        benchlab_testing._ForkServer._start = real_start  # type: ignore[method-assign]
    assert [d.returncode for d in done] == [0] * 4 and len({d.stdout for d in done}) == 1
    assert len(started) == 1
    gc.collect()  # a dropped, running Popen would warn here (an error under the suite's filterwarnings)


# Run in a fresh interpreter: the libraries the server imports first, then benchlab's modules with the
# environment, the working directory and the standard streams watched.
_WATCHED_IMPORT = """
import importlib, io, json, os, sys
sys.path.insert(0, sys.argv[1])
from cli_forkserver import PRELOAD, PRELOAD_BENCHLAB
for name in PRELOAD:
    try:
        __import__(name)
    except Exception:
        pass
seen = []

class Watched(type(os.environ)):
    def __getitem__(self, key):
        seen.append(key)
        return super().__getitem__(key)

class Stream:
    def __init__(self, name, real):
        self._name, self._real = name, real
    def __getattr__(self, attr):
        seen.append(f"<sys.{self._name}.{attr}>")
        return getattr(self._real, attr)

watched = Watched.__new__(Watched)
watched.__dict__.update(os.environ.__dict__)
os.environ = watched
getcwd = os.getcwd
os.getcwd = lambda: (seen.append("<cwd>"), getcwd())[1]
real_out = sys.stdout
sys.stdout, sys.stderr = Stream("stdout", sys.stdout), Stream("stderr", sys.stderr)
failed = []
for name in PRELOAD_BENCHLAB:
    try:
        importlib.import_module(name)
    except Exception as exc:
        failed.append(f"{name}: {exc!r}")
sys.stdout, sys.stderr = real_out, sys.__stderr__
print(json.dumps({"read": sorted(set(seen)), "failed": failed,
                  "cli": sorted(m for m in sys.modules if m.startswith("benchlab.cli"))}))
"""


def test_benchlab_modules_imported_ahead_read_nothing_a_command_sets_but_what_keeps_it_unforked() -> None:
    import json

    from cli_forkserver import IMPORT_TIME_ENV

    tests = Path(__file__).resolve().parent
    done = subprocess.run([sys.executable, "-c", _WATCHED_IMPORT, str(tests)], capture_output=True, text=True,
                          timeout=120, env={**os.environ, "BENCHLAB_FLUSH_S": "0.5"})
    assert done.returncode == 0, done.stderr
    found = json.loads(done.stdout.strip().splitlines()[-1])
    assert found["failed"] == []  # every module named exists and imports
    # An environment variable read at import would be the server's, not the command's, unless a
    # command that sets it is run in a plain subprocess instead (IMPORT_TIME_ENV).
    unchecked = [k for k in found["read"] if not k.startswith("<") and not k.startswith(IMPORT_TIME_ENV)]
    assert unchecked == []
    assert [k for k in found["read"] if k.startswith("<")] == []  # no working directory, no stream
    assert found["cli"] == []  # its consoles read the terminal when made: imported by each command
