"""What a Slurm job's process does on the node when its command is ended by the signal that
scancel or preemption sends: no result, so that the driver reads the verdict from Slurm's
accounting (the command often dies of it before the job's own handler runs)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

NODE = """
import json, sys
from benchlab.execute.slurm import run_attempt
out = run_attempt(json.loads(sys.argv[1]))
print("RESULT", out["exit_code"], out["signal"])
"""


def _job(tmp_path: Path, command: str) -> str:
    import json

    return json.dumps({"run_dir": str(tmp_path / "run"), "env": {}, "grace": 1.0, "log": str(tmp_path / "log"),
                       "command": command, "cwd": str(tmp_path), "timeout": 60})


def _node(tmp_path: Path, command: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", NODE, _job(tmp_path, command)], capture_output=True, text=True,
                          timeout=60)


def test_a_command_ended_by_sigterm_leaves_no_result_for_the_accounting_to_judge(tmp_path: Path) -> None:
    proc = _node(tmp_path, f"{sys.executable} -c 'import os, signal; os.kill(os.getpid(), signal.SIGTERM)'")
    assert proc.returncode == 128 + 15, proc.stderr
    assert "RESULT" not in proc.stdout


def test_a_command_killed_otherwise_still_returns_its_result(tmp_path: Path) -> None:
    proc = _node(tmp_path, f"{sys.executable} -c 'import os, signal; os.kill(os.getpid(), signal.SIGKILL)'")
    assert proc.returncode == 0, proc.stderr
    assert "RESULT 137 None" in proc.stdout  # the shell's 128 + 9
    proc = _node(tmp_path, "exit 3")
    assert proc.returncode == 0 and "RESULT 3 None" in proc.stdout
