"""Fixtures of the evaluation tests (helpers live in evalsvc_helpers)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from evalsvc_helpers import ServerThread, write_config

from benchlab.evaluate.config import EvalConfig, load_config


@pytest.fixture
def make_config(tmp_path: Path) -> Callable[..., EvalConfig]:
    def make(**overrides: Any) -> EvalConfig:
        return load_config(write_config(tmp_path, **overrides))

    return make


@pytest.fixture
def servers() -> Iterator[Callable[[Any], ServerThread]]:
    """Start servers with ``servers(app)``; all are stopped at the end of the test."""
    started: list[ServerThread] = []

    def start(app: Any) -> ServerThread:
        server = ServerThread(app).start()
        started.append(server)
        return server

    yield start
    for server in reversed(started):
        server.stop()
