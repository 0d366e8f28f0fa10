"""Hostile programs in the sandbox: each one contained, the caller unharmed.

Fork bombs run only inside the sandbox, whose RLIMIT_NPROC binds them (the
program runs under an unprivileged uid of its own when the tests run as root).
"""

from __future__ import annotations

import asyncio
import os
import socket
import time
from pathlib import Path

import pytest

from benchlab.evaluate.sandbox import Sandbox, SandboxLimits, probe_isolation

pytestmark = pytest.mark.slow

LIMITS = SandboxLimits(
    timeout_secs=3, cpu_secs=2, memory_mb=256, processes=16, file_size_mb=1, output_cap=4096
)


@pytest.fixture(scope="module")
def sandbox() -> Sandbox:
    return Sandbox(LIMITS, concurrency=4)


def run(sandbox: Sandbox, program: str):
    return asyncio.run(sandbox.run(program))


def test_probe_reports_network_isolation_or_a_warning():
    mode, warning = probe_isolation()
    assert mode in ("root", "userns", "none")
    assert (mode == "none") == bool(warning)


def test_an_interpreter_the_sandbox_cannot_run_is_a_clear_error(tmp_path):
    from benchlab.errors import EvaluationError

    with pytest.raises(EvaluationError, match="cannot run .*set sandbox.python"):
        probe_isolation(str(tmp_path / "no-such-python"))


def test_a_correct_program_passes_and_a_failing_assert_fails(sandbox):
    ok = run(sandbox, "def add(a, b):\n    return a + b\nassert add(2, 3) == 5\nprint('fine')\n")
    assert ok.passed and ok.stdout.strip() == "fine"
    bad = run(sandbox, "assert 1 == 2\n")
    assert not bad.passed and "AssertionError" in bad.stderr


def test_infinite_loop_is_stopped(sandbox):
    start = time.monotonic()
    result = run(sandbox, "while True:\n    pass\n")
    assert not result.passed
    assert time.monotonic() - start < LIMITS.timeout_secs + 5


def test_fork_bomb_is_contained_and_leaves_no_process(sandbox):
    bomb = (
        "import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass\n"
    )
    result = run(sandbox, bomb)
    assert not result.passed
    # Nothing of the bomb survives: no process of the sandbox uids is left.
    time.sleep(0.5)
    leftovers = [
        p for p in os.listdir("/proc") if p.isdigit() and _uid(p) in range(61000, 61000 + 64)
    ]
    assert leftovers == []
    # The machine can still start processes, and the sandbox still runs programs.
    assert run(sandbox, "print(6 * 7)\n").stdout.strip() == "42"


def _uid(pid: str) -> int:
    try:
        return os.stat(f"/proc/{pid}").st_uid
    except OSError:
        return -1


def test_memory_bomb_fails_without_hurting_the_caller(sandbox):
    result = run(sandbox, "blocks = []\nwhile True:\n    blocks.append(bytearray(50 * 2**20))\n")
    assert not result.passed
    assert "MemoryError" in result.stderr or result.exit_code != 0


def test_a_gigabyte_of_output_is_cut_off(sandbox):
    result = run(sandbox, "import sys\nfor _ in range(2**14):\n    sys.stdout.write('x' * 2**16)\n")
    assert not result.passed
    assert len(result.stdout) <= LIMITS.output_cap + 100


def test_the_servers_environment_is_not_visible(sandbox, monkeypatch):
    monkeypatch.setenv("BENCHLAB_TEST_SECRET", "s3cr3t-value")
    program = (
        "import os\n"
        "seen = str(dict(os.environ))\n"
        "for pid in os.listdir('/proc'):\n"
        "    if pid.isdigit():\n"
        "        try:\n"
        "            seen += open(f'/proc/{pid}/environ').read()\n"
        "        except OSError:\n"
        "            pass\n"
        "print(seen)\n"
        "assert 's3cr3t' + '-value' in seen\n"
    )
    result = run(sandbox, program)
    assert not result.passed
    assert "s3cr3t-value" not in result.stdout


def test_writes_outside_the_working_directory_do_not_land(sandbox, tmp_path: Path):
    if sandbox.mode != "root":
        pytest.skip("without root the program shares the server's uid and file system")
    target = tmp_path / "escaped.txt"
    program = f"open({str(target)!r}, 'w').write('pwned')\nassert open({str(target)!r}).read() == 'pwned'\n"
    result = run(sandbox, program)
    assert not result.passed
    assert not target.exists()


def test_no_connection_reaches_a_socket_on_loopback(sandbox):
    if not sandbox.network_isolated:
        pytest.skip(f"no network namespace here: {sandbox.warning}")
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(8)
        port = listener.getsockname()[1]
        program = f"import socket\ns = socket.create_connection(('127.0.0.1', {port}), timeout=2)\ns.sendall(b'hi')\n"
        result = run(sandbox, program)
        # A connection that got through would wait in the backlog: there must be none.
        listener.setblocking(False)
        with pytest.raises(BlockingIOError):
            listener.accept()
    assert not result.passed
    assert "Network is unreachable" in result.stderr or "Errno" in result.stderr


def test_concurrent_programs_each_get_their_own_verdict(sandbox):
    async def many():
        return await asyncio.gather(*(sandbox.run(f"assert {i} % 2 == 0\n") for i in range(6)))

    results = asyncio.run(many())
    assert [r.passed for r in results] == [i % 2 == 0 for i in range(6)]
