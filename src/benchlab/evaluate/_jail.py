"""Launcher of one sandboxed program. Run as a script (``python -I _jail.py CONFIG_JSON``), stdlib only.

Reads the program from stdin, runs it under the isolation that ``CONFIG["mode"]``
names, and prints one JSON line: exit code, signal, timed_out, and the first
``output_cap`` bytes of the program's stdout and stderr.

Modes (``sandbox.probe_isolation`` picks the strongest that works here):

- ``root``: new network, mount, PID, IPC and UTS namespaces; a size-capped tmpfs
  over /tmp, /var/tmp and /dev/shm holds the working directory; the program runs
  under an unprivileged uid of its own (so RLIMIT_NPROC applies) as a child of a
  tiny init, and when the init dies the kernel kills everything left in the
  namespace, even processes that left the process group.
- ``userns``: a new user and network namespace, a throwaway host directory.
- ``none``: rlimits, process group and throwaway directory only (no network isolation).
"""

from __future__ import annotations

import ctypes
import json
import os
import resource
import shutil
import signal
import sys
import tempfile
import time

CLONE_NEWNS, CLONE_NEWUTS, CLONE_NEWIPC = 0x00020000, 0x04000000, 0x08000000
CLONE_NEWUSER, CLONE_NEWPID, CLONE_NEWNET = 0x10000000, 0x20000000, 0x40000000
MS_NOSUID, MS_NODEV, MS_NOEXEC, MS_REC, MS_PRIVATE = 2, 4, 8, 16384, 1 << 18
PR_SET_PDEATHSIG = 1

_libc = ctypes.CDLL(None, use_errno=True)


def _check(ret: int, what: str) -> None:
    if ret != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")


def _unshare(flags: int) -> None:
    _check(_libc.unshare(flags), "unshare")


def _mount(source: str, target: str, fstype: str | None, flags: int, data: str | None) -> None:
    _check(
        _libc.mount(
            source.encode(),
            target.encode(),
            fstype.encode() if fstype else None,
            flags,
            data.encode() if data else None,
        ),
        f"mount {target}",
    )


def _limits(cfg: dict) -> None:
    mb = 1024 * 1024
    cpu = int(cfg["cpu_secs"])
    resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 1))
    resource.setrlimit(resource.RLIMIT_AS, (cfg["memory_mb"] * mb, cfg["memory_mb"] * mb))
    resource.setrlimit(resource.RLIMIT_FSIZE, (cfg["file_size_mb"] * mb, cfg["file_size_mb"] * mb))
    resource.setrlimit(resource.RLIMIT_NOFILE, (cfg["open_files"], cfg["open_files"]))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    nproc = cfg["processes"]
    if not cfg["drop"]:
        # The limit counts every process of this uid, the server's included.
        nproc += _processes_of(os.getuid())
    resource.setrlimit(resource.RLIMIT_NPROC, (nproc, nproc))


def _processes_of(uid: int) -> int:
    count = 0
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                count += os.stat(f"/proc/{entry}").st_uid == uid
            except OSError:
                pass
    return count


def _exec_program(cfg: dict, workdir: str, out_fd: int, err_fd: int) -> None:
    """In the forked child: limits, drop privileges, exec. Never returns."""
    try:
        os.chdir(workdir)
        devnull = os.open(os.devnull, os.O_RDONLY)
        os.dup2(devnull, 0)
        os.dup2(out_fd, 1)
        os.dup2(err_fd, 2)
        os.closerange(3, 1 << 16)
        if cfg["mode"] != "root":
            os.setpgid(0, 0)
        _limits(cfg)
        if cfg["drop"]:
            os.setgroups([])
            os.setgid(cfg["uid"])
            os.setuid(cfg["uid"])
        os.execve(cfg["python"], [cfg["python"], "-I", "-B", "main.py"], {})
    except BaseException as exc:  # noqa: BLE001 - report and leave, whatever happened
        os.write(2, f"sandbox: could not start the program: {exc}\n".encode())
    os._exit(126)


def _init(cfg: dict, workdir: str, out_fd: int, err_fd: int) -> None:
    """PID 1 of the new namespace: start the program, reap orphans, exit with its status."""
    _libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    try:
        _mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, None)
    except OSError:
        pass  # the host /proc still hides other uids' environments
    pid = os.fork()
    if pid == 0:
        _exec_program(cfg, workdir, out_fd, err_fd)
    while True:
        try:
            done, status = os.waitpid(-1, 0)
        except ChildProcessError:
            os._exit(125)
        if done == pid:
            code = os.waitstatus_to_exitcode(status)
            os._exit(code if code >= 0 else 128 - code)


def _read_capped(path: str, cap: int) -> str:
    with open(path, "rb") as f:
        data = f.read(cap + 1)
    text = data[:cap].decode("utf-8", "replace")
    return text + "\n[output truncated]" if len(data) > cap else text


def main() -> None:
    cfg = json.loads(sys.argv[1])
    program = sys.stdin.buffer.read(cfg["max_program_bytes"] + 1)
    if len(program) > cfg["max_program_bytes"]:
        print(json.dumps({"error": "program too large"}))
        return
    mode = cfg["mode"]
    # As root, the program runs under a uid of its own: RLIMIT_NPROC does not bind root.
    cfg["drop"] = os.geteuid() == 0
    cleanup = None
    if mode == "root":
        _unshare(CLONE_NEWNET | CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWIPC | CLONE_NEWUTS)
        _mount("none", "/", None, MS_REC | MS_PRIVATE, None)
        size = f"size={cfg['tmpfs_mb']}m,mode=1777"
        for target in ("/tmp", "/var/tmp", "/dev/shm"):
            if os.path.isdir(target):
                _mount("tmpfs", target, "tmpfs", MS_NOSUID | MS_NODEV, size)
        workdir = "/tmp/work"
        os.mkdir(workdir, 0o700)
        os.chown(workdir, cfg["uid"], cfg["uid"])
    else:
        if mode == "userns":
            uid, gid = os.getuid(), os.getgid()
            _unshare(CLONE_NEWUSER | CLONE_NEWNET)
            with open("/proc/self/setgroups", "w") as f:
                f.write("deny")
            with open("/proc/self/uid_map", "w") as f:
                f.write(f"{uid} {uid} 1")
            with open("/proc/self/gid_map", "w") as f:
                f.write(f"{gid} {gid} 1")
        workdir = cleanup = tempfile.mkdtemp(prefix="benchlab-sandbox-")
        if cfg["drop"]:
            os.chown(workdir, cfg["uid"], cfg["uid"])
    with open(os.path.join(workdir, "main.py"), "wb") as f:
        f.write(program)
    out_path, err_path = os.path.join(workdir, ".stdout"), os.path.join(workdir, ".stderr")
    out_fd = os.open(out_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    err_fd = os.open(err_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    if cfg["drop"]:
        os.fchown(out_fd, cfg["uid"], cfg["uid"])
        os.fchown(err_fd, cfg["uid"], cfg["uid"])

    start = time.monotonic()
    pid = os.fork()
    if pid == 0:
        if mode == "root":
            _init(cfg, workdir, out_fd, err_fd)
        _libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
        _exec_program(cfg, workdir, out_fd, err_fd)
    os.close(out_fd)
    os.close(err_fd)
    timed_out = False
    deadline = start + cfg["timeout_secs"]
    status = None
    while status is None:
        done, st = os.waitpid(pid, os.WNOHANG)
        if done:
            status = st
        elif time.monotonic() > deadline:
            timed_out = True
            # In root mode this is the namespace's init: killing it kills every process in there.
            # Otherwise the program leads its own process group (it did not call setsid).
            os.kill(pid, signal.SIGKILL)
            if mode != "root":
                try:
                    os.killpg(pid, signal.SIGKILL)
                except OSError:
                    pass
            status = os.waitpid(pid, 0)[1]
        else:
            time.sleep(0.005)
    code = os.waitstatus_to_exitcode(status)
    cap = cfg["output_cap"]
    result = {
        "exit_code": code,
        "timed_out": timed_out,
        "duration_secs": round(time.monotonic() - start, 4),
        "stdout": _read_capped(out_path, cap),
        "stderr": _read_capped(err_path, cap),
    }
    if cleanup:
        shutil.rmtree(cleanup, ignore_errors=True)
    sys.stdout.write(json.dumps(result) + "\n")


if __name__ == "__main__":
    main()
