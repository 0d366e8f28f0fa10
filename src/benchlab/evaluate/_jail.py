"""Launcher of one sandboxed program on bubblewrap. Run as a script, stdlib only.

Two stages, both in this file:

- outside (``python -I _jail.py CONFIG_JSON``): reads the program from stdin,
  runs it in ``bwrap`` and prints one JSON line: exit code, timed_out, and the
  first ``output_cap`` bytes of its stdout and stderr, or ``error`` when the
  sandbox could not be set up. It makes the program's cgroup (its memory capped
  at ``memory_mb``, no swap) and moves bubblewrap's process into it before the
  exec, so everything the program holds is counted there. As root it then becomes
  the slot's own unprivileged uid, so that the program's processes are counted
  apart and own nothing of the host.
- inside (``python -I -B /sandbox/jail.py --inner CONFIG_JSON``), the first
  process in the sandbox, still holding CAP_SYS_ADMIN of the sandbox's own user
  namespace: mounts the program's capped tmpfs (bubblewrap 0.8 caps its size but
  not its inodes), writes ``main.py``, sets the rlimits, drops every
  capability and execs the program.

bubblewrap gives new user, PID, network, IPC, UTS and cgroup namespaces, a root
made of nothing but what ``CONFIG["binds"]`` names (read-only) plus a minimal
/dev (the root and /dev then remounted read-only; no /proc), and kills everything
in there when the launcher goes. Its seccomp filter, built here, refuses every new
process (threads are allowed); the cgroup bounds all the memory the program holds,
in its address space or not (memfds, tmpfs files, shared memory).
"""

from __future__ import annotations

import ctypes
import json
import os
import resource
import signal
import struct
import sys
import time

MS_RDONLY, MS_NOSUID, MS_NODEV, MS_REMOUNT, MS_BIND, MS_REC = 1, 2, 4, 32, 4096, 16384
PR_SET_PDEATHSIG, PR_CAPBSET_DROP, PR_SET_CHILD_SUBREAPER = 1, 24, 36
CAP_VERSION_3 = 0x20080522
# Inodes of the private tmpfs that are not the program's: its root, work/, main.py.
RESERVED_INODES = 3
# Descriptors the inner stage finds open: the program on 0, output on 1 and 2, "ready" on 3;
# for a live program (``channel``), the pipe it reads requests from on 6 and the one it writes
# replies to on 7, handed to the program as 3 and 4.
STATUS_FD = 3
READY = b"ready"
CHANNEL_FDS = (6, 7)

# seccomp: classic BPF over struct seccomp_data {int nr; u32 arch; u64 ip; u64 args[6];}.
_LD_ABS, _JEQ, _JSET, _RET = 0x20, 0x15, 0x45, 0x06
_ALLOW, _ERRNO, _KILL = 0x7FFF0000, 0x00050000, 0x80000000
_EPERM, _ENOSYS = 1, 38
CLONE_THREAD = 0x00010000
# arch -> (AUDIT_ARCH, syscalls refused outright, clone, clone3). Refused: fork and vfork (new
# processes), unshare and setns (a user namespace of the program's own would let it mount
# tmpfs, memory outside its address space).
_SYSCALLS = {
    "x86_64": (0xC000003E, (57, 58, 272, 308), 56, 435),
    "aarch64": (0xC00000B7, (97, 268), 220, 435),
}

_libc = ctypes.CDLL(None, use_errno=True)


class _SetupError(Exception):
    """The sandbox could not be set up; the program did not run."""


def _check(ret: int, what: str) -> None:
    if ret != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")


def seccomp_filter(machine: str) -> bytes:
    """A filter that lets the program start threads but no process (fork, vfork, clone without
    CLONE_THREAD fail with EPERM; clone3, whose flags a filter cannot read, with ENOSYS so that
    the C library falls back to clone) and enter no other namespace (unshare, setns: EPERM).
    Another architecture or ABI is killed."""
    if machine not in _SYSCALLS:
        raise _SetupError(f"no process filter for the {machine} architecture (x86_64 and aarch64 only)")
    arch, forks, clone, clone3 = _SYSCALLS[machine]
    # Each entry: (code, true target label or 0, false target label or 0, k).
    prog: list[tuple[int, object, object, int]] = [
        (_LD_ABS, 0, 0, 4),
        (_JEQ, 0, "kill", arch),
        (_LD_ABS, 0, 0, 0),
        (_JSET, "kill", 0, 0x40000000),  # the x32 ABI's numbers
        *[(_JEQ, "eperm", 0, nr) for nr in forks],
        (_JEQ, "enosys", 0, clone3),
        (_JEQ, 0, "allow", clone),
        (_LD_ABS, 0, 0, 16),  # low half of args[0], the clone flags
        (_JSET, "allow", "eperm", CLONE_THREAD),
    ]
    labels = {"allow": (_RET, _ALLOW), "eperm": (_RET, _ERRNO | _EPERM),
              "enosys": (_RET, _ERRNO | _ENOSYS), "kill": (_RET, _KILL)}
    at = {name: len(prog) + i for i, name in enumerate(labels)}
    out = b""
    for i, (code, jt, jf, k) in enumerate(prog):
        t = at[jt] - i - 1 if isinstance(jt, str) else 0
        f = at[jf] - i - 1 if isinstance(jf, str) else 0
        out += struct.pack("=HBBI", code, t, f, k)
    for code, k in labels.values():
        out += struct.pack("=HBBI", code, 0, 0, k)
    return out


# Where the program's tmpfs is seen; an interpreter living there (a virtualenv under /tmp) is
# shown at its own path inside that tmpfs, read-only.
SHARED = ("/tmp", "/var/tmp", "/dev/shm")


def _shared_place(path: str) -> str | None:
    """The folder of ``SHARED`` that ``path`` lies under, or None."""
    return next((d for d in SHARED if path == d or path.startswith(d + "/")), None)


def _folders_made_for(targets: list[str]) -> int:
    """How many folders the inner stage creates in the tmpfs to show ``targets`` (not the program's)."""
    made: set[str] = set()
    for target in targets:
        shared = _shared_place(target)
        if shared is None:
            continue
        parts = target[len(shared):].strip("/").split("/")
        made.update("/".join(parts[:i + 1]) for i in range(len(parts)) if parts[0])
    return len(made)


def _memfd(name: str, data: bytes = b"") -> int:
    fd = os.memfd_create(name, 0)
    os.write(fd, data)
    os.lseek(fd, 0, os.SEEK_SET)
    return fd


def bwrap_argv(cfg: dict, jail_fd: int, seccomp_fd: int) -> list[str]:
    """bubblewrap's command line: the namespaces, the read-only view, then the inner stage."""
    argv = [
        cfg["bwrap"], "--unshare-all", "--unshare-user", "--die-with-parent",
        "--new-session", "--uid", "0", "--gid", "0", "--cap-add", "CAP_SYS_ADMIN", "--cap-add", "CAP_SETPCAP",
        "--hostname", "sandbox", "--clearenv", "--dev", "/dev",
        "--dir", "/tmp", "--dir", "/var/tmp",
    ]
    moved: list[tuple[str, str]] = []
    for path in cfg["binds"]:
        if _shared_place(path):
            # Under what becomes the program's own tmpfs: bound aside here, put back in place
            # (read-only) by the inner stage once that tmpfs is mounted.
            aside = f"/sandbox/bind/{len(moved)}"
            argv += ["--ro-bind", path, aside]
            moved.append((aside, path))
        else:
            argv += ["--ro-bind", path, path]
    for link, target in cfg["links"]:
        argv += ["--symlink", target, link]
    inner = {k: cfg[k] for k in ("python", "tmpfs_mb", "max_files", "limits", "max_program_bytes")}
    inner["moved"] = moved
    inner["channel"] = bool(cfg.get("channel"))
    # The inner stage runs before the moved folders are back in place: its interpreter is the
    # program's, found where it is at that moment (the real file, or its place aside).
    python = os.path.realpath(cfg["python"])
    for aside, target in moved:
        if python.startswith(target + "/"):
            python = aside + python[len(target):]
    # No /proc: nothing there for the program to read or write (its own memory, /dev/fd/../mem).
    # The root and /dev that bubblewrap made are read-only from here on; /tmp is the capped tmpfs.
    argv += ["--ro-bind-data", str(jail_fd), "/sandbox/jail.py", "--remount-ro", "/dev",
             "--remount-ro", "/", "--seccomp", str(seccomp_fd), "--chdir", "/",
             python, "-I", "-B", "/sandbox/jail.py", "--inner", json.dumps(inner)]
    return argv


def _processes_of(uid: int) -> int:
    count = 0
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                count += os.stat(f"/proc/{entry}").st_uid == uid
            except OSError:
                pass
    return count


def _read_capped(fd: int, cap: int) -> str:
    data = os.pread(fd, cap + 1, 0)
    text = data[:cap].decode("utf-8", "replace")
    return text + "\n[output truncated]" if len(data) > cap else text


def _cgroup_write(path: str, name: str, value: str) -> None:
    with open(os.path.join(path, name), "w") as f:
        f.write(value)


def _swap_on() -> bool:
    try:
        with open("/proc/swaps") as f:
            return len(f.read().strip().splitlines()) > 1
    except OSError:
        return True


def cgroup_create(cgroup: dict, memory_mb: int, name: str) -> str:
    """A cgroup of its own for one program, under ``cgroup["parent"]``, its memory capped at
    ``memory_mb`` with no swap: every page the program holds counts (anonymous memory, memfds,
    tmpfs files, thread stacks), whichever of its processes or threads holds it."""
    path = os.path.join(cgroup["parent"], name)
    try:
        os.mkdir(path)
    except FileExistsError:
        os.rmdir(path)
        os.mkdir(path)
    limit = str(memory_mb * 1024 * 1024)
    try:
        if cgroup["version"] == 2:
            _cgroup_write(path, "memory.max", limit)
            if os.path.exists(os.path.join(path, "memory.swap.max")):
                _cgroup_write(path, "memory.swap.max", "0")
            elif _swap_on():
                raise _SetupError("swap is on and this kernel's cgroups cannot limit it (no memory.swap.max)")
            if os.path.exists(os.path.join(path, "memory.oom.group")):
                _cgroup_write(path, "memory.oom.group", "1")
        else:
            _cgroup_write(path, "memory.limit_in_bytes", limit)
            if os.path.exists(os.path.join(path, "memory.memsw.limit_in_bytes")):
                _cgroup_write(path, "memory.memsw.limit_in_bytes", limit)
            elif _swap_on():
                raise _SetupError("swap is on and this kernel's cgroups cannot limit it (no memory.memsw)")
    except BaseException:
        cgroup_remove(path)
        raise
    return path


def cgroup_finish(path: str, version: int) -> tuple[float, bool]:
    """The program's peak memory in MiB (0 where the kernel does not say) and whether it was
    killed for memory; then the cgroup is removed."""
    peak, oom = 0.0, False
    try:
        with open(os.path.join(path, "memory.peak" if version == 2 else "memory.max_usage_in_bytes")) as f:
            peak = int(f.read().split()[0]) / 2**20
    except (OSError, ValueError, IndexError):
        pass
    try:
        with open(os.path.join(path, "memory.events" if version == 2 else "memory.oom_control")) as f:
            oom = any(line.split()[:1] == ["oom_kill"] and line.split()[1] != "0" for line in f)
    except (OSError, IndexError):
        pass
    cgroup_remove(path)
    return round(peak, 1), oom


def cgroup_remove(path: str) -> None:
    if os.path.exists(os.path.join(path, "cgroup.kill")):
        try:
            _cgroup_write(path, "cgroup.kill", "1")
        except OSError:
            pass
    for _ in range(200):
        try:
            os.rmdir(path)
            return
        except FileNotFoundError:
            return
        except OSError:
            time.sleep(0.01)


def _start(cfg: dict, program: bytes, cgroup_path: str) -> tuple[int, int, int, int]:
    """Fork and exec bwrap; its pid and the memfds of stdout, stderr and the inner stage's status."""
    drop = os.geteuid() == 0
    limits = cfg["limits"]
    # RLIMIT_NPROC counts every task of the kuid: bwrap's two processes, the program and its
    # threads, and, without root, every process of the server's user as well.
    limits["nproc"] = cfg["processes"] + 2 + (0 if drop else _processes_of(os.getuid()))
    with open(__file__, "rb") as f:
        jail_fd = _memfd("jail", f.read())
    seccomp_fd = _memfd("seccomp", seccomp_filter(os.uname().machine))
    program_fd = _memfd("program", program)
    out_fd, err_fd, status_fd = _memfd("stdout"), _memfd("stderr"), _memfd("status")
    channel = tuple(cfg.get("channel") or ())  # the live program's two pipe ends, passed to us by the server
    argv = bwrap_argv(cfg, 4, 5)
    pid = os.fork()
    if pid == 0:
        try:
            # Up high first, so that no dup2 below overwrites a descriptor still to be placed.
            fds = (program_fd, out_fd, err_fd, status_fd, jail_fd, seccomp_fd, *channel)
            moved = [os.dup2(fd, 100 + i) for i, fd in enumerate(fds)]
            for target, fd in enumerate(moved):
                os.dup2(fd, target)
            os.closerange(len(fds), 1 << 16)
            # Into the program's cgroup before anything of the sandbox exists: all it starts is counted.
            _cgroup_write(cgroup_path, "cgroup.procs", str(os.getpid()))
            if drop:
                os.setgroups([])
                os.setgid(cfg["uid"])
                os.setuid(cfg["uid"])
            # After setuid, which clears it: if the launcher dies, bwrap dies, and with it the sandbox.
            _libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
            os.execve(cfg["bwrap"], argv, {})
        except BaseException as exc:  # noqa: BLE001 - report and leave, whatever happened
            os.write(2, f"cannot start {cfg['bwrap']}: {exc}\n".encode())
        os._exit(126)
    # The pipe ends are the program's alone now: when it ends, the server reads end of file.
    for fd in (jail_fd, seccomp_fd, program_fd, *channel):
        os.close(fd)
    return pid, out_fd, err_fd, status_fd


def _reap_all(deadline: float) -> None:
    """Wait until no process of the sandbox is left (bwrap's init, reparented here, is the last)."""
    while time.monotonic() < deadline:
        try:
            if os.waitpid(-1, os.WNOHANG)[0] == 0:
                time.sleep(0.005)
        except ChildProcessError:
            return


def main() -> None:
    cfg = json.loads(sys.argv[1])
    program = sys.stdin.buffer.read(cfg["max_program_bytes"] + 1)
    if len(program) > cfg["max_program_bytes"]:
        print(json.dumps({"error": "program too large"}))
        return
    start = time.monotonic()
    # bwrap's init is reparented to us when bwrap goes, so that we can wait for it: the init of
    # a PID namespace is reaped only once every process in there is gone.
    _libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    cgroup = cfg["cgroup"]
    try:
        cgroup_path = cgroup_create(cgroup, cfg["limits"]["memory_mb"], f"benchlab-{os.getpid()}")
    except (_SetupError, OSError) as exc:
        print(json.dumps({"error": f"the sandbox could not be set up: no memory cgroup: {exc}", "setup": True}))
        return
    try:
        run(cfg, program, start, cgroup_path)
    finally:
        cgroup_remove(cgroup_path)


def run(cfg: dict, program: bytes, start: float, cgroup_path: str) -> None:
    """Start the program in its cgroup, wait for it within the time limit, print how it ended."""
    try:
        pid, out_fd, err_fd, status_fd = _start(cfg, program, cgroup_path)
    except (_SetupError, OSError) as exc:
        print(json.dumps({"error": f"the sandbox could not be set up: {exc}", "setup": True}))
        return
    timed_out = False
    deadline = start + cfg["timeout_secs"]
    status = None
    while status is None:
        done, st = os.waitpid(pid, os.WNOHANG)
        if done:
            status = st
        elif time.monotonic() > deadline:
            timed_out = True
            # bwrap's init dies with it (--die-with-parent), and with the init every process of
            # the PID namespace.
            os.kill(pid, signal.SIGKILL)
            status = os.waitpid(pid, 0)[1]
        else:
            time.sleep(0.005)
    _reap_all(time.monotonic() + 10)
    peak_mb, oom = cgroup_finish(cgroup_path, cfg["cgroup"]["version"])
    cap = cfg["output_cap"]
    stderr = _read_capped(err_fd, cap)
    if os.pread(status_fd, len(READY), 0) != READY and not timed_out:
        reason = stderr.strip()[-400:] or f"bwrap exited with status {os.waitstatus_to_exitcode(status)}"
        print(json.dumps({"error": f"the sandbox could not be set up: {reason}", "setup": True}))
        return
    result = {
        "exit_code": os.waitstatus_to_exitcode(status),
        "timed_out": timed_out,
        "duration_secs": round(time.monotonic() - start, 4),
        "stdout": _read_capped(out_fd, cap),
        "stderr": stderr,
        "memory_peak_mb": peak_mb,
        "memory_exceeded": oom,
    }
    sys.stdout.write(json.dumps(result) + "\n")


# -- inside the sandbox ---------------------------------------------------------------------------


def _mount(source: str, target: str, fstype: str | None, flags: int, data: str | None) -> None:
    _check(_libc.mount(source.encode(), target.encode(), fstype.encode() if fstype else None,
                       flags, data.encode() if data else None), f"mount {target}")


def _drop_capabilities() -> None:
    """Empty the bounding set, then every set: the exec that follows gains none back."""
    for cap in range(64):
        if _libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0 and ctypes.get_errno() != 22:  # EINVAL: no such cap
            _check(-1, f"drop capability {cap}")
    header = struct.pack("=Ii", CAP_VERSION_3, 0)
    data = bytes(24)  # two {effective, permitted, inheritable} of u32, all empty
    _check(_libc.capset(header, data), "capset")


def inner(cfg: dict) -> None:
    """In the sandbox: private tmpfs, main.py, rlimits, no capabilities, exec. Never returns."""
    try:
        chunks, size = [], 0
        while size <= cfg["max_program_bytes"]:
            chunk = os.read(0, 1 << 16)
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
        moved = [(aside, target) for aside, target in cfg["moved"]]
        inodes = cfg["max_files"] + RESERVED_INODES + _folders_made_for([t for _, t in moved])
        _mount("tmpfs", "/tmp", "tmpfs", MS_NOSUID | MS_NODEV,
               f"size={cfg['tmpfs_mb']}m,nr_inodes={inodes},mode=1777")
        for shared in ("/var/tmp", "/dev/shm"):
            if os.path.isdir(shared):
                _mount("/tmp", shared, None, MS_BIND, None)
        for aside, target in moved:
            os.makedirs(target, exist_ok=True)
            _mount(aside, target, None, MS_BIND | MS_REC, None)
            _mount("none", target, None, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV, None)
        os.mkdir("/tmp/work", 0o700)
        with open("/tmp/work/main.py", "wb") as f:
            f.write(b"".join(chunks))
        os.chdir("/tmp/work")
        devnull = os.open(os.devnull, os.O_RDONLY)
        os.dup2(devnull, 0)
        mb = 1024 * 1024
        lim = cfg["limits"]
        for name, value in (("RLIMIT_CPU", lim["cpu_secs"]), ("RLIMIT_AS", lim["memory_mb"] * mb),
                            ("RLIMIT_FSIZE", lim["file_size_mb"] * mb), ("RLIMIT_NOFILE", lim["open_files"]),
                            ("RLIMIT_CORE", 0), ("RLIMIT_NPROC", lim["nproc"])):
            resource.setrlimit(getattr(resource, name), (value, value + (name == "RLIMIT_CPU")))
        _drop_capabilities()
        os.write(STATUS_FD, READY)
        if cfg.get("channel"):
            for target, fd in zip((3, 4), CHANNEL_FDS, strict=True):
                os.dup2(fd, target)
            os.closerange(5, 1 << 16)
        else:
            os.closerange(3, 1 << 16)
        python = cfg["python"]
        os.execve(python, [python, "-I", "-B", "main.py"], {})
    except BaseException as exc:  # noqa: BLE001 - report and leave, whatever happened
        os.write(2, f"sandbox: could not start the program: {exc}\n".encode())
    os._exit(126)


if __name__ == "__main__":
    if sys.argv[1:2] == ["--inner"]:
        inner(json.loads(sys.argv[2]))
    else:
        main()
