"""A run's length and its timeout are measured on the monotonic clock: a step of the wall clock
(NTP, a VM resumed) neither fails a short run as timed out nor lets a long one run past its limit."""

from __future__ import annotations

import sqlite3
import time
import types

import pytest

from benchlab.execute import local
from benchlab.execute.sweep import Sweep
from benchlab.spec import parse_spec

# The run waits for a file rather than sleeping: it ends when the test lets it, whatever the load.
HOLD = """
import json, os, time
while not os.path.exists("go"):
    time.sleep(0.02)
json.dump({"score": 1}, open(os.path.join(os.environ["BENCHLAB_RUN_DIR"], "metrics.json"), "w"))
"""

SPEC = """
name: clock
tasks: [{name: t}]
configs: [{name: CONFIG}]
seeds: 1
command: python hold.py
timeout: TIMEOUT
retries: 0
metrics: {primary: score}
"""


def _spec(tmp_path, config, timeout):
    (tmp_path / "hold.py").write_text(HOLD)
    text = SPEC.replace("CONFIG", config).replace("TIMEOUT", str(timeout))
    return parse_spec(text, file=str(tmp_path / "b.yaml"), path=tmp_path / "b.yaml")


class SteppedClock(types.SimpleNamespace):
    """The ``time`` module as the local backend sees it, with a wall clock that steps by ``step``
    seconds once read after the first run started."""

    def __init__(self, step: float):
        super().__init__(step=step, reads=0)

    def time(self) -> float:
        self.reads += 1
        return time.time() + (self.step if self.reads > 1 else 0.0)

    def __getattr__(self, name):
        return getattr(time, name)


def _attempt(results):
    with sqlite3.connect(results / "benchlab.db") as con:
        return con.execute("SELECT status, error, started, ended FROM attempts").fetchone()


@pytest.mark.parametrize("step", [2 * 3600.0, -3600.0])
def test_a_wall_clock_step_changes_neither_a_runs_length_nor_its_timeout(tmp_path, monkeypatch, step):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(local, "time", SteppedClock(step))
    spec = _spec(tmp_path, "short", 60)
    (tmp_path / "go").write_text("")
    t0 = time.monotonic()
    assert Sweep(spec, tmp_path / "out", jobs=1, backend="local").run().exit_code == 0
    took = time.monotonic() - t0
    status, error, started, ended = _attempt(tmp_path / "out")
    assert status == "completed" and error is None
    assert 0 <= ended - started <= took  # not two hours, nor less than nothing


def test_a_backward_step_does_not_let_a_run_outlive_its_timeout(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(local, "time", SteppedClock(-3600.0))
    spec = _spec(tmp_path, "hang", 1)
    t0 = time.monotonic()
    result = Sweep(spec, tmp_path / "out", jobs=1, backend="local").run()  # no `go`: it hangs
    took = time.monotonic() - t0
    assert result.exit_code == 1
    status, error, started, ended = _attempt(tmp_path / "out")
    assert status == "failed" and error == "timed out after 1s"
    assert 1 <= ended - started <= took
