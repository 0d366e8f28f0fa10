"""Test kit of the evaluation tests: real servers on 127.0.0.1 and throwaway configs.

A module with a name no other test folder uses, not a conftest.py: several
``conftest`` modules clash when tests import from them.
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import yaml

from benchlab.evaluate.config import DEFAULT_CONFIG

TOKEN = "test-token-0123456789"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class ServerThread:
    """A uvicorn server for ``app`` in a background thread, on a free port of 127.0.0.1."""

    def __init__(self, app: Any, port: int | None = None) -> None:
        import uvicorn

        self.port = port or free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.app = app
        self.server = uvicorn.Server(
            uvicorn.Config(
                app,
                host="127.0.0.1",
                port=self.port,
                log_level="error",
                access_log=False,
                lifespan="on",
            )
        )
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    def start(self) -> ServerThread:
        self.thread.start()
        deadline = time.monotonic() + 20
        while not self.server.started:
            if time.monotonic() > deadline or not self.thread.is_alive():
                raise RuntimeError("server did not start")
            time.sleep(0.02)
        return self

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(20)


def write_config(tmp_path: Path, **overrides: Any) -> Path:
    """The shipped sample config, with datasets made absolute, state in tmp_path and ``overrides`` merged."""
    data = yaml.safe_load(DEFAULT_CONFIG.read_text())
    for bench in data["benchmarks"].values():
        bench["dataset"] = str(DEFAULT_CONFIG.parent / bench["dataset"])
    data["server"]["state_dir"] = str(tmp_path / "state")
    data["math"]["timeout_secs"] = 5
    data["math"]["workers"] = 1
    data["sandbox"]["timeout_secs"] = 3
    data["sandbox"]["cpu_secs"] = 2
    for section, values in overrides.items():
        if section == "benchmarks_extra":
            data["benchmarks"].update(values)
        else:
            data.setdefault(section, {}).update(values)
    path = tmp_path / "eval.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def server_pool() -> Iterator[Callable[[Any], ServerThread]]:
    """Body of a ``servers`` fixture: start servers with ``servers(app)``; all stop at the end."""
    started: list[ServerThread] = []

    def start(app: Any) -> ServerThread:
        server = ServerThread(app).start()
        started.append(server)
        return server

    yield start
    for server in reversed(started):
        server.stop()
