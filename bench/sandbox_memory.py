"""How much memory one sandboxed program holds with ``memory_mb=256``, trick by trick.

Each program grabs 16 MiB at a time, touches every page, and prints the MiB it
holds after each step, up to 1 GiB: the last line printed is what it held when
it stopped (a refusal, or the kernel killing it at the limit). The cgroup's own
peak is shown where the sandbox reports one.

    PYTHONPATH=src python bench/sandbox_memory.py

Needs bubblewrap and a cgroup it may write (as root).
"""

from __future__ import annotations

import asyncio
import sys

from benchlab.evaluate.sandbox import Sandbox, SandboxLimits

_HEAD = """
import ctypes, mmap, os, sys, threading, time
libc = ctypes.CDLL(None, use_errno=True)
CHUNK = 16 * 2**20
held = 0
keep = []
def report():
    global held
    held += 16
    print(held, flush=True)
"""

TRICKS = {
    "plain allocation (bytearray)": """
for _ in range(64):
    b = bytearray(CHUNK); b[::4096] = b"x" * (CHUNK // 4096); keep.append(b); report()
""",
    "memfd files, written": """
for _ in range(64):
    fd = os.memfd_create("m"); os.write(fd, b"x" * CHUNK); keep.append(fd); report()
""",
    "memfd + fallocate(KEEP_SIZE)": """
for _ in range(64):
    fd = os.memfd_create("m")
    if libc.fallocate(fd, 1, ctypes.c_long(0), ctypes.c_long(CHUNK)) != 0:
        print("refused", ctypes.get_errno()); break
    keep.append(fd); report()
""",
    "tmpfs file in /dev/shm + fallocate(KEEP_SIZE)": """
for i in range(64):
    fd = os.open(f"/dev/shm/f{i}", os.O_CREAT | os.O_RDWR)
    if libc.fallocate(fd, 1, ctypes.c_long(0), ctypes.c_long(CHUNK)) != 0:
        print("refused", ctypes.get_errno()); break
    keep.append(fd); report()
""",
    "SysV shared memory, detached": """
libc.shmat.restype = ctypes.c_void_p
for _ in range(64):
    sid = libc.shmget(0, CHUNK, 0o1600)
    if sid < 0:
        print("refused", ctypes.get_errno()); break
    addr = libc.shmat(sid, None, 0)
    if addr in (None, ctypes.c_void_p(-1).value):
        print("refused", ctypes.get_errno()); break
    ctypes.memset(addr, 1, CHUNK); libc.shmdt(ctypes.c_void_p(addr)); report()
""",
    "many threads, 16 MiB each": """
def hold():
    try:
        b = bytearray(CHUNK); b[::4096] = b"x" * (CHUNK // 4096)
    except MemoryError:
        return
    report(); time.sleep(5)
for _ in range(64):
    try:
        threading.Thread(target=hold, daemon=True).start()
    except RuntimeError:
        break
    time.sleep(0.05)
time.sleep(1)
""",
}


async def measure() -> None:
    limits = SandboxLimits(timeout_secs=20, cpu_secs=15, memory_mb=256, processes=70, output_cap=1 << 16)
    sandbox = Sandbox(limits, concurrency=1)
    print(f"{'trick':48s} {'held (MiB)':>10s} {'cgroup peak':>12s}  how it ended")
    for name, body in TRICKS.items():
        result = await sandbox.run(_HEAD + body)
        numbers = [int(x) for x in result.stdout.split() if x.isdigit()]
        held = max(numbers) if numbers else 0
        peak = getattr(result, "memory_peak_mb", 0.0)
        ended = "killed at the memory limit" if getattr(result, "memory_exceeded", False) else (
            f"exit {result.exit_code}" + (" (timed out)" if result.timed_out else ""))
        refused = next((line for line in result.stdout.splitlines() if line.startswith("refused")), "")
        print(f"{name:48s} {held:10d} {peak:12.1f}  {ended} {refused}".rstrip())
    sys.stdout.flush()


if __name__ == "__main__":
    asyncio.run(measure())
