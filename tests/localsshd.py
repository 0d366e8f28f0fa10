"""An sshd of its own on 127.0.0.1, for the launcher's SSH recipe: "another node" that shares this
machine's file system, as seed 004's second node shares its cluster's.

Debian's openssh-server, started as root in the foreground on a free port with a host key, a
client key and a config under one folder; ``ssh_command`` is the client line that reaches it
(``ssh -F <its config> node2``). ``stop()`` ends it by pid."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

PACKAGES = ["openssh-server", "openssh-client"]


def why_not() -> str | None:
    """Why a local sshd cannot start here (None: it can)."""
    if not sys.platform.startswith("linux"):
        return f"a local sshd needs Linux, this is {sys.platform}"
    if os.geteuid() != 0:
        return "a local sshd needs root"
    missing = [n for n, p in (("sshd", "/usr/sbin/sshd"), ("ssh", None), ("ssh-keygen", None))
               if not (shutil.which(n) or (p and os.access(p, os.X_OK)))]
    if missing:
        return f"OpenSSH is missing ({', '.join(missing)}); `apt-get install -y {' '.join(PACKAGES)}`"
    return None


@dataclass
class LocalSshd:
    root: Path
    port: int = 0
    procs: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)

    @property
    def config(self) -> Path:
        return self.root / "ssh_config"

    @property
    def ssh_command(self) -> str:
        return f"ssh -F {self.config}"

    def start(self, timeout: float = 30.0) -> LocalSshd:
        r = self.root
        r.mkdir(parents=True, exist_ok=True)
        os.chmod(r, 0o700)
        for key in ("host_key", "client_key"):
            if not (r / key).exists():
                subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(r / key)], check=True)
        shutil.copy(r / "client_key.pub", r / "authorized_keys")
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = s.getsockname()[1]
        (r / "sshd_config").write_text(f"""\
Port {self.port}
ListenAddress 127.0.0.1
HostKey {r / 'host_key'}
AuthorizedKeysFile {r / 'authorized_keys'}
PermitRootLogin prohibit-password
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
StrictModes no
PidFile {r / 'sshd.pid'}
""")
        self.config.write_text(f"""\
Host node2
  HostName 127.0.0.1
  Port {self.port}
  User root
  IdentityFile {r / 'client_key'}
  IdentitiesOnly yes
  StrictHostKeyChecking no
  UserKnownHostsFile /dev/null
  LogLevel ERROR
  BatchMode yes
""")
        os.makedirs("/run/sshd", exist_ok=True)  # its privilege separation folder
        sshd = shutil.which("sshd") or "/usr/sbin/sshd"
        with open(r / "sshd.log", "ab") as log:
            self.procs["sshd"] = subprocess.Popen([sshd, "-D", "-e", "-f", str(r / "sshd_config")], stdout=log,
                                                  stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                                  start_new_session=True)
        deadline = time.monotonic() + timeout
        while subprocess.run(["ssh", "-F", str(self.config), "node2", "true"], capture_output=True,
                             timeout=30).returncode != 0:
            if self.procs["sshd"].poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"sshd did not start: {(r / 'sshd.log').read_text(errors='replace')[-800:]}")
            time.sleep(0.3)
        return self

    def stop(self) -> None:
        proc = self.procs.pop("sshd", None)
        if proc is not None and proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
