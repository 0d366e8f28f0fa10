"""`benchlab skills install`: a SKILL.md per workflow where coding agents read skills, and every
command a skill names runs as written on a starter benchmark."""

from __future__ import annotations

import json
import re
import shlex
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
import yaml

from benchlab.skills import AGENT_FOLDERS, skills
from benchlab_testing import run_cli

WORKFLOWS = ["auto-benchmark", "benchmark-record", "checkpoint-batch", "delegated-eval", "paired-seeds"]
BENCHMARK = "starter"  # the name `benchlab init` gives its spec: NAME in the skills' commands


def test_install_writes_a_skill_per_workflow_into_each_agent_folder(tmp_path):
    proc = run_cli("skills", "install", str(tmp_path), "--json")
    assert proc.returncode == 0, proc.stderr
    done = json.loads(proc.stdout)
    assert sorted(Path(d["path"]).relative_to(tmp_path).as_posix() for d in done) == sorted(
        f"{folder}/{w}/SKILL.md" for folder in AGENT_FOLDERS for w in WORKFLOWS)
    assert {d["action"] for d in done} == {"written"}
    for w in WORKFLOWS:
        text = (tmp_path / ".claude/skills" / w / "SKILL.md").read_text()
        front = yaml.safe_load(text.split("---\n")[1])
        assert front["name"].startswith("benchlab-") and len(front["description"]) > 80


def test_install_again_keeps_what_the_user_changed_unless_forced(tmp_path):
    run_cli("skills", "install", str(tmp_path), check=True)
    mine = tmp_path / ".agents/skills/paired-seeds/SKILL.md"
    mine.write_text(mine.read_text() + "\nOur lab always runs 10 seeds.\n")
    again = {Path(d["path"]).relative_to(tmp_path).as_posix(): d["action"]
             for d in json.loads(run_cli("skills", "install", str(tmp_path), "--json", check=True).stdout)}
    assert again.pop(".agents/skills/paired-seeds/SKILL.md") == "kept"
    assert set(again.values()) == {"unchanged"}
    assert "10 seeds" in mine.read_text()
    run_cli("skills", "install", str(tmp_path), "--force", check=True)
    assert "10 seeds" not in mine.read_text()


def test_installing_into_a_file_is_one_line_and_exit_2(tmp_path):
    target = tmp_path / "notes.txt"
    target.write_text("x")
    proc = run_cli("skills", "install", str(target))
    assert proc.returncode == 2 and "is a file" in proc.stderr and "Traceback" not in proc.stderr


def test_each_skill_states_the_rules_an_agent_must_not_break():
    by_folder = {s.folder: s.text for s in skills()}
    assert sorted(by_folder) == WORKFLOWS
    for text in by_folder.values():
        assert "## Rules you must not break" in text
        assert "Never publish without being asked" in text or "never publish without being asked" in text.lower()
    assert "Never tune on the test split" in by_folder["benchmark-record"]
    assert "Never tune on the test split" in by_folder["auto-benchmark"]
    assert "Tensor parallel size 1" in by_folder["checkpoint-batch"]
    assert "Decide the analysis before the results" in by_folder["paired-seeds"]


# --- every command, run ----------------------------------------------------------------------------

def _commands(text: str) -> list[str]:
    out = []
    for block in re.findall(r"```bash\n(.*?)```", text, flags=re.S):
        for line in block.splitlines():
            words = shlex.split(line, comments=True)
            if words:
                out.append(shlex.join(words))
    return out


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _wait_http(url: str, timeout: float = 60) -> int:
    deadline = time.monotonic() + timeout
    while True:
        try:
            with urllib.request.urlopen(url, timeout=2) as r:
                return int(r.status)
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.3)


def _prepare(work: Path, skill_text: str) -> None:
    """A starter benchmark (what `benchlab init` writes), with the skill's spec fragments added."""
    run_cli("init", str(work), check=True)
    for block in re.findall(r"```yaml\n(.*?)```", skill_text, flags=re.S):
        with (work / "benchlab.yaml").open("a") as f:
            f.write("\n" + block)
    # fewer seeds and steps than the starter's, to keep the test short; the commands are the same
    spec = (work / "benchlab.yaml").read_text().replace("steps: 50", "steps: 20").replace("seeds: 5", "seeds: 3")
    (work / "benchlab.yaml").write_text(spec)


def _run_one(command: str, work: Path, ports: dict[str, int]) -> None:
    words = shlex.split(command.replace("NAME", BENCHMARK))
    assert words[0] == "benchlab", f"a skill's command that is not benchlab: {command}"
    args, out_file = words[1:], None
    if ">" in args:
        at = args.index(">")
        args, out_file = args[:at], args[at + 1]
    if args[0] == "serve":  # a server: it must come up and answer, then it is stopped
        port = int(args[args.index("--port") + 1])
        proc = subprocess.Popen([sys.executable, "-m", "benchlab", *args], cwd=work, stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL)
        try:
            assert _wait_http(f"http://127.0.0.1:{port}/health") == 200, command
        finally:
            proc.terminate()
            proc.wait(timeout=30)
        return
    if args[0] == "eval":  # against the stub model server, on the port the command names
        url = args[args.index("--model-url") + 1]
        port = int(url.rsplit(":", 1)[1])
        stub = subprocess.Popen([sys.executable, "-m", "benchlab.evaluate.stub", "--port", str(port)], cwd=work,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            _wait_http(f"http://127.0.0.1:{port}/v1/models")
            proc = run_cli(*args, cwd=work, timeout=300)
        finally:
            stub.terminate()
            stub.wait(timeout=30)
        assert proc.returncode == 0, f"{command}\n{proc.stdout}\n{proc.stderr}"
        out = Path(work / args[args.index("--out") + 1])
        assert json.loads((out / "metrics.json").read_text())
        return
    if args[0] == "init" and (work / "benchlab.yaml").exists():
        args = [*args, "--force"]
    proc = run_cli(*args, cwd=work, timeout=600)
    assert proc.returncode == 0, f"{command}\n{proc.stdout}\n{proc.stderr}"
    if out_file is not None:
        (work / out_file).write_text(proc.stdout)


@pytest.mark.slow
@pytest.mark.parametrize("workflow", WORKFLOWS)
def test_every_command_a_skill_names_runs_as_written(tmp_path, workflow):
    skill = next(s for s in skills() if s.folder == workflow)
    commands = _commands(skill.text)
    assert commands, f"{workflow} names no command"
    if commands[0].startswith("benchlab init"):
        _run_one(commands[0], tmp_path, {})
        commands = commands[1:]
        for block in re.findall(r"```yaml\n(.*?)```", skill.text, flags=re.S):
            with (tmp_path / "benchlab.yaml").open("a") as f:
                f.write("\n" + block)
    else:
        _prepare(tmp_path, skill.text)
    ports = {"serve": _free_port(), "model": _free_port()}
    for command in commands:
        command = command.replace("9050", str(ports["serve"])).replace("8000", str(ports["model"]))
        _run_one(command, tmp_path, ports)
