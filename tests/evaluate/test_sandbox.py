"""Hostile programs in the sandbox: each one contained, the caller unharmed.

The hostile suite runs twice where the tests run as root: as root (the programs
then get an unprivileged uid of their own) and as the ordinary user ``nobody``
(through setpriv), the two ways a server runs. Targets of the hostile programs
(processes to signal, sockets to reach, files to read) are started or written by
the tests themselves; nothing else on the machine is ever aimed at.
"""

from __future__ import annotations

import asyncio
import errno
import json
import os
import shutil
import signal
import socket
import subprocess
import sysconfig
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict
from pathlib import Path

import pytest

import benchlab
from benchlab.errors import EvaluationError
from benchlab.evaluate.harness import judge
from benchlab.evaluate.sandbox import Sandbox, SandboxLimits, default_python, find_cgroup

pytestmark = pytest.mark.slow

LIMITS = SandboxLimits(
    timeout_secs=3,
    cpu_secs=2,
    memory_mb=256,
    processes=8,
    file_size_mb=1,
    output_cap=4096,
    max_files=40,
)
NOBODY = 65534


@pytest.fixture(scope="module")
def sandbox() -> Sandbox:
    return Sandbox(LIMITS, concurrency=4)


def run(sandbox: Sandbox, program: str):
    return asyncio.run(sandbox.run(program))


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
    target = tmp_path / "escaped.txt"
    program = f"open({str(target)!r}, 'w').write('pwned')\nassert open({str(target)!r}).read() == 'pwned'\n"
    result = run(sandbox, program)
    assert not result.passed
    assert not target.exists()


def test_no_connection_reaches_a_socket_on_loopback(sandbox):
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
    # The sandbox's own loopback, where nothing listens.
    assert "Connection refused" in result.stderr or "Errno" in result.stderr


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


def test_run_lock_write_of_the_issue_does_not_persist():
    sandbox = Sandbox(LIMITS, concurrency=1)
    if not os.path.isdir("/run/lock"):
        pytest.skip("no /run/lock on this machine")
    name = f"x-{uuid.uuid4().hex[:12]}"
    result = run(sandbox, f"open('/run/lock/{name}', 'w').write('x')\n")
    # /run is not in the sandbox at all.
    assert not result.passed and "No such file or directory" in result.stderr
    assert not os.path.exists(f"/run/lock/{name}")


def test_many_small_files_stop_at_the_file_cap(sandbox):
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
    program = (
        "import os\ntry:\n    for n in range(10**6):\n        open(f'f{n}', 'w').close()\nexcept OSError:\n    pass\n"
        "print('still heard')\n"
    )
    result = run(sandbox, program)
    assert result.passed and result.stdout.strip() == "still heard"




# -- The hostile suite, as root and as an ordinary user -------------------------------------------

_RUN_AS_USER = """
import asyncio, json, sys
from dataclasses import asdict
from benchlab.errors import EvaluationError
from benchlab.evaluate.sandbox import Sandbox, SandboxLimits
job = json.loads(sys.stdin.read())
try:
    sandbox = Sandbox(SandboxLimits(**job["limits"]), concurrency=1, cgroup=job["cgroup"])
except EvaluationError as exc:
    print(json.dumps({"setup_error": str(exc)}))
    raise SystemExit(0)
result = asyncio.run(sandbox.run(job["program"]))
print(json.dumps({**asdict(result), "passed": result.passed}))
"""


def _as_user_command() -> tuple[list[str], dict[str, str]]:
    """How to run Python as ``nobody`` with this checkout's benchlab importable."""
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        pytest.skip("setpriv is needed to run the sandbox as an ordinary user")
    # A Python under /root (pyenv) is out of an ordinary user's reach: then the system one, with
    # this environment's packages on its path; an editable install's .pth file is not read from
    # a PYTHONPATH entry, so the package's own folder is named too.
    package_parent = str(Path(benchlab.__file__).resolve().parents[1])
    path = os.pathsep.join(
        p for p in (os.environ.get("PYTHONPATH", ""), package_parent, sysconfig.get_paths()["purelib"]) if p
    )
    env = {"PATH": os.environ.get("PATH", ""), "PYTHONPATH": path, "HOME": "/"}
    prefix = [setpriv, f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups"]
    return prefix, env


Runner = Callable[..., dict]


@contextmanager
def delegated_cgroup(uid: int) -> Iterator[str]:
    """A cgroup given to ``uid``, as an administrator delegates one to a server that is not root,
    with a leaf ``server`` where that server's own process goes (cgroup v2 lets a process move
    others only within a subtree it is in)."""
    place = find_cgroup()
    path = os.path.join(place.parent, f"benchlab-test-{uuid.uuid4().hex[:12]}")
    os.mkdir(path)
    os.mkdir(os.path.join(path, "server"))
    for root, dirs, files in os.walk(path):
        for name in [*dirs, *files, ""]:
            os.chown(os.path.join(root, name) if name else root, uid, uid)
    try:
        yield path
    finally:
        for _ in range(100):
            try:
                for leftover in sorted(Path(path).glob("*/"), reverse=True):
                    if leftover.is_dir():
                        os.rmdir(leftover)
                os.rmdir(path)
                break
            except OSError:
                time.sleep(0.05)


@pytest.fixture(scope="module")
def nobody_cgroup() -> Iterator[str]:
    with delegated_cgroup(NOBODY) as path:
        yield path


@pytest.fixture(params=["server-user", "nobody"])
def runner(request) -> Iterator[Runner]:
    """Runs a program in a sandbox of a server running as this user, or as ``nobody``."""
    if request.param == "server-user":

        def here(program: str, limits: SandboxLimits = LIMITS) -> dict:
            sandbox = Sandbox(limits, concurrency=1)
            result = asyncio.run(sandbox.run(program))
            return {**asdict(result), "passed": result.passed}

        here.uid = os.geteuid()  # type: ignore[attr-defined]
        here.prefix = []  # type: ignore[attr-defined]
        yield here
        return
    if os.geteuid() != 0:
        pytest.skip("the tests already run as an ordinary user")
    prefix, env = _as_user_command()
    cgroup = request.getfixturevalue("nobody_cgroup")
    # The server as nobody starts in the cgroup delegated to it.
    enter = ["sh", "-c", f'echo $$ > {cgroup}/server/cgroup.procs && exec "$@"', "sh"]

    def as_nobody(program: str, limits: SandboxLimits = LIMITS) -> dict:
        job = json.dumps({"limits": asdict(limits), "program": program, "cgroup": cgroup})
        proc = subprocess.run([*enter, *prefix, default_python(), "-c", _RUN_AS_USER], input=job, text=True,
                              capture_output=True, env=env, cwd="/", check=False, timeout=120)
        assert proc.returncode == 0, proc.stderr[-2000:]
        out = json.loads(proc.stdout.strip().splitlines()[-1])
        assert "setup_error" not in out, out
        return out

    as_nobody.uid = NOBODY  # type: ignore[attr-defined]
    as_nobody.prefix = prefix  # type: ignore[attr-defined]
    yield as_nobody


def _start_target(runner: Runner) -> subprocess.Popen:
    """A process of the server's own user for a program to aim at (started by this test only)."""
    return subprocess.Popen([*runner.prefix, "sleep", "120"])  # type: ignore[attr-defined]


def test_no_signal_reaches_a_process_of_the_servers_user(runner):
    target = _start_target(runner)
    try:
        program = f"""
import os, signal
outcome = []
for sig in (0, signal.SIGKILL):
    try:
        os.kill({target.pid}, sig)
        outcome.append("sent")
    except OSError as exc:
        outcome.append(type(exc).__name__)
print(outcome)
"""
        result = runner(program)
        assert result["passed"], result
        # The host's pid numbers do not exist in the sandbox's PID namespace.
        assert result["stdout"].strip() == "['ProcessLookupError', 'ProcessLookupError']"
        time.sleep(0.2)
        assert target.poll() is None, "the target process was killed from inside the sandbox"
    finally:
        target.kill()
        target.wait()


def test_no_host_socket_is_reachable_tcp_unix_under_run_or_abstract(runner, tmp_path):
    tag = uuid.uuid4().hex[:12]
    listeners = []
    tcp = socket.socket()
    tcp.bind(("127.0.0.1", 0))
    listeners.append(tcp)
    abstract = socket.socket(socket.AF_UNIX)
    abstract.bind(f"\0benchlab-test-{tag}")
    listeners.append(abstract)
    # A Unix socket where services keep theirs (/run, root only), else in a folder anyone may reach.
    base = Path("/run") if os.access("/run", os.W_OK) else tmp_path
    folder = base / f"benchlab-test-{tag}"
    folder.mkdir()
    os.chmod(folder, 0o777)
    path = str(folder / "service.sock")
    unix = socket.socket(socket.AF_UNIX)
    unix.bind(path)
    os.chmod(path, 0o777)
    listeners.append(unix)
    try:
        for listener in listeners:
            listener.listen(8)
        program = f"""
import socket
reached = []
for family, address in ((socket.AF_INET, ("127.0.0.1", {tcp.getsockname()[1]})),
                        (socket.AF_UNIX, {path!r}), (socket.AF_UNIX, "\\0benchlab-test-{tag}")):
    s = socket.socket(family)
    s.settimeout(2)
    try:
        s.connect(address)
        reached.append(str(address))
    except OSError:
        pass
print(reached)
"""
        result = runner(program)
        assert result["passed"], result
        assert result["stdout"].strip() == "[]"
        for listener in listeners:
            listener.setblocking(False)
            with pytest.raises(BlockingIOError):
                listener.accept()
    finally:
        for listener in listeners:
            listener.close()
        shutil.rmtree(folder, ignore_errors=True)


# Holds 100 MiB blocks in as many processes and threads as it can, all at once, and prints
# the MiB held: each holder reports on a pipe once its block is allocated and touched.
_AGGREGATE_MEMORY = """
import os, threading, time
BLOCK = 100
r, w = os.pipe()
def hold():
    try:
        block = bytearray(BLOCK * 2**20)
        block[::4096] = b"x" * len(block[::4096])
    except MemoryError:
        return
    os.write(w, b"1")
    time.sleep(2)
for _ in range(6):
    try:
        if os.fork() == 0:
            hold()
            os._exit(0)
    except OSError:
        break
for _ in range(6):
    try:
        threading.Thread(target=hold, daemon=True).start()
    except RuntimeError:
        break
held = 0
deadline = time.monotonic() + 1.5
os.set_blocking(r, False)
while time.monotonic() < deadline:
    try:
        held += len(os.read(r, 64)) * BLOCK
    except BlockingIOError:
        time.sleep(0.02)
print(held)
"""


def test_the_memory_limit_holds_for_the_whole_program(runner):
    limits = SandboxLimits(timeout_secs=8, cpu_secs=6, memory_mb=256, processes=8, output_cap=4096)
    result = runner(_AGGREGATE_MEMORY, limits)
    assert result["stdout"].strip(), result
    held = int(result["stdout"].split()[0])
    assert 0 < held <= limits.memory_mb, f"one program held {held} MiB with memory_mb={limits.memory_mb}"


# Memory a program holds outside its address space, 16 MiB at a time up to 1 GiB, each step
# printed once held: the last number is what it held when it was stopped.
_SHARED_MEMORY = {
    "memfd written": """
for _ in range(64):
    fd = os.memfd_create("m")
    for _ in range(16):
        os.write(fd, b"x" * 2**20)
    keep.append(fd); report()
""",
    "memfd with fallocate(KEEP_SIZE)": """
for _ in range(64):
    fd = os.memfd_create("m")
    if libc.fallocate(fd, 1, ctypes.c_long(0), ctypes.c_long(CHUNK)) != 0:
        break
    keep.append(fd); report()
""",
    "SysV shared memory, detached": """
libc.shmat.restype = ctypes.c_void_p
for _ in range(64):
    sid = libc.shmget(0, CHUNK, 0o1600)
    addr = libc.shmat(sid, None, 0) if sid >= 0 else None
    if addr in (None, ctypes.c_void_p(-1).value):
        break
    ctypes.memset(addr, 1, CHUNK); libc.shmdt(ctypes.c_void_p(addr)); report()
""",
}
_SHARED_HEAD = """
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
CHUNK = 16 * 2**20
held, keep = 0, []
def report():
    global held
    held += 16
    print(held, flush=True)
"""


@pytest.mark.parametrize("trick", sorted(_SHARED_MEMORY))
def test_memory_outside_the_address_space_counts_against_the_limit(runner, trick):
    limits = SandboxLimits(timeout_secs=10, cpu_secs=8, memory_mb=256, open_files=128, output_cap=4096)
    result = runner(_SHARED_HEAD + _SHARED_MEMORY[trick], limits)
    held = max([int(x) for x in result["stdout"].split() if x.isdigit()] or [0])
    assert held <= limits.memory_mb, f"{trick}: one program held {held} MiB with memory_mb={limits.memory_mb}"
    assert held >= 64, result  # it did run, and got as far as the limit allows
    assert result["memory_exceeded"] or result["exit_code"] != 0, result


def test_there_is_no_path_to_the_programs_memory(runner):
    program = """
import os
opened = []
for path in ("/proc/self/mem", "/dev/fd/../mem", "/dev/fd/../maps", "/proc/1/mem", "/dev/stdin/../../mem"):
    try:
        os.close(os.open(path, os.O_RDONLY))
        opened.append(path)
    except OSError:
        pass
print(opened, os.path.exists("/proc/self"), os.path.realpath("/dev/fd"))
"""
    result = runner(program)
    assert result["passed"], result
    opened, _, rest = result["stdout"].strip().partition("] ")
    assert opened == "[" and rest.startswith("False"), result["stdout"]


def test_the_root_dev_and_the_sandbox_folder_are_read_only(runner):
    program = """
import errno, os
written = []
for folder in ("/", "/dev", "/sandbox", "/usr", "/dev/shm/..", "/tmp/work/../.."):
    try:
        with open(os.path.join(folder, "planted"), "w") as f:
            f.write("x")
        written.append(folder)
    except OSError:
        pass
for folder in ("/new-folder", "/dev/new-folder", "/sandbox/new-folder"):
    try:
        os.mkdir(folder)
        written.append(folder)
    except OSError:
        pass
with open("/tmp/ok", "w") as f:
    f.write("the program's one writable place")
print(written)
"""
    result = runner(program)
    assert result["passed"], result
    assert result["stdout"].strip() == "[]"


def test_health_describes_the_confinement_that_holds(sandbox):
    described = sandbox.describe()
    assert described["proc"] is False
    assert "cgroup" in described["memory"] and described["memory_mb"] == LIMITS.memory_mb


def test_a_detached_grandchild_does_not_outlive_the_program(runner):
    marker = f"{int(time.time())}.{uuid.uuid4().int % 10**9}"
    program = f"""
import os
try:
    if os.fork() == 0:
        os.setsid()
        if os.fork() == 0:
            os.execv("/bin/sleep", ["sleep", "{marker}"])
        os._exit(0)
except OSError as exc:
    print("no fork:", exc)
# The program itself also becomes a long sleep, ended only by the time limit.
os.execv("/bin/sleep", ["sleep", "{marker}"])
"""
    result = runner(program, SandboxLimits(timeout_secs=2, output_cap=4096))
    assert result["timed_out"], result
    survivors = []
    for pid in (p for p in os.listdir("/proc") if p.isdigit()):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                if marker.encode() in f.read():
                    survivors.append(int(pid))
        except OSError:
            pass
    for pid in survivors:  # started by this test's program: ours to end
        os.kill(pid, signal.SIGKILL)
    assert survivors == []


def test_fork_and_disk_bombs_are_contained(runner):
    program = """
import os
forks = 0
for _ in range(200):
    try:
        if os.fork() == 0:
            while True:
                pass
        forks += 1
    except OSError:
        pass
written = 0
try:
    with open("/tmp/big", "wb") as f:
        while True:
            f.write(b"x" * 2**20)
            written += 1
except OSError as exc:
    print(forks, written, exc.errno)
"""
    result = runner(program, SandboxLimits(timeout_secs=5, file_size_mb=8, tmpfs_mb=4, output_cap=4096))
    forks, written, code = map(int, result["stdout"].split())
    assert forks == 0
    assert written <= 8 and code in (errno.ENOSPC, errno.EFBIG)


def test_a_time_bomb_is_stopped_at_the_limit(runner):
    start = time.monotonic()
    result = runner("import time\nwhile True:\n    time.sleep(0.01)\n", SandboxLimits(timeout_secs=2))
    assert result["timed_out"] and not result["passed"]
    assert time.monotonic() - start < 2 + 30  # the launcher's own guard is the limit + 15 s


@pytest.fixture
def state_folder() -> Iterator[Path]:
    """A server state folder with gold answers, readable by every user, outside /tmp."""
    if os.access(Path.cwd(), os.W_OK):
        folder = Path.cwd() / f".sandbox-test-state-{uuid.uuid4().hex[:12]}"
        folder.mkdir()
    else:  # an ordinary user without a writable checkout: /tmp, which the sandbox hides as well
        folder = Path(tempfile.mkdtemp(prefix="sandbox-test-state-"))
    try:
        (folder / "gold.jsonl").write_text('{"answer": "the-gold-answer"}\n')
        os.chmod(folder, 0o755)
        os.chmod(folder / "gold.jsonl", 0o644)
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def test_nothing_of_the_hosts_data_is_readable(runner, state_folder):
    program = f"""
import os
read = []
for path in ({str(state_folder / "gold.jsonl")!r}, "/etc/passwd", "/etc/hostname"):
    try:
        read.append((path, open(path).read()[:40]))
    except OSError:
        pass
print(read)
print(sorted(os.listdir("/")))
"""
    result = runner(program)
    assert result["passed"], result
    lines = result["stdout"].splitlines()
    assert "the-gold-answer" not in result["stdout"]
    assert lines[0] == "[]"
    # The root holds the interpreter's folders and the program's own, and nothing else.
    assert not {"etc", "home", "root", "run", "srv", "work", "opt"} & set(eval(lines[1]))


def test_the_program_holds_no_capability(runner):
    # No /proc in the sandbox: the kernel is asked directly (capget, and prctl for the bounding
    # and ambient sets).
    program = """
import ctypes, struct
libc = ctypes.CDLL(None, use_errno=True)
header = ctypes.create_string_buffer(struct.pack("=Ii", 0x20080522, 0), 8)
data = ctypes.create_string_buffer(24)
assert libc.capget(header, data) == 0, ctypes.get_errno()
eff0, prm0, inh0, eff1, prm1, inh1 = struct.unpack("=6I", data.raw)
bounding = [c for c in range(64) if libc.prctl(36, c, 0, 0, 0) == 1]  # PR_CAPBSET_READ
ambient = [c for c in range(64) if libc.prctl(47, 1, c, 0, 0) == 1]  # PR_CAP_AMBIENT_IS_SET
print([eff0 | eff1 << 32, prm0 | prm1 << 32, inh0 | inh1 << 32, bounding, ambient])
"""
    result = runner(program)
    assert result["passed"], result
    assert result["stdout"].strip() == "[0, 0, 0, [], []]"


# -- Fail closed ----------------------------------------------------------------------------------


def test_without_bubblewrap_no_code_runs_and_the_reason_is_given(monkeypatch, tmp_path):
    # A PATH with the interpreter's tools but no bwrap.
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(EvaluationError, match="needs bubblewrap, which is not installed"):
        Sandbox(LIMITS)


def test_without_a_cgroup_no_code_runs_and_the_reason_is_given(tmp_path):
    with pytest.raises(EvaluationError, match="not a cgroup of the memory controller"):
        Sandbox(LIMITS, cgroup=str(tmp_path))


def test_a_server_user_without_a_cgroup_of_its_own_scores_no_code():
    """As nobody, with no cgroup delegated, the sandbox refuses to start and says what to do."""
    if os.geteuid() != 0:
        pytest.skip("needs root to become nobody")
    prefix, env = _as_user_command()
    job = json.dumps({"limits": asdict(LIMITS), "program": "print(1)", "cgroup": None})
    proc = subprocess.run([*prefix, default_python(), "-c", _RUN_AS_USER], input=job, text=True,
                          capture_output=True, env=env, cwd="/", check=False, timeout=120)
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert "cgroup" in out.get("setup_error", ""), out
    assert "sandbox.cgroup" in out["setup_error"]


def test_without_a_cgroup_the_server_starts_only_without_code_benchmarks_and_health_says_why(tmp_path):
    from evalsvc_testkit import TOKEN, write_config

    from benchlab.evaluate.config import load_config
    from benchlab.evaluate.server import create_app

    sandbox = {"cgroup": str(tmp_path)}
    with pytest.raises(EvaluationError, match="cgroup"):
        create_app(load_config(write_config(tmp_path, sandbox=sandbox)), token=TOKEN)
    config = load_config(write_config(tmp_path, sandbox=sandbox))
    config.benchmarks = {k: v for k, v in config.benchmarks.items() if v.scorer != "code"}
    app = create_app(config, token=TOKEN)
    assert any("no code sandbox" in w and "cgroup" in w for w in app.state.bench.warnings)


def test_an_interpreter_the_sandbox_cannot_run_is_a_clear_error(tmp_path):
    with pytest.raises(EvaluationError, match="cannot run .*set sandbox.python"):
        Sandbox(LIMITS, python=str(tmp_path / "no-such-python"))


@pytest.fixture
def open_tmp() -> Iterator[Path]:
    """A folder under /tmp that every user may enter, as CI's virtualenv folder is (pytest's own
    temporary folders are its user's alone)."""
    folder = Path(tempfile.mkdtemp(prefix="benchlab-sandbox-test-", dir="/tmp"))
    os.chmod(folder, 0o755)
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def test_an_interpreter_under_tmp_runs_and_nothing_else_of_tmp_is_seen(open_tmp):
    """CI's virtualenv lives under /tmp, where the program's own tmpfs goes: it is shown there,
    read-only, and its neighbours are not."""
    tmp_path = open_tmp
    venv = tmp_path / "venv"
    subprocess.run([default_python(), "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    if not str(venv.resolve()).startswith("/tmp/"):
        pytest.skip("the temporary folder is not under /tmp here")
    os.chmod(tmp_path, 0o755)
    (tmp_path / "gold.jsonl").write_text("the-gold-answer\n")
    os.chmod(tmp_path / "gold.jsonl", 0o644)
    sandbox = Sandbox(LIMITS, concurrency=1, python=str(venv / "bin" / "python"))
    program = f"""
import os, sys
print(sys.prefix)
print(sorted(os.listdir({str(tmp_path)!r})))
try:
    open({str(venv / "planted.py")!r}, "w")
except OSError as exc:
    print(type(exc).__name__)
"""
    result = run(sandbox, program)
    assert result.passed, result
    prefix, listing, write = result.stdout.splitlines()
    assert prefix == str(venv)
    assert listing == "['venv']"  # gold.jsonl beside it is not there
    assert write == "OSError"
    assert not (venv / "planted.py").exists()


def test_the_file_cap_is_exact_with_an_interpreter_under_tmp(open_tmp):
    tmp_path = open_tmp
    venv = tmp_path / "a" / "b" / "venv"
    subprocess.run([default_python(), "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    if not str(venv.resolve()).startswith("/tmp/"):
        pytest.skip("the temporary folder is not under /tmp here")
    for folder in (tmp_path, tmp_path / "a", tmp_path / "a" / "b"):
        os.chmod(folder, 0o755)
    sandbox = Sandbox(LIMITS, concurrency=1, python=str(venv / "bin" / "python"))
    program = (
        "import os\nn = 0\ntry:\n    while True:\n        open(f'f{n}', 'w').close()\n        n += 1\n"
        "except OSError as exc:\n    print(n, exc.errno)\n"
    )
    created, code = map(int, run(sandbox, program).stdout.split())
    assert code == errno.ENOSPC
    # The folders that show the interpreter are not the program's: it still gets max_files.
    assert LIMITS.max_files - 2 <= created <= LIMITS.max_files


@pytest.mark.parametrize("mode", ["none", "userns", "root"])
def test_modes_without_a_pid_namespace_are_refused(mode, tmp_path):
    from benchlab.errors import UserError
    from benchlab.evaluate.config import load_config

    with pytest.raises(EvaluationError, match="unknown sandbox mode"):
        Sandbox(LIMITS, mode=mode)
    config = tmp_path / "eval.yaml"
    config.write_text(f"sandbox:\n  mode: {mode}\n")
    with pytest.raises(UserError, match="mode"):
        load_config(config)


def test_writes_to_every_world_writable_host_directory_leave_nothing(runner, host_writable_dirs):
    name = f"escape-{uuid.uuid4().hex[:12]}-"
    result = runner(_write_everywhere(name, host_writable_dirs))
    assert result["passed"], result
    # Inside, only the private tmpfs (seen at /tmp, /var/tmp, /dev/shm) takes writes ...
    assert set(json.loads(result["stdout"])) <= {"/tmp", "/var/tmp", "/dev/shm"}
    # ... and on the host nothing at all is left.
    assert _left_on_host(name, host_writable_dirs) == []


def test_a_sandbox_that_breaks_after_start_up_scores_nothing_and_says_why():
    sandbox = Sandbox(LIMITS, concurrency=1)
    sandbox._bwrap = "/bin/false"  # as if bubblewrap had been removed or broken since start-up
    with pytest.raises(EvaluationError, match="sandbox could not be set up: bwrap exited with status 1"):
        run(sandbox, "print('never run')\n")


_JUDGE_AS_USER = """
import asyncio, json, sys
from benchlab.evaluate.harness import judge
from benchlab.evaluate.sandbox import Sandbox, SandboxLimits
job = json.loads(sys.stdin.read())
sandbox = Sandbox(SandboxLimits(**job["limits"]), concurrency=1, cgroup=job["cgroup"])
async def main():
    return [(await judge(sandbox, answer, job["tests"])).all_passed for answer in job["answers"]]
print(json.dumps(asyncio.run(main())))
"""


@pytest.mark.slow
@pytest.mark.parametrize("as_nobody", [False, True])
def test_tests_run_whole_judge_through_two_sandboxes_as_root_and_as_an_ordinary_user(as_nobody, request):
    # A loop over the answer's result holding asserts: the tests' program runs whole in one sandbox,
    # the answer in another (Sandbox.pair), a right answer passes and a wrong one fails.
    tests = "out = my_sort([3, 1, 2])\nfor i, x in enumerate(out):\n    assert x == i + 1\n"
    answers = ["def my_sort(xs):\n    return sorted(xs)\n", "def my_sort(xs):\n    return xs\n"]
    if not as_nobody:
        async def here():
            sandbox = Sandbox(LIMITS, concurrency=1)
            return [(await judge(sandbox, answer, tests)).all_passed for answer in answers]
        assert asyncio.run(here()) == [True, False]
        return
    if os.geteuid() != 0:
        pytest.skip("the tests already run as an ordinary user")
    prefix, env = _as_user_command()
    cgroup = request.getfixturevalue("nobody_cgroup")
    enter = ["sh", "-c", f'echo $$ > {cgroup}/server/cgroup.procs && exec "$@"', "sh"]
    job = json.dumps({"limits": asdict(LIMITS), "tests": tests, "answers": answers, "cgroup": cgroup})
    proc = subprocess.run([*enter, *prefix, default_python(), "-c", _JUDGE_AS_USER], input=job, text=True,
                          capture_output=True, env=env, cwd="/", check=False, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert json.loads(proc.stdout.strip().splitlines()[-1]) == [True, False]
