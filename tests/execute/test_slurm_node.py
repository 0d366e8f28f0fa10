"""What a Slurm job's process does on the node when its command is ended by the signal that
scancel or preemption sends: no result, so that the driver reads the verdict from Slurm's
accounting (the command often dies of it before the job's own handler runs)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

NODE = """
import json, sys
from benchlab.execute.slurm import NodeJob, NodeResult, run_attempt
data = json.loads(sys.argv[1])
# A job pickled by an earlier benchlab is a plain mapping of the same keys: both forms run.
out = run_attempt(data if sys.argv[2] == "mapping" else NodeJob(**data))
assert isinstance(out, NodeResult), out
print("RESULT", out.exit_code, out.signal, out.timed_out)
"""


def _job(tmp_path: Path, command: str) -> str:
    import json

    return json.dumps({"run_dir": str(tmp_path / "run"), "env": {}, "grace": 1.0, "log": str(tmp_path / "log"),
                       "command": command, "cwd": str(tmp_path), "timeout": 60})


def _node(tmp_path: Path, command: str, form: str = "record") -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", NODE, _job(tmp_path, command), form], capture_output=True,
                          text=True, timeout=60)


def test_a_command_ended_by_sigterm_leaves_no_result_for_the_accounting_to_judge(tmp_path: Path) -> None:
    proc = _node(tmp_path, f"{sys.executable} -c 'import os, signal; os.kill(os.getpid(), signal.SIGTERM)'")
    assert proc.returncode == 128 + 15, proc.stderr
    assert "RESULT" not in proc.stdout


def test_a_command_killed_otherwise_still_returns_its_result(tmp_path: Path) -> None:
    proc = _node(tmp_path, f"{sys.executable} -c 'import os, signal; os.kill(os.getpid(), signal.SIGKILL)'")
    assert proc.returncode == 0, proc.stderr
    assert "RESULT 137 None False" in proc.stdout  # the shell's 128 + 9
    proc = _node(tmp_path, "exit 3")
    assert proc.returncode == 0 and "RESULT 3 None False" in proc.stdout


def test_a_job_in_the_mapping_layout_of_earlier_versions_still_runs(tmp_path: Path) -> None:
    proc = _node(tmp_path, "echo hi; exit 4", form="mapping")
    assert proc.returncode == 0, proc.stderr
    assert "RESULT 4 None False" in proc.stdout
    assert (tmp_path / "log").read_text() == "hi\n"


# What sacct -X -n -P -o JobID,State,NodeList,ExitCode prints, one job per line (its documented
# form: State may carry "by <uid>", ExitCode is "<code>:<signal>").
SACCT = """\
41_0|CANCELLED by 1000|node7|0:15
41_1|TIMEOUT|node7|0:0
41_2|PREEMPTED|node8|0:0
41_3|NODE_FAIL|node9|0:0
41_4|OUT_OF_MEMORY|node7|0:125
41_5|FAILED|node7|0:9
41_6|FAILED|node7|137:0
41_7|FAILED|None assigned|0:0
a line of another shape
"""


def test_sacct_lines_become_accounting_records() -> None:
    from benchlab.execute.slurm import Accounting, parse_sacct

    rows = parse_sacct(SACCT)
    assert sorted(rows) == [f"41_{i}" for i in range(8)]
    assert rows["41_0"] == Accounting(job_id="41_0", state="CANCELLED", by="by 1000", node="node7", exit_code="0:15")
    assert rows["41_7"] == Accounting(job_id="41_7", state="FAILED", by="", node="None assigned",
                                      exit_code="0:0")


def test_each_accounted_end_becomes_its_outcome() -> None:
    from benchlab.execute.base import Outcome
    from benchlab.execute.slurm import accounted_outcome, parse_sacct
    from benchlab.names.failures import CANCELLED, NODE_DIED, OOM, PREEMPTED

    rows = parse_sacct(SACCT)

    def end(job: str) -> Outcome:
        base = Outcome(launch=None, exit_code=None, node="node7", job_id=job)  # type: ignore[arg-type]
        return accounted_outcome(rows[job], base)

    cancelled = end("41_0")
    assert (cancelled.failure_class, cancelled.error) == (CANCELLED, "Slurm job 41_0 was cancelled by 1000")
    assert end("41_1").timed_out is True and end("41_1").failure_class is None
    assert end("41_2").failure_class == PREEMPTED
    assert end("41_3").failure_class == NODE_DIED and "its node node7 failed (NODE_FAIL)" in str(end("41_3").error)
    assert end("41_4").failure_class == OOM
    # Killed by signal 9: no exit code, the signal; exit 137 without a signal: the code, judged as a local exit.
    assert (end("41_5").exit_code, end("41_5").signal, end("41_5").failure_class) == (None, 9, None)
    assert (end("41_6").exit_code, end("41_6").signal, end("41_6").failure_class) == (137, None, None)
    # Failed with exit 0 and no signal, and no result came home: the node lost it.
    lost = end("41_7")
    assert (lost.exit_code, lost.failure_class) == (0, NODE_DIED)
    assert lost.error == "Slurm job 41_7 ended FAILED (exit 0:0) without a result"


def test_a_result_pickled_in_the_mapping_layout_of_earlier_versions_reads() -> None:
    from benchlab.execute.slurm import NodeResult

    old = {"exit_code": 0, "signal": None, "timed_out": False, "started": 100.5, "ended": 130.25,
           "node": "node7", "gpus": "0,1", "job_id": "41_3"}
    assert NodeResult.from_json(old, submitted=90.0) == NodeResult(
        exit_code=0, signal=None, timed_out=False, started=100.5, ended=130.25, node="node7", gpus="0,1",
        job_id="41_3")
