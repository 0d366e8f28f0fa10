"""A ``dstack`` command and a ``dstack server`` on 127.0.0.1 for the launcher's dstack tests."""

from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path


@dataclass
class DstackServer:
    """A server started with ``home`` as its HOME (its database, and the client's config it writes)."""

    home: Path
    bin_dir: Path

    @property
    def env(self) -> dict[str, str]:
        return {"HOME": str(self.home), "PATH": f"{self.bin_dir}:{os.environ['PATH']}",
                "DSTACK_CLI_LOG_LEVEL": "WARNING"}

    def cli(self, *args: str, timeout: float = 180) -> subprocess.CompletedProcess[str]:
        return subprocess.run(["dstack", *args], capture_output=True, text=True, timeout=timeout,
                              env={**os.environ, **self.env}, cwd=self.home)


def dstack_command() -> str | None:
    given = os.environ.get("BENCHLAB_TEST_DSTACK")
    if given:
        return given if os.access(given, os.X_OK) else None
    return shutil.which("dstack")
