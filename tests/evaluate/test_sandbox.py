"""Hostile programs in the sandbox: each one contained, the caller unharmed.

Fork bombs run only inside the sandbox, whose RLIMIT_NPROC binds them (the
program runs under an unprivileged uid of its own when the tests run as root).
"""

from __future__ import annotations

import asyncio
import errno
import json
import os
import shutil
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from benchlab.evaluate.sandbox import Sandbox, SandboxLimits, probe_isolation

pytestmark = pytest.mark.slow

LIMITS = SandboxLimits(
    timeout_secs=3,
    cpu_secs=2,
    memory_mb=256,
    processes=16,
    file_size_mb=1,
    output_cap=4096,
    max_files=40,
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
    if sandbox.filesystem == "none":
        pytest.skip(f"no file-system confinement here: {sandbox.warning}")
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


# -- No writable path outside the sandbox ---------------------------------------------------------


@pytest.fixture(scope="module")
def host_writable_dirs() -> list[str]:
    """The host's world-writable directories, found by find(1) rather than by the code under test."""
    out = subprocess.run(
        ["find", "/", "(", "-path", "/proc", "-o", "-path", "/sys", ")", "-prune", "-o",
         "-type", "d", "-perm", "-0002", "-print"],
        capture_output=True, text=True, check=False,
    ).stdout.split()
    assert "/tmp" in out  # the search itself works
    return out + ["/var/lock"]  # usually a link to /run/lock: the path a program would use


WRITE_EVERYWHERE = """
import json, os, sys
name, dirs = sys.argv_name, sys.argv_dirs
landed = []
for d in dirs:
    for make in (lambda p: open(p, "w").write("x"), os.mkdir):
        try:
            make(os.path.join(d, name + make.__class__.__name__))
            landed.append(d)
        except OSError:
            pass
print(json.dumps(landed))
"""


def _write_everywhere(name: str, dirs: list[str]) -> str:
    return WRITE_EVERYWHERE.replace("sys.argv_name, sys.argv_dirs", f"{name!r}, {dirs!r}")


def _left_on_host(name: str, dirs: list[str]) -> list[str]:
    return [
        os.path.join(d, entry)
        for d in dirs
        if os.path.isdir(d)
        for entry in os.listdir(d)
        if entry.startswith(name)
    ]


@pytest.mark.parametrize("filesystem", ["readonly", "cover"])
def test_writes_to_every_world_writable_host_directory_leave_nothing(filesystem, host_writable_dirs):
    probed = Sandbox(LIMITS, concurrency=1)
    if probed.filesystem == "none":
        pytest.skip(f"no file-system confinement here: {probed.warning}")
    sandbox = Sandbox(LIMITS, concurrency=1, mode=probed.mode, filesystem=filesystem)
    name = f"escape-{uuid.uuid4().hex[:12]}-"
    result = run(sandbox, _write_everywhere(name, host_writable_dirs))
    assert result.passed, result.stderr
    landed = json.loads(result.stdout)
    # Inside, only the private tmpfs (seen at /tmp, /var/tmp, /dev/shm) takes writes ...
    assert set(landed) <= {"/tmp", "/var/tmp", "/dev/shm"}
    # ... and on the host nothing at all is left.
    assert _left_on_host(name, host_writable_dirs) == []


def test_run_lock_write_of_the_issue_does_not_persist():
    sandbox = Sandbox(LIMITS, concurrency=1)
    if sandbox.filesystem == "none":
        pytest.skip(f"no file-system confinement here: {sandbox.warning}")
    if not os.path.isdir("/run/lock"):
        pytest.skip("no /run/lock on this machine")
    name = f"x-{uuid.uuid4().hex[:12]}"
    result = run(sandbox, f"open('/run/lock/{name}', 'w').write('x')\n")
    assert not result.passed and "Read-only file system" in result.stderr
    assert not os.path.exists(f"/run/lock/{name}")


def test_many_small_files_stop_at_the_file_cap(sandbox):
    if sandbox.filesystem == "none":
        pytest.skip(f"no file-system confinement here: {sandbox.warning}")
    program = (
        "import os\nn = 0\ntry:\n    while True:\n        open(f'f{n}', 'w').close()\n        n += 1\n"
        "except OSError as exc:\n    print(n, exc.errno)\n"
    )
    result = run(sandbox, program)
    created, code = map(int, result.stdout.split())
    assert code == errno.ENOSPC
    # main.py counts as one of the working folder's files.
    assert LIMITS.max_files - 2 <= created <= LIMITS.max_files


def test_hard_links_count_against_the_cap_and_never_reach_host_files(sandbox, host_writable_dirs):
    if sandbox.filesystem == "none":
        pytest.skip(f"no file-system confinement here: {sandbox.warning}")
    name = f"link-{uuid.uuid4().hex[:12]}-"
    host_dirs = [d for d in host_writable_dirs if d not in ("/tmp", "/var/tmp", "/dev/shm")]
    program = f"""
import os
open("a", "w").write("x")
escaped = []
for d in {host_dirs!r}:
    for source in ("a", "/etc/passwd"):
        try:
            os.link(source, os.path.join(d, {name!r} + os.path.basename(source)))
            escaped.append(d)
        except OSError:
            pass
try:
    os.link("/etc/passwd", "passwd")
    escaped.append("passwd into /tmp")
except OSError:
    pass
n = 0
try:
    while True:
        os.link("a", f"l{{n}}")
        n += 1
except OSError as exc:
    print(escaped, n, exc.errno)
"""
    result = run(sandbox, program)
    escaped, links, code = result.stdout.rsplit(" ", 2)
    assert escaped == "[]"
    assert int(code) == errno.ENOSPC and int(links) <= LIMITS.max_files
    assert _left_on_host(name, host_dirs) == []


def test_a_full_private_tmpfs_still_reports_the_programs_output(sandbox):
    if sandbox.filesystem == "none":
        pytest.skip(f"no file-system confinement here: {sandbox.warning}")
    program = (
        "import os\ntry:\n    for n in range(10**6):\n        open(f'f{n}', 'w').close()\nexcept OSError:\n    pass\n"
        "print('still heard')\n"
    )
    result = run(sandbox, program)
    assert result.passed and result.stdout.strip() == "still heard"


_AS_NOBODY = """
import asyncio, json, sys
from benchlab.evaluate.sandbox import Sandbox, SandboxLimits
sandbox = Sandbox(SandboxLimits(timeout_secs=5, max_files=40), concurrency=1)
result = asyncio.run(sandbox.run(sys.stdin.read()))
print(json.dumps({"mode": sandbox.mode, "filesystem": sandbox.filesystem,
                  "stdout": result.stdout, "stderr": result.stderr, "passed": result.passed}))
"""


def test_without_root_the_user_namespace_also_confines_writes(host_writable_dirs, tmp_path):
    """As an ordinary user (the CI's case without root), writes land nowhere on the host either."""
    import sysconfig

    import benchlab
    from benchlab.evaluate.sandbox import default_python

    python, path = sys.executable, os.environ.get("PYTHONPATH", "")
    command = [python, "-c", _AS_NOBODY]
    if os.geteuid() == 0:
        setpriv = shutil.which("setpriv")
        if setpriv is None:
            pytest.skip("setpriv is needed to run the sandbox as an ordinary user")
        # A Python under /root (pyenv) is out of an ordinary user's reach: then the system one,
        # with this environment's packages on its path.
        python = default_python()
        # An editable install's .pth file is not read from a PYTHONPATH entry: name the package's
        # own folder too.
        package_parent = str(Path(benchlab.__file__).resolve().parents[1])
        path = os.pathsep.join(p for p in (path, package_parent, sysconfig.get_paths()["purelib"]) if p)
        command = [setpriv, "--reuid=65534", "--regid=65534", "--clear-groups", python, "-c", _AS_NOBODY]
    name = f"nobody-{uuid.uuid4().hex[:12]}-"
    env = {"PATH": os.environ.get("PATH", ""), "PYTHONPATH": path, "HOME": str(tmp_path)}
    os.chmod(tmp_path, 0o777)
    proc = subprocess.run(command, input=_write_everywhere(name, host_writable_dirs), text=True,
                          capture_output=True, env=env, cwd=tmp_path, check=False, timeout=120)
    if proc.returncode != 0:
        pytest.skip(f"benchlab cannot run as an ordinary user here: {proc.stderr.strip()[-200:]}")
    seen = json.loads(proc.stdout.strip().splitlines()[-1])
    if seen["filesystem"] == "none":
        pytest.skip("no user namespaces here: the sandbox warns that writes are not confined")
    assert seen["passed"], seen["stderr"]
    assert set(json.loads(seen["stdout"])) <= {"/tmp", "/var/tmp", "/dev/shm"}
    assert _left_on_host(name, host_writable_dirs) == []
