"""A one-node Slurm with accounting, started from Debian's packages as root, without systemd.

Used by the Slurm tests (a session fixture) and by ``bench/dispatch_slurm.py``. Everything it
starts lives under one folder: munged on its own socket, MariaDB on its own socket
(``--skip-networking``), slurmdbd, slurmctld and slurmd on free ports, so that it never
touches a Slurm or database the machine may already run. ``stop()`` ends every daemon it
started (by pid) and nothing outlives it.

Fake GPUs: ``gres.conf`` names ``File=`` entries that are symlinks to ``/dev/null`` (Slurm
refuses plain files), which is enough for Slurm to count them and to set
``CUDA_VISIBLE_DEVICES`` in jobs.

    python tests/localslurm.py        # start one, print its SLURM_CONF, wait for Ctrl-C
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

PACKAGES = ["slurmd", "slurmctld", "slurm-client", "munge", "slurmdbd", "mariadb-server"]
NEEDED = ["sbatch", "slurmctld", "slurmd", "slurmdbd", "munged", "mariadbd", "mariadb-install-db", "sacctmgr"]
CLUSTER = "benchlab"
PATHS = ("/usr/sbin", "/usr/bin", "/sbin")


def which(name: str) -> str | None:
    found = shutil.which(name)
    if found:
        return found
    for d in PATHS:
        p = os.path.join(d, name)
        if os.access(p, os.X_OK):
            return p
    return None


def why_not() -> str | None:
    """Why a local Slurm cannot start here (None: it can)."""
    if not sys.platform.startswith("linux"):
        return f"a local Slurm needs Linux, this is {sys.platform}"
    if os.geteuid() != 0:
        return "a local Slurm needs root (its daemons run as SlurmUser=root here)"
    missing = [n for n in NEEDED if which(n) is None]
    if missing:
        return (f"Slurm's programs are missing ({', '.join(missing)}); install them with "
                f"`apt-get install -y --no-install-recommends {' '.join(PACKAGES)}`")
    return None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class LocalSlurm:
    """One node named after this host, ``cpus`` CPUs, ``gpus`` fake GPUs, ``memory_mb`` of memory."""

    root: Path
    cpus: int = 4
    gpus: int = 4
    memory_mb: int = 8000
    procs: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)

    @property
    def conf(self) -> Path:
        return self.root / "etc" / "slurm.conf"

    @property
    def env(self) -> dict[str, str]:
        """What a client (sbatch, squeue, sacct, submitit) needs to talk to this cluster."""
        path = os.environ.get("PATH", "")
        extra = ":".join(d for d in PATHS if d not in path.split(":"))
        return {"SLURM_CONF": str(self.conf), "PATH": f"{path}:{extra}" if extra else path}

    # -------------------------------------------------------------- start

    def start(self, timeout: float = 60.0) -> LocalSlurm:
        try:
            self._start(timeout)
        except BaseException:
            self.stop()
            raise
        return self

    def _start(self, timeout: float) -> None:
        r = self.root
        for d in ("etc", "log", "run", "munge", "db", "state", "spool", "dev"):
            (r / d).mkdir(parents=True, exist_ok=True)
        host = socket.gethostname().split(".")[0]
        munge_sock = r / "munge" / "munge.socket"
        db_sock = r / "run" / "mysqld.sock"
        # munged insists on a key and folders that only its user can read.
        key = r / "munge" / "munge.key"
        key.write_bytes(os.urandom(128))
        os.chmod(key, 0o400)
        os.chmod(r / "munge", 0o700)
        self._spawn("munged", [which("munged"), "--foreground", "--force", f"--socket={munge_sock}",
                               f"--key-file={key}", f"--pid-file={r / 'munge' / 'munged.pid'}",
                               f"--log-file={r / 'log' / 'munged.log'}",
                               f"--seed-file={r / 'munge' / 'munged.seed'}"])
        _wait_for(lambda: munge_sock.exists(), timeout, "munged's socket", r / "log" / "munged.log")

        subprocess.run([which("mariadb-install-db"), "--user=root", f"--datadir={r / 'db'}",
                        "--auth-root-authentication-method=socket", "--skip-test-db"],
                       check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        self._spawn("mariadbd", [which("mariadbd"), "--no-defaults", "--user=root", f"--datadir={r / 'db'}",
                                 f"--socket={db_sock}", "--skip-networking", f"--pid-file={r / 'run' / 'db.pid'}",
                                 f"--log-error={r / 'log' / 'mariadb.log'}", "--innodb-buffer-pool-size=32M"])
        _wait_for(lambda: db_sock.exists(), timeout, "MariaDB's socket", r / "log" / "mariadb.log")

        for i in range(self.gpus):
            dev = r / "dev" / f"nvidia{i}"
            if not dev.is_symlink():
                dev.symlink_to("/dev/null")
        dbd_port, ctl_port, d_port = _free_port(), _free_port(), _free_port()
        # The munge socket: AuthInfo for the daemons' own messages, AccountingStoragePass (below)
        # for connections to slurmdbd; both default to the system's munged otherwise.
        auth = f"AuthInfo=socket={munge_sock}"
        (r / "etc" / "slurmdbd.conf").write_text(f"""\
{auth}
AuthType=auth/munge
DbdHost=localhost
DbdPort={dbd_port}
SlurmUser=root
LogFile={r / 'log' / 'slurmdbd.log'}
PidFile={r / 'run' / 'slurmdbd.pid'}
StorageType=accounting_storage/mysql
StorageUser=root
StorageLoc=slurm_acct_db
""")
        os.chmod(r / "etc" / "slurmdbd.conf", 0o600)
        (r / "etc" / "gres.conf").write_text("".join(
            f"NodeName={host} Name=gpu File={r / 'dev' / f'nvidia{i}'}\n" for i in range(self.gpus)))
        self.conf.write_text(f"""\
ClusterName={CLUSTER}
SlurmctldHost={host}
SlurmctldPort={ctl_port}
SlurmdPort={d_port}
SlurmUser=root
SlurmdUser=root
{auth}
AuthType=auth/munge
CredType=cred/munge
StateSaveLocation={r / 'state'}
SlurmdSpoolDir={r / 'spool'}
SlurmctldPidFile={r / 'run' / 'slurmctld.pid'}
SlurmdPidFile={r / 'run' / 'slurmd.pid'}
SlurmctldLogFile={r / 'log' / 'slurmctld.log'}
SlurmdLogFile={r / 'log' / 'slurmd.log'}
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
DefMemPerCPU=100
SchedulerType=sched/backfill
SchedulerParameters=batch_sched_delay=0,sched_min_interval=0
MessageTimeout=20
KillWait=2
InactiveLimit=0
MinJobAge=2
ReturnToService=2
# The node may declare more CPUs than the machine has: the tests' runs are light.
SlurmdParameters=config_overrides
MpiDefault=none
GresTypes=gpu
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/slurmdbd
AccountingStorageHost=localhost
AccountingStoragePort={dbd_port}
AccountingStoragePass={munge_sock}
AccountingStorageTRES=gres/gpu
NodeName={host} CPUs={self.cpus} RealMemory={self.memory_mb} Gres=gpu:{self.gpus} State=UNKNOWN
PartitionName=debug Nodes={host} Default=YES MaxTime=INFINITE State=UP
""")
        env = {**os.environ, **self.env, "MYSQL_UNIX_PORT": str(db_sock)}
        # slurmdbd reads slurmdbd.conf next to $SLURM_CONF.
        self._spawn("slurmdbd", [which("slurmdbd"), "-D"], env=env)
        _wait_for(lambda: _port_open(dbd_port), timeout, "slurmdbd", r / "log" / "slurmdbd.log")
        self._run(["sacctmgr", "-i", "add", "cluster", CLUSTER], timeout)
        self._spawn("slurmctld", [which("slurmctld"), "-D", "-i", "-f", str(self.conf)], env=env)
        _wait_for(lambda: _port_open(ctl_port), timeout, "slurmctld", r / "log" / "slurmctld.log")
        self._spawn("slurmd", [which("slurmd"), "-D", "-f", str(self.conf)], env=env)
        _wait_for(self._node_idle, timeout, "the node to come up", r / "log" / "slurmd.log")

    def _run(self, argv: list[str], timeout: float) -> str:
        """A client command, retried while the daemons settle."""
        env = {**os.environ, **self.env}
        deadline = time.monotonic() + timeout
        while True:
            p = subprocess.run([which(argv[0]) or argv[0], *argv[1:]], env=env, capture_output=True, text=True)
            if p.returncode == 0 or time.monotonic() > deadline:
                if p.returncode:
                    raise RuntimeError(f"{' '.join(argv)} failed: {p.stderr.strip() or p.stdout.strip()}")
                return p.stdout
            time.sleep(0.3)

    def _node_idle(self) -> bool:
        p = subprocess.run([which("sinfo") or "sinfo", "-h", "-o", "%t"], env={**os.environ, **self.env},
                           capture_output=True, text=True)
        return p.returncode == 0 and p.stdout.strip() in ("idle", "mix", "alloc")

    def _spawn(self, name: str, argv: list[str | None], env: dict[str, str] | None = None) -> None:
        log = open(self.root / "log" / f"{name}.out", "ab")  # noqa: SIM115 - kept by the child
        self.procs[name] = subprocess.Popen([str(a) for a in argv], stdout=log, stderr=subprocess.STDOUT,
                                            stdin=subprocess.DEVNULL, env=env, start_new_session=True)
        log.close()

    # -------------------------------------------------------------- stop

    def stop(self) -> None:
        """Cancel every job, then stop the daemons in reverse order of start (TERM, then KILL)."""
        if "slurmctld" in self.procs and self.procs["slurmctld"].poll() is None:
            subprocess.run([which("scancel") or "scancel", "--user=root", "--full"],
                           env={**os.environ, **self.env}, capture_output=True)
            time.sleep(0.5)
        for name in reversed(list(self.procs)):
            proc = self.procs[name]
            if proc.poll() is None:
                try:
                    os.killpg(proc.pid, signal.SIGTERM)
                except OSError:
                    pass
                try:
                    proc.wait(10)
                except subprocess.TimeoutExpired:
                    try:
                        os.killpg(proc.pid, signal.SIGKILL)
                    except OSError:
                        pass
                    proc.wait(5)
        # slurmstepd runs detached from slurmd: any left would keep jobs' processes alive.
        _kill_steps(self.root)
        self.procs.clear()


def _kill_steps(root: Path) -> None:
    """Kill slurmstepd processes of this cluster (found by its spool folder in their open files
    being impossible to read cheaply, by their SLURM_CONF instead)."""
    conf = str(root / "etc" / "slurm.conf")
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as fh:
                cmd = fh.read()
            if not cmd.startswith(b"slurmstepd"):
                continue
            with open(f"/proc/{pid}/environ", "rb") as fh:
                environ = fh.read()
        except OSError:
            continue
        if f"SLURM_CONF={conf}".encode() in environ:
            try:
                os.kill(int(pid), signal.SIGKILL)
            except OSError:
                pass


def _port_open(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
        return True
    except OSError:
        return False


def _wait_for(ready: object, timeout: float, what: str, log: Path) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if ready():  # type: ignore[operator]
            return
        time.sleep(0.1)
    tail = log.read_text(errors="replace")[-2000:] if log.exists() else "(no log)"
    raise RuntimeError(f"timed out after {timeout:.0f}s waiting for {what}; {log}:\n{tail}")


if __name__ == "__main__":
    reason = why_not()
    if reason:
        sys.exit(reason)
    with tempfile.TemporaryDirectory(prefix="slurm-") as tmp:
        cluster = LocalSlurm(Path(tmp)).start()
        print(f"export SLURM_CONF={cluster.conf}", flush=True)
        # SIGTERM too: a shell's background job ignores SIGINT.
        signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
        try:
            signal.pause()
        except KeyboardInterrupt:
            pass
        finally:
            cluster.stop()
