"""A Docker daemon of its own for the launcher tests of this folder, started once per session.

Where it cannot start (not Linux, not root, docker.io or busybox-static missing: ``.ci/run``
installs them where apt-get exists), the tests that need it are skipped with the reason, and
the reason is printed again at the end of the session so that a skipped Docker suite cannot
pass unseen.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from localdocker import LocalDocker, why_not

_SKIPPED: list[str] = []


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
        _SKIPPED.append(reason or "")
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


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if _SKIPPED:
        terminalreporter.section("Docker", sep="!", red=True, bold=True)
        terminalreporter.line(f"THE DOCKER TESTS WERE SKIPPED: {_SKIPPED[0]}", red=True, bold=True)
