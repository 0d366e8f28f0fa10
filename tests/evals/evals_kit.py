"""Real evaluation harnesses, run offline: lm-evaluation-harness with ``--model dummy`` on a local
multiple-choice task, and Inspect AI with its ``mockllm`` model.

``lm_eval --model dummy`` scores each choice with a random log-likelihood drawn from the
``--seed`` it is given, so two seeds are two "checkpoints" whose answers differ question by
question. The Inspect script answers from a per-checkpoint rule, so that two checkpoints agree
on some questions and not on others, with two epochs and a cluster per question.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml

#: Why a test of a harness is skipped where the evals extra is not installed.
NEEDS_EVALS = "the evals extra: pip install 'benchlab[evals]'"

#: The harness's command line that indexes only the tasks under --include_path.
LM_EVAL_LOCAL = Path(__file__).resolve().parents[1] / "lm_eval_local.py"

TASK_YAML = """task: {name}
dataset_path: json
dataset_kwargs:
  data_files:
    test: {data}
test_split: test
output_type: multiple_choice
doc_to_text: "{{{{question}}}}"
doc_to_choice: "{{{{choices}}}}"
doc_to_target: answer
metric_list:
  - metric: acc
"""


def write_task(folder: Path, name: str, questions: int, changed: int | None = None) -> None:
    """A multiple-choice task ``name`` of ``questions`` questions under ``folder``; ``changed``
    rewords that question (a new document and prompt, as after a dataset edit)."""
    folder.mkdir(parents=True, exist_ok=True)
    data = folder / f"{name}.jsonl"
    with data.open("w") as f:
        for i in range(questions):
            text = f"{name}: what is {i} plus one?" + (" (reworded)" if i == changed else "")
            f.write(json.dumps({"question": text, "choices": [str(i + 1), str(i), str(i + 2), str(i + 3)],
                                "answer": 0}) + "\n")
    (folder / f"{name}.yaml").write_text(TASK_YAML.format(name=name, data=data))


def lm_eval_command(tasks_dir: Path, tasks: list[str], out: Path, seed: int) -> list[str]:
    """The harness's command line, indexing only ``tasks_dir`` (tests/lm_eval_local.py)."""
    return [sys.executable, str(LM_EVAL_LOCAL), "--model", "dummy", "--tasks", ",".join(tasks),
            "--include_path", str(tasks_dir), "--output_path", str(out), "--log_samples", "--seed", str(seed)]


def offline_env(cache: Path) -> dict[str, str]:
    return {**os.environ, "HF_DATASETS_OFFLINE": "1", "HF_HUB_OFFLINE": "1", "HF_HOME": str(cache),
            "TOKENIZERS_PARALLELISM": "false"}


def run_all(commands: list[list[str]], env: dict[str, str], cwd: Path) -> None:
    """Run the commands side by side; fail with the log of any that failed."""
    procs = [subprocess.Popen(c, env=env, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
             for c in commands]
    for c, p in zip(commands, procs, strict=True):
        out, _ = p.communicate(timeout=600)
        assert p.returncode == 0, f"{' '.join(c)} failed:\n{out[-3000:]}"


INSPECT_SCRIPT = r'''
import sys
from inspect_ai import Task, eval as inspect_eval
from inspect_ai.dataset import Sample
from inspect_ai.model import ModelOutput, ModelUsage, get_model
from inspect_ai.scorer import accuracy, ci, match, stderr
from inspect_ai.solver import generate

checkpoint, log_dir = sys.argv[1], sys.argv[2]
QUESTIONS = 24
samples = [Sample(input=f"question {i}", target="yes" if i % 3 else "no", id=f"q{i}",
                  metadata={"passage": f"p{i // 3}"}) for i in range(QUESTIONS)]
task = Task(dataset=samples, solver=generate(), scorer=match(), epochs=2, name="passages",
            metrics=[accuracy(), stderr(), stderr(cluster="passage"), ci(cluster="passage")])
calls = {"n": 0}

def answer(messages, tools, tool_choice, config):
    # The question's number and the call count pick the answer: checkpoint "late" says "yes" to
    # more questions than "early", and the two epochs of a question may differ.
    i = int(messages[-1].text.split()[-1])
    calls["n"] += 1
    threshold = 6 if checkpoint == "early" else 9
    yes = (i * 7 + calls["n"]) % 10 < threshold
    out = ModelOutput.from_content("mockllm/model", "yes" if yes else "no")
    out.usage = ModelUsage(input_tokens=1, output_tokens=1, total_tokens=2)  # no tokenizer download
    return out

model = get_model("mockllm/model", custom_outputs=answer)
log = inspect_eval(task, model=model, log_dir=log_dir, display="none", max_samples=1)[0]
assert log.status == "success", log.error
'''


def run_inspect(folder: Path, checkpoints: list[str]) -> dict[str, Path]:
    """One Inspect log per checkpoint, at ``folder/<checkpoint>/*.eval``."""
    script = folder / "inspect_task.py"
    script.write_text(INSPECT_SCRIPT)
    env = {**os.environ, "INSPECT_LOG_LEVEL": "warning", "INSPECT_DISPLAY": "none"}
    run_all([[sys.executable, str(script), c, str(folder / c)] for c in checkpoints], env, folder)
    return {c: next((folder / c).glob("*.eval")) for c in checkpoints}


def eval_config(folder: Path) -> Path:
    """The evaluation service's shipped config, its datasets made absolute and its state under ``folder``."""
    from benchlab.evaluate.config import DEFAULT_CONFIG

    data: dict[str, Any] = yaml.safe_load(DEFAULT_CONFIG.read_text())
    for bench in data["benchmarks"].values():
        bench["dataset"] = str(DEFAULT_CONFIG.parent / bench["dataset"])
    data["server"]["state_dir"] = str(folder / "state")
    data["math"]["workers"] = 1
    path = folder / "eval.yaml"
    path.write_text(yaml.safe_dump(data))
    return path
