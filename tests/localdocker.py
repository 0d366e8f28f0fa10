"""A Docker daemon of its own and a small image built here, for the launcher backend's tests and
``bench/launcher_overhead.py``.

Debian's ``dockerd`` (``apt-get install -y docker.io``) is started as root on a socket under one
folder, with its own data and state, no bridge and no iptables rules (containers run with
``--network none``), so it touches no Docker the machine may already run; ``stop()`` ends it by
pid. No registry is reachable: the image is imported (``docker import``) from a root file system
made of the host's static busybox (``apt-get install -y busybox-static``), its applets linked,
which is enough for the shell scripts the tests run. It is tagged with a hash of that binary, so a
daemon whose data folder is kept (``BENCHLAB_DOCKER_ROOT``) imports it once.

    python tests/localdocker.py        # start one, print its DOCKER_HOST, wait for Ctrl-C
"""

from __future__ import annotations

import hashlib
import io
import os
import shutil
import signal
import subprocess
import sys
import tarfile
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

PACKAGES = ["docker.io", "busybox-static"]
BUSYBOX = "/bin/busybox"
PATHS = ("/usr/sbin", "/usr/bin", "/sbin", "/bin")


def which(name: str) -> str | None:
    found = shutil.which(name)
    if found:
        return found
    for d in PATHS:
        p = os.path.join(d, name)
        if os.access(p, os.X_OK):
            return p
    return None


def _static(path: str) -> bool:
    """Whether the ELF file at ``path`` has no program interpreter (is statically linked)."""
    try:
        out = subprocess.run(["file", "-L", path], capture_output=True, text=True, timeout=10).stdout
    except (OSError, subprocess.TimeoutExpired):
        return "static" in os.path.basename(path)
    return "statically linked" in out


def why_not() -> str | None:
    """Why a local Docker cannot start here (None: it can)."""
    if not sys.platform.startswith("linux"):
        return f"a local Docker needs Linux, this is {sys.platform}"
    if os.geteuid() != 0:
        return "a local dockerd needs root"
    missing = [n for n in ("dockerd", "docker", "containerd", "runc") if which(n) is None]
    if missing:
        return (f"Docker's programs are missing ({', '.join(missing)}); install them with "
                f"`apt-get install -y {' '.join(PACKAGES)}`")
    if not os.path.exists(BUSYBOX) or not _static(BUSYBOX):
        return f"no static busybox at {BUSYBOX} to build the test image from; `apt-get install -y busybox-static`"
    return None


def rootfs_tar(extra: dict[str, bytes] | None = None) -> bytes:
    """A root file system with busybox and a link for each of its applets, as a tar archive, with
    ``extra`` files (path in the image: content, made executable) added."""
    applets = subprocess.run([BUSYBOX, "--list"], capture_output=True, text=True, check=True).stdout.split()
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for d in ("bin", "tmp", "etc", "proc", "sys", "dev", "work"):
            info = tarfile.TarInfo(d)
            info.type, info.mode = tarfile.DIRTYPE, 0o1777 if d == "tmp" else 0o755
            tar.addfile(info)
        tar.add(BUSYBOX, arcname="bin/busybox")
        for name in applets:
            if name == "busybox":
                continue
            info = tarfile.TarInfo(f"bin/{name}")
            info.type, info.linkname = tarfile.SYMTYPE, "busybox"
            tar.addfile(info)
        passwd = b"root:x:0:0:root:/tmp:/bin/sh\n"
        info = tarfile.TarInfo("etc/passwd")
        info.size = len(passwd)
        tar.addfile(info, io.BytesIO(passwd))
        for path, content in (extra or {}).items():
            info = tarfile.TarInfo(path.lstrip("/"))
            info.size, info.mode = len(content), 0o755
            tar.addfile(info, io.BytesIO(content))
    return buf.getvalue()


def image_tag() -> str:
    digest = hashlib.sha256(Path(BUSYBOX).read_bytes()).hexdigest()[:12]
    return f"benchlab-test/busybox:{digest}"


@dataclass
class LocalDocker:
    """One dockerd under ``root``: its socket, data, state and log there."""

    root: Path
    procs: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)
    image: str = ""

    @property
    def host(self) -> str:
        return f"unix://{self.root / 'docker.sock'}"

    @property
    def env(self) -> dict[str, str]:
        """What a client (docker) needs to talk to this daemon."""
        path = os.environ.get("PATH", "")
        extra = ":".join(d for d in PATHS if d not in path.split(":"))
        return {"DOCKER_HOST": self.host, "PATH": f"{path}:{extra}" if extra else path}

    def docker(self, *args: str, check: bool = True, timeout: float = 60,
               stdin: bytes | None = None) -> subprocess.CompletedProcess[str]:
        p = subprocess.run([which("docker") or "docker", *args], capture_output=True, timeout=timeout,
                           env={**os.environ, **self.env}, input=stdin)
        out = subprocess.CompletedProcess(p.args, p.returncode, p.stdout.decode(errors="replace"),
                                          p.stderr.decode(errors="replace"))
        if check and p.returncode != 0:
            raise RuntimeError(f"docker {' '.join(args)} exited {p.returncode}: {out.stderr.strip()}")
        return out

    def start(self, timeout: float = 60.0) -> LocalDocker:
        try:
            self._start(timeout)
        except BaseException:
            self.stop()
            raise
        return self

    def _start(self, timeout: float) -> None:
        r = self.root
        for d in ("data", "exec", "log"):
            (r / d).mkdir(parents=True, exist_ok=True)
        # A short exec root: containerd's socket paths must fit in 108 bytes.
        exec_root = Path(tempfile.mkdtemp(prefix="bl-dx-"))
        self._exec_root = exec_root
        with open(r / "log" / "dockerd.log", "ab") as log:  # the daemon keeps its own copy of the descriptor
            self.procs["dockerd"] = subprocess.Popen(
                [which("dockerd") or "dockerd", f"--data-root={r / 'data'}", f"--exec-root={exec_root}",
                 f"--host={self.host}", f"--pidfile={r / 'dockerd.pid'}", "--iptables=false", "--ip6tables=false",
                 "--bridge=none", "--ip-forward=false", "--ip-masq=false"],
                stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)
        deadline = time.monotonic() + timeout
        while self.docker("version", check=False, timeout=10).returncode != 0:
            if self.procs["dockerd"].poll() is not None or time.monotonic() > deadline:
                tail = (r / "log" / "dockerd.log").read_text(errors="replace")[-1500:]
                raise RuntimeError(f"dockerd did not start: {tail}")
            time.sleep(0.3)
        self.image = image_tag()
        if self.docker("image", "inspect", self.image, check=False).returncode != 0:
            self.docker("import", "-", self.image, stdin=rootfs_tar(), timeout=120)

    def import_image(self, tag: str, extra: dict[str, bytes]) -> str:
        """An image ``tag`` of the busybox root file system with ``extra`` files in it."""
        self.docker("import", "-", tag, stdin=rootfs_tar(extra), timeout=120)
        return tag

    def containers(self, name_prefix: str) -> list[str]:
        """Names of every container (running or not) whose name starts with ``name_prefix``."""
        out = self.docker("ps", "-a", "--format", "{{.Names}}", "--filter", f"name=^{name_prefix}").stdout
        return sorted(out.split())

    def stop(self) -> None:
        proc = self.procs.pop("dockerd", None)
        if proc is not None and proc.poll() is None:
            try:
                ids = self.docker("ps", "-aq", check=False, timeout=20).stdout.split()
                if ids:
                    self.docker("rm", "-f", *ids, check=False, timeout=60)
            except (OSError, subprocess.TimeoutExpired):
                pass
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
        if getattr(self, "_exec_root", None) is not None:
            shutil.rmtree(self._exec_root, ignore_errors=True)


if __name__ == "__main__":
    reason = why_not()
    if reason:
        sys.exit(reason)
    here = LocalDocker(Path(tempfile.mkdtemp(prefix="benchlab-docker-"))).start()
    print(f"export DOCKER_HOST={here.host}   # image {here.image}")
    try:
        signal.pause()
    finally:
        here.stop()
