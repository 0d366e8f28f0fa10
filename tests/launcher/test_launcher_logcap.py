"""The launcher backend caps a run's log as every backend does (``log_cap_mb``): whether the job
writes the log itself on a shared file system or the ``logs`` template brings it home at the end,
the log is the one a local run leaves and the score is read from its tail. The job here is a shell
of this machine, started by the plain SSH recipe of docs/launchers.md with ``sh -c`` for ``ssh``."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
import yaml

from benchlab_testing import CHATTY_RUN, CHATTY_SPEC, capped_chatty_log, run_cli
from launcher_recipes import recipe, write_spec


@pytest.mark.parametrize("how", ["the job writes it", "launcher.logs at the end"])
def test_a_chatty_jobs_log_is_capped_as_a_local_runs_is(tmp_path: Path, how: str) -> None:
    (tmp_path / "chatty.py").write_text(CHATTY_RUN)
    body = yaml.safe_dump(yaml.safe_load(CHATTY_SPEC.format(name="loud-shell")))
    extra = {}
    if how == "launcher.logs at the end":
        # The job's output goes to a file of its own; the logs template prints it once the job ended.
        submit = recipe("ssh-recipe")["launcher"]["submit"]
        assert "> {log}" in submit
        extra = {"submit": submit.replace("> {log}", "> {run_dir}/job.out"), "logs": "cat {run_dir}/job.out"}
    spec = write_spec(tmp_path, "ssh-recipe", body, variables={"ssh": "sh -c", "host": ""}, **extra)
    proc = run_cli("run", str(spec), "--results", str(tmp_path / "out"), "--no-report", cwd=tmp_path, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (log,) = (tmp_path / "out" / "runs").glob("*/train.log")
    assert log.read_bytes() == capped_chatty_log(tmp_path)
    con = sqlite3.connect(tmp_path / "out" / "benchlab.db")
    assert con.execute("SELECT value FROM metrics WHERE metric = 'score'").fetchall() == [(0.75,)]
    con.close()


def test_the_jobs_environment_file_holds_no_attempt_key(tmp_path: Path) -> None:
    """A job started with ``--env-file {env_file}`` (the Docker and SageMaker recipes) outlives its
    sweep on purpose; with the attempt's key in its environment the next sweep's recovery on this
    machine would kill its processes as a dead attempt's leftovers."""
    (tmp_path / "quiet.py").write_text("import os\nprint('score: 0.5')\n")
    body = yaml.safe_dump(yaml.safe_load(CHATTY_SPEC.format(name="envfile").replace("chatty.py", "quiet.py")))
    submit = recipe("ssh-recipe")["launcher"]["submit"]
    spec = write_spec(tmp_path, "ssh-recipe", body, variables={"ssh": "sh -c", "host": ""},
                      submit="cp {env_file} {run_dir}/seen.env; " + submit)
    proc = run_cli("run", str(spec), "--results", str(tmp_path / "out"), "--no-report", cwd=tmp_path, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (seen,) = (tmp_path / "out" / "runs").glob("*/seen.env")
    names = [line.split("=", 1)[0] for line in seen.read_text().splitlines()]
    assert "BENCHLAB_SEED" in names, names  # the file holds the run's variables
    assert "BENCHLAB_ATTEMPT_KEY" not in names
