"""The task file the SkyPilot recipe of docs/launchers.md writes, read by SkyPilot's own parser.

Nothing launches here (no cloud): the recipe's submit command is run up to the task file, and
``sky.Task.from_yaml`` reads that file in the Python that has SkyPilot: ``BENCHLAB_TEST_SKYPILOT_PYTHON``
(``.ci/run`` installs SkyPilot in a virtualenv of its own), else the interpreter of a ``sky`` command
on the PATH. Without either the test is skipped with the reason."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from benchlab.execute.launcher import LauncherSection, fill
from benchlab.spec import load_spec
from launcher_recipes import write_spec

READ = """
import json, sys
import sky
task = sky.Task.from_yaml(sys.argv[1])
(res,) = task.resources
print(json.dumps({"name": task.name, "run": task.run, "envs": dict(task.envs), "workdir": task.workdir,
                  "accelerators": res.accelerators}))
"""


def skypilot_python() -> str | None:
    given = os.environ.get("BENCHLAB_TEST_SKYPILOT_PYTHON")
    if given:
        return given
    sky = shutil.which("sky")
    if sky is None:
        return None
    first = Path(sky).read_text(errors="replace").splitlines()[0]
    return first[2:].strip() if first.startswith("#!") else None


def test_the_skypilot_recipes_task_file_is_one_skypilot_reads(tmp_path: Path) -> None:
    python = skypilot_python()
    if python is None:
        pytest.skip("NO SKYPILOT TEST RAN: SkyPilot is not installed (pip install 'benchlab[skypilot]', "
                    "or BENCHLAB_TEST_SKYPILOT_PYTHON naming a Python that has it)")
    spec_path = write_spec(tmp_path, "skypilot-recipe", """
        name: sky
        tasks: [{name: t}]
        configs: [{name: a}]
        seeds: 1
        command: python train.py --lr 0.1 --note "it's {seed}"
        metrics: {primary: score}
        resources: {gpus: 8}
    """, variables={"gpu_type": "H100"})
    spec = load_spec(spec_path)
    section = spec.backend_section("launcher")
    assert isinstance(section, LauncherSection)
    run_dir = tmp_path / "runs" / "abc"
    run_dir.mkdir(parents=True)
    values = {"name": "benchlab-sky-0a1b2c-7", "cwd": str(tmp_path), "gpus": "8", "run_dir": str(run_dir),
              "command": "python train.py --lr 0.1 --note \"it's 0\""}
    # The submit command up to the task file: `sky jobs launch` would need a cloud.
    writes, _, launch = fill(section.submit, values).partition(" && sky jobs launch ")
    assert launch
    env = {**os.environ, "BENCHLAB_RUN_ID": "abc", "BENCHLAB_SEED": "0"}
    subprocess.run(["/bin/sh", "-c", writes], check=True, env=env)
    read = subprocess.run([python, "-c", READ, str(run_dir / "sky-task.yaml")], capture_output=True, text=True,
                          timeout=300)
    assert read.returncode == 0, read.stderr
    task = json.loads(read.stdout.strip().splitlines()[-1])
    assert task == {"name": "benchlab-sky-0a1b2c-7", "run": "python train.py --lr 0.1 --note \"it's 0\"\n",
                    "envs": {"BENCHLAB_RUN_ID": "abc", "BENCHLAB_SEED": "0"}, "workdir": str(tmp_path),
                    "accelerators": {"H100": 8}}
