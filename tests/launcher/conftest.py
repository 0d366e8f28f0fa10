"""A Docker daemon of its own for the launcher tests of this folder, started once per session.

Where it cannot start (not Linux, not root, docker.io or busybox-static missing: ``.ci/run``
installs them where apt-get exists), the tests that need it are skipped with the reason, and
the reason is printed again at the end of the session so that a skipped Docker suite cannot
pass unseen.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from localdocker import LocalDocker, why_not
from localdstack import DstackServer, dstack_command


@pytest.fixture(scope="session")
def docker_daemon() -> Iterator[LocalDocker]:
    reason = why_not()
    daemon = None
    if reason is None:
        root = Path(os.environ.get("BENCHLAB_DOCKER_ROOT") or tempfile.mkdtemp(prefix="benchlab-docker-"))
        try:
            daemon = LocalDocker(root).start()
        except (RuntimeError, OSError) as exc:
            reason = f"dockerd did not start: {str(exc)[-400:]}"
    if daemon is None:
        pytest.skip(f"NO DOCKER TESTS RAN: {reason}")
    saved = {k: os.environ.get(k) for k in daemon.env}
    os.environ.update(daemon.env)
    try:
        yield daemon
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        daemon.stop()


@pytest.fixture(scope="session")
def sagemaker_python() -> str:
    """A Python with the SageMaker SDK 2.x: ``BENCHLAB_TEST_SAGEMAKER_PYTHON`` (``.ci/run`` installs the
    SDK in a virtualenv of its own), else this one if it has the SDK. Local mode also needs Docker
    Compose (``docker compose``, or Debian's ``docker-compose``)."""
    python = os.environ.get("BENCHLAB_TEST_SAGEMAKER_PYTHON")
    if not python:
        import importlib.util

        python = sys.executable if importlib.util.find_spec("sagemaker") else ""
    compose = shutil.which("docker-compose") is not None or (
        shutil.which("docker") is not None
        and subprocess.run(["docker", "compose", "version"], capture_output=True).returncode == 0)
    reason = None
    if not python:
        reason = ("the SageMaker SDK 2.x is not installed (pip install 'benchlab[sagemaker]', or "
                  "BENCHLAB_TEST_SAGEMAKER_PYTHON naming a Python that has it)")
    elif not compose:
        reason = "Docker Compose, which local mode runs, is not installed (apt-get install -y docker-compose)"
    if reason is not None:
        pytest.skip(f"NO SAGEMAKER TESTS RAN: {reason}")
    return python


@pytest.fixture(scope="module")
def dstack_server() -> Iterator[DstackServer]:
    exe = dstack_command()
    if exe is None:
        reason = ("the dstack command is not installed (pip install 'benchlab[dstack]', or BENCHLAB_TEST_DSTACK "
                  "naming it)")
        pytest.skip(f"NO DSTACK TESTS RAN: {reason}")
    home = Path(tempfile.mkdtemp(prefix="benchlab-dstack-"))
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    here = DstackServer(home, Path(exe).parent)
    with open(home / "server.log", "ab") as log:
        proc = subprocess.Popen([exe, "server", "--host", "127.0.0.1", "--port", str(port), "--token", "benchlab-test",
                                 "-y"], env={**os.environ, **here.env}, cwd=home, stdout=log, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, start_new_session=True)
    try:
        deadline = time.monotonic() + 400  # its first start migrates its database: minutes on a loaded machine
        while b"is running at" not in (home / "server.log").read_bytes():
            if proc.poll() is not None or time.monotonic() > deadline:
                tail = (home / "server.log").read_text(errors="replace")[-1500:]
                pytest.skip(f"NO DSTACK TESTS RAN: dstack server did not start: {tail}")
            time.sleep(1)
        yield here
    finally:
        proc.terminate()
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        shutil.rmtree(home, ignore_errors=True)

