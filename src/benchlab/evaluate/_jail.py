"""Launcher of one sandboxed program. Run as a script (``python -I _jail.py CONFIG_JSON``), stdlib only.

Reads the program from stdin, runs it under the isolation that ``CONFIG["mode"]``
names, and prints one JSON line: exit code, signal, timed_out, and the first
``output_cap`` bytes of the program's stdout and stderr.

Modes (``sandbox.probe_isolation`` picks the strongest that works here):

- ``root``: new network, mount, PID, IPC and UTS namespaces; the program runs
  under an unprivileged uid of its own (so RLIMIT_NPROC applies) as a child of a
  tiny init, and when the init dies the kernel kills everything left in the
  namespace, even processes that left the process group.
- ``userns``: a new user, network and mount namespace; the program keeps the caller's uid.
- ``none``: rlimits, process group and throwaway directory only (no network isolation,
  no file-system confinement).

File system (``root`` and ``userns``), as ``CONFIG["filesystem"]`` says:

- ``readonly``: every mount of this mount namespace becomes read-only
  (``mount_setattr`` with ``AT_RECURSIVE``, or one bind-remount per mount on
  kernels before 5.12); the host's mounts are untouched.
- ``cover``: where that fails, each directory of ``CONFIG["cover"]`` (the
  world-writable ones, found by the caller at start-up) is hidden under an
  empty read-only tmpfs.

Then the program's only writable place is one private tmpfs, capped at
``tmpfs_mb`` MiB and ``max_files`` inodes (files, directories and hard links
alike), mounted on /tmp and bound onto /var/tmp and /dev/shm. It disappears
with the namespace. The program's stdout and stderr go to memfds, which the
program cannot replace or point elsewhere.
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
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC, MS_REMOUNT, MS_BIND = 1, 2, 4, 8, 32, 4096
MS_REC, MS_PRIVATE = 16384, 1 << 18
PR_SET_PDEATHSIG = 1
MOUNT_ATTR_RDONLY, AT_FDCWD, AT_RECURSIVE, SYS_MOUNT_SETATTR = 0x1, -100, 0x8000, 442
# Inodes of the private tmpfs that are not the program's: its root, work/, main.py.
RESERVED_INODES = 3
# Mount options that a bind-remount must repeat (else it would clear them, which a user namespace forbids).
_KEPT_OPTIONS = {"nosuid": MS_NOSUID, "nodev": MS_NODEV, "noexec": MS_NOEXEC,
                 "noatime": 1024, "nodiratime": 2048, "relatime": 1 << 21}

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


class _MountAttr(ctypes.Structure):
    _fields_ = [
        ("attr_set", ctypes.c_uint64),
        ("attr_clr", ctypes.c_uint64),
        ("propagation", ctypes.c_uint64),
        ("userns_fd", ctypes.c_uint64),
    ]


def _mount_points() -> list[tuple[str, int]]:
    """Every mount point of this namespace with the flags a remount must keep, parents first."""
    points = []
    with open("/proc/self/mountinfo") as f:
        for line in f:
            fields = line.split()
            # Octal escapes (\040 for a space) as the kernel writes them.
            target = fields[4].encode().decode("unicode_escape")
            flags = 0
            for option in fields[5].split(","):
                flags |= _KEPT_OPTIONS.get(option, 0)
            points.append((target, flags))
    return sorted(points, key=lambda p: p[0].count("/"))


def _readonly_root() -> None:
    """Make every mount of this (private) mount namespace read-only."""
    attr = _MountAttr(MOUNT_ATTR_RDONLY, 0, 0, 0)
    ret = _libc.syscall(SYS_MOUNT_SETATTR, AT_FDCWD, b"/", AT_RECURSIVE, ctypes.byref(attr),
                        ctypes.sizeof(attr))
    if ret == 0:
        return
    for target, flags in _mount_points():
        try:
            _mount("none", target, None, MS_REMOUNT | MS_BIND | MS_RDONLY | flags, None)
        except OSError as exc:
            if os.path.exists(target):
                raise OSError(exc.errno, f"cannot make {target} read-only: {exc.strerror}") from None


def _cover(paths: list[str]) -> None:
    """Hide each of ``paths`` under an empty read-only tmpfs."""
    for target in paths:
        if os.path.isdir(target) and not os.path.islink(target):
            _mount("tmpfs", target, "tmpfs", MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC,
                   "size=4k,nr_inodes=1,mode=555")


def _private_tmpfs(cfg: dict) -> str:
    """Confine writes to one capped tmpfs on /tmp (also seen at /var/tmp and /dev/shm); its work folder."""
    shared = ("/var/tmp", "/dev/shm")
    if cfg["filesystem"] == "readonly":
        _readonly_root()
    else:
        _cover([p for p in cfg["cover"] if p != "/tmp" and p not in shared])
    inodes = cfg["max_files"] + RESERVED_INODES
    _mount("tmpfs", "/tmp", "tmpfs", MS_NOSUID | MS_NODEV,
           f"size={cfg['tmpfs_mb']}m,nr_inodes={inodes},mode=1777")
    for target in shared:
        if os.path.isdir(target) and not os.path.islink(target):
            _mount("/tmp", target, None, MS_BIND, None)
    workdir = "/tmp/work"
    os.mkdir(workdir, 0o700)
    if cfg["drop"]:
        os.chown(workdir, cfg["uid"], cfg["uid"])
    return workdir


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


def _read_capped(fd: int, cap: int) -> str:
    data = os.pread(fd, cap + 1, 0)
    text = data[:cap].decode("utf-8", "replace")
    return text + "\n[output truncated]" if len(data) > cap else text


def _setup(cfg: dict) -> tuple[str, str | None]:
    """Enter the isolation of ``cfg["mode"]``: the program's working folder, and a host folder to delete after."""
    mode = cfg["mode"]
    if mode == "root":
        _unshare(CLONE_NEWNET | CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWIPC | CLONE_NEWUTS)
    elif mode == "userns":
        uid, gid = os.getuid(), os.getgid()
        _unshare(CLONE_NEWUSER | CLONE_NEWNET | CLONE_NEWNS)
        with open("/proc/self/setgroups", "w") as f:
            f.write("deny")
        with open("/proc/self/uid_map", "w") as f:
            f.write(f"{uid} {uid} 1")
        with open("/proc/self/gid_map", "w") as f:
            f.write(f"{gid} {gid} 1")
    else:
        workdir = tempfile.mkdtemp(prefix="benchlab-sandbox-")
        if cfg["drop"]:
            os.chown(workdir, cfg["uid"], cfg["uid"])
        return workdir, workdir
    _mount("none", "/", None, MS_REC | MS_PRIVATE, None)
    try:
        return _private_tmpfs(cfg), None
    except OSError as exc:
        raise _SetupError(f"file system confinement ({cfg['filesystem']}) failed: {exc}") from None


class _SetupError(Exception):
    pass


def main() -> None:
    cfg = json.loads(sys.argv[1])
    program = sys.stdin.buffer.read(cfg["max_program_bytes"] + 1)
    if len(program) > cfg["max_program_bytes"]:
        print(json.dumps({"error": "program too large"}))
        return
    mode = cfg["mode"]
    # As root, the program runs under a uid of its own: RLIMIT_NPROC does not bind root.
    cfg["drop"] = os.geteuid() == 0
    try:
        workdir, cleanup = _setup(cfg)
    except _SetupError as exc:
        print(json.dumps({"error": str(exc), "setup": True}))
        return
    with open(os.path.join(workdir, "main.py"), "wb") as f:
        f.write(program)
    # memfds: in no folder, so the program can neither fill them up through the file cap
    # nor swap them for a link to a file it may not read.
    out_fd = os.memfd_create("stdout", 0)
    err_fd = os.memfd_create("stderr", 0)
    start = time.monotonic()
    pid = os.fork()
    if pid == 0:
        if mode == "root":
            _init(cfg, workdir, out_fd, err_fd)
        _libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
        _exec_program(cfg, workdir, out_fd, err_fd)
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
        "stdout": _read_capped(out_fd, cap),
        "stderr": _read_capped(err_fd, cap),
    }
    if cleanup:
        shutil.rmtree(cleanup, ignore_errors=True)
    sys.stdout.write(json.dumps(result) + "\n")


if __name__ == "__main__":
    main()
