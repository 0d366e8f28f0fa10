"""`benchlab gpus --reclaim` on real processes that the recorded H100 reports as its holders.

The recording is the real H100's "foreign-idle-10GB" reading (a process holding 10 GB at
0%), with the process list replaced by pids of processes these tests start: ours, one
that ignores SIGTERM, another user's, and a pid nobody has.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

import psutil
import pytest
from gpu_trace import SRC

H100 = Path(__file__).parents[1] / "data" / "gpus" / "h100-80gb"
GIB = 2**30

SLEEPER = "import time; time.sleep(120)"
STUBBORN = ("import signal, sys, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
            "print('ready', flush=True); time.sleep(120)")


def _start(code: str, **kw) -> subprocess.Popen:
    ready = "SIG_IGN" in code
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE if ready else None,
                            text=True, **kw)
    if ready:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
        proc.stdout.close()
    # Reap it the moment it ends, as a real parent would, so it does not linger as a zombie.
    threading.Thread(target=proc.wait, daemon=True).start()
    return proc


def _unused_pid() -> int:
    pid = 4_000_000
    while psutil.pid_exists(pid):
        pid += 1
    return pid


def _recording(tmp_path: Path, holders: list[tuple[int, int]]) -> Path:
    """The real idle-held reading with ``holders`` (pid, GiB) as its compute processes."""
    data = json.loads((H100 / "foreign-idle-10GB.nvml.json").read_text())
    data["devices"][0]["compute_processes"] = [{"pid": pid, "usedGpuMemory": gib * GIB}
                                               for pid, gib in holders]
    out = tmp_path / "held.nvml.json"
    out.write_text(json.dumps(data))
    return out


def _cli(*args: str, recording: Path, stdin: str = "") -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "BENCHLAB_GPU_DOUBLE": str(recording), "COLUMNS": "160",
           "PYTHONPATH": SRC + os.pathsep + os.environ.get("PYTHONPATH", "")}
    return subprocess.run([sys.executable, "-c", "from benchlab.cli import main; main()", "gpus", *args],
                          input=stdin, capture_output=True, text=True, env=env, timeout=60, check=False)


def _foreign() -> subprocess.Popen | None:
    """A process of another user: started as `nobody` when we are root."""
    if os.geteuid() != 0:
        return None
    # /bin/sleep: nobody may not be allowed to run this checkout's interpreter.
    proc = subprocess.Popen(["sleep", "120"], user="nobody", cwd="/")
    threading.Thread(target=proc.wait, daemon=True).start()
    return proc


@pytest.fixture
def procs():
    started: list[subprocess.Popen] = []
    yield started
    for p in started:
        if p.poll() is None:
            p.kill()


def _release_when_dead(rec: Path, procs: list[subprocess.Popen], gib: int) -> threading.Thread:
    """Play the driver: once ``procs`` have ended, drop them from the recording and ``gib`` from its use."""
    def release() -> None:
        for p in procs:
            p.wait(timeout=60)
        data = json.loads(rec.read_text())
        device = data["devices"][0]
        gone = {p.pid for p in procs}
        device["compute_processes"] = [c for c in device["compute_processes"] if c["pid"] not in gone]
        for key in ("memory_v1", "memory_v2"):
            if key in device:
                device[key]["used"] -= gib * GIB
                device[key]["free"] += gib * GIB
        rec.write_text(json.dumps(data))

    thread = threading.Thread(target=release, daemon=True)
    thread.start()
    return thread


def test_reclaim_ends_own_processes_and_leaves_the_rest(tmp_path, procs):
    mine = _start(SLEEPER)
    stubborn = _start(STUBBORN)
    procs.extend([mine, stubborn])
    other = _foreign()
    other_pid = other.pid if other is not None else 1  # pid 1 belongs to root, not to us
    if other is not None:
        procs.append(other)
    ghost = _unused_pid()
    rec = _recording(tmp_path, [(mine.pid, 4), (stubborn.pid, 3), (other_pid, 2), (ghost, 1)])
    releasing = _release_when_dead(rec, [mine, stubborn], 7)

    done = _cli("--reclaim", "--yes", "--grace", "1", recording=rec)
    releasing.join(10)
    assert done.returncode == 0, done.stdout + done.stderr
    out = done.stdout
    assert f"yours: pid {mine.pid} on GPU 0, 4.0 GiB at 0% utilisation: {sys.executable} -c {SLEEPER}" in out
    assert f"ended pid {mine.pid} on GPU 0 with SIGTERM (it held 4.0 GiB)" in out
    assert f"ended pid {stubborn.pid} on GPU 0 with SIGKILL (it held 3.0 GiB)" in out
    assert f"left alone: pid {other_pid} on GPU 0: it belongs to" in out
    assert f"left alone: pid {ghost} on GPU 0: its owner cannot be seen from here" in out
    # Measured: the driver's memory in use dropped by the 7 GiB the recording released.
    assert "freed 7.0 GiB on GPU 0, as the driver measures it" in out
    mine.wait(timeout=5)
    stubborn.wait(timeout=5)
    assert mine.returncode == -signal.SIGTERM
    assert stubborn.returncode == -signal.SIGKILL
    if other is not None:
        assert other.poll() is None  # another user's process is never touched
    assert psutil.pid_exists(1)


def test_reclaim_asks_first_and_a_no_kills_nothing(tmp_path, procs):
    mine = _start(SLEEPER)
    procs.append(mine)
    rec = _recording(tmp_path, [(mine.pid, 9)])
    done = _cli("--reclaim", recording=rec, stdin="n\n")
    assert done.returncode == 1
    assert f"yours: pid {mine.pid} on GPU 0, 9.0 GiB" in done.stdout
    assert "nothing ended (pass --yes to skip the question)" in done.stdout
    assert mine.poll() is None
    done = _cli("--reclaim", recording=rec, stdin="y\n")
    assert done.returncode == 0, done.stdout + done.stderr
    assert mine.wait(timeout=5) == -signal.SIGTERM


def test_reclaim_with_nothing_of_ours_says_so(tmp_path, procs):
    done = _cli("--reclaim", "--yes", recording=H100 / "idle.nvml.json")
    assert done.returncode == 0
    assert "nothing to reclaim: no idle-held GPU process of yours" in done.stdout
    other = _foreign()
    if other is not None:
        procs.append(other)
    pid, user = (other.pid, "nobody") if other is not None else (1, "root")
    done = _cli("--reclaim", "--yes", "--json", recording=_recording(tmp_path, [(pid, 2)]))
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {"freed": [], "left": [
        {"device": 0, "process": {"pid": pid, "user": user, "used_memory_mib": 2048},
         "refusal": f"it belongs to {user}, not to you"}]}
    assert other is None or other.poll() is None


def test_reclaim_never_signals_init_or_its_own_caller(tmp_path):
    # As root, pid 1 is "ours" by uid; it is still never a GPU zombie to end.
    rec = _recording(tmp_path, [(1, 2), (os.getpid(), 1)])
    done = _cli("--reclaim", "--yes", recording=rec)
    assert done.returncode == 0
    assert "left alone: pid 1 on GPU 0" in done.stdout
    assert f"left alone: pid {os.getpid()} on GPU 0" in done.stdout
    assert psutil.pid_exists(1)


def test_reclaim_ends_nothing_the_driver_does_not_show_holding_memory(tmp_path, procs):
    mine = _start(SLEEPER)
    procs.append(mine)
    rec = _recording(tmp_path, [(mine.pid, 0)])
    done = _cli("--reclaim", "--yes", recording=rec)
    assert done.returncode == 0, done.stdout + done.stderr
    assert (f"left alone: pid {mine.pid} on GPU 0: the driver does not show it holding memory on this GPU"
            in done.stdout)
    assert "nothing to reclaim" in done.stdout
    assert mine.poll() is None


def test_reclaim_reports_what_the_driver_measures_not_what_the_processes_held(tmp_path, procs):
    mine = _start(SLEEPER)
    procs.append(mine)
    rec = _recording(tmp_path, [(mine.pid, 6)])  # the driver goes on showing it: nothing is freed
    done = _cli("--reclaim", "--yes", recording=rec)
    assert done.returncode == 0, done.stdout + done.stderr
    assert mine.wait(timeout=5) == -signal.SIGTERM
    assert f"the driver still lists pid {mine.pid} on GPU 0" in done.stdout
    assert "freed 0.0 GiB on GPU 0, as the driver measures it" in done.stdout


def test_confirm_keeps_only_holders_the_driver_shows_with_memory_now():
    from benchlab.execute.gpus import DeviceReading, GpuProcess
    from benchlab.execute.reclaim import Holder, confirm

    planned = [Holder(0, GpuProcess(pid, "me", 1024), None, 1.0) for pid in (11, 12, 13)]
    now = [DeviceReading(0, "GPU-0", "H100", 81559, 2048, 0,
                         (GpuProcess(11, "me", 1024), GpuProcess(12, "me", 0)))]
    still, gone = confirm(planned, now)
    assert [h.process.pid for h in still] == [11]
    assert [(h.process.pid, h.refusal) for h in gone] == [
        (12, "the driver does not show it holding memory on this GPU"),
        (13, "the driver no longer lists it on this GPU"),
    ]


# -- ending and measuring, as a library call ----------------------------------------------------


class _Driver:
    """An inventory that plays the driver: ``procs`` hold ``mib`` each on device 0 while they live
    (``keeps`` them listed after they end: a driver slow to let go)."""

    source = "test"

    def __init__(self, procs: list[subprocess.Popen], mib: int, keeps: bool = False):
        self.procs, self.mib, self.keeps = procs, mib, keeps

    def read(self):
        from benchlab.execute.gpus import DeviceReading, GpuProcess

        held = tuple(GpuProcess(p.pid, "me", self.mib) for p in self.procs if self.keeps or p.poll() is None)
        return [DeviceReading(0, "GPU-0", "H100", 81559, 500 + self.mib * len(held), 0, held)]

    def sample(self, window_s: float):
        return []


def _holder(proc: subprocess.Popen, mib: int):
    from benchlab.execute.gpus import GpuProcess
    from benchlab.execute.reclaim import Holder

    return Holder(0, GpuProcess(proc.pid, "me", mib), None, psutil.Process(proc.pid).create_time())


def test_end_and_measure_ends_the_holders_and_measures_what_the_driver_let_go(procs):
    from benchlab.execute.reclaim import end_and_measure

    a, b = _start(SLEEPER), _start(SLEEPER)
    procs.extend([a, b])
    done = end_and_measure(_Driver([a, b], 2048), [_holder(a, 2048), _holder(b, 2048)], grace_s=1)
    assert [f.how for f in done.freed] == ["SIGTERM", "SIGTERM"]
    assert (done.gone, done.lingering, done.failed) == ([], [], False)
    assert done.devices == [0] and done.measured_freed_mib == {0: 4096}
    assert (done.used_mib(0, after=False), done.used_mib(0, after=True)) == (500 + 4096, 500)


def test_end_and_measure_waits_a_bounded_time_and_says_which_ended_processes_the_driver_still_lists(procs):
    from benchlab.execute.reclaim import end_and_measure

    mine = _start(SLEEPER)
    procs.append(mine)
    now, slept = [0.0], []

    def sleep(s: float) -> None:
        slept.append(s)
        now[0] += s

    done = end_and_measure(_Driver([mine], 1024, keeps=True), [_holder(mine, 1024)], grace_s=1,
                           release_wait_s=2.0, clock=lambda: now[0], sleep=sleep)
    assert mine.wait(timeout=5) == -signal.SIGTERM
    assert done.lingering == [(0, mine.pid)] and done.measured_freed_mib == {0: 0}
    assert sum(slept) == pytest.approx(2.0)  # the whole release wait, and no more


def test_end_and_measure_leaves_alone_a_holder_the_driver_no_longer_shows(procs):
    from benchlab.execute.reclaim import end_and_measure

    mine, other = _start(SLEEPER), _start(SLEEPER)
    procs.extend([mine, other])
    done = end_and_measure(_Driver([other], 1024), [_holder(mine, 1024)], grace_s=1)
    assert [(h.process.pid, h.refusal) for h in done.gone] == [(mine.pid, "the driver no longer lists it on this GPU")]
    assert done.freed == [] and mine.poll() is None
