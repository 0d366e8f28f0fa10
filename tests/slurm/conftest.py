"""A real one-node Slurm for the tests of this folder, started once per session and stopped at its end.

Where it cannot start (not Linux, not root, Slurm's packages missing: ``.ci/run`` installs
them where apt-get exists), every test here is skipped with the reason, and the reason is
also printed at the end of the session so that a skipped Slurm suite cannot pass unseen.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from localslurm import LocalSlurm, why_not


@pytest.fixture(scope="session")
def slurm_cluster() -> Iterator[LocalSlurm]:
    reason = why_not()
    if reason is None:
        try:
            import submitit  # noqa: F401
        except ImportError:
            reason = "submitit is not installed (pip install 'benchlab[slurm]')"
    if reason is not None:
        pytest.skip(f"NO SLURM TESTS RAN: {reason}")
    root = Path(tempfile.mkdtemp(prefix="benchlab-slurm-"))
    cluster = LocalSlurm(root, cpus=4, gpus=4)
    cluster.start()
    saved = {k: os.environ.get(k) for k in cluster.env}
    os.environ.update(cluster.env)
    try:
        yield cluster
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        cluster.stop()

