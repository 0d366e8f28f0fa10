"""docs/gpus.md says what the code does: its examples are run here."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import benchlab

DOC = Path(__file__).parents[2] / "docs" / "gpus.md"
RECORDING = Path(__file__).parents[1] / "data" / "gpus" / "dgx-a100"
SRC = str(Path(benchlab.__file__).parents[1])


def benchlab_cli(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    full = {**env, "PYTHONPATH": SRC + os.pathsep + env.get("PYTHONPATH", ""), "COLUMNS": "160"}
    return subprocess.run(
        [sys.executable, "-c", "from benchlab.cli import main; main()", *args],
        capture_output=True,
        text=True,
        env=full,
        timeout=60,
        check=False,
    )


def _blocks(lang: str) -> list[str]:
    return re.findall(rf"```{lang}\n(.*?)```", DOC.read_text(), flags=re.S)


def test_python_examples_in_the_doc_run():
    blocks = _blocks("python")
    assert blocks
    for code in blocks:
        exec(compile(code, str(DOC), "exec"), {})


def test_table_in_the_doc_is_what_the_double_prints():
    shown = _blocks("console")[0].splitlines()
    assert shown[0] == "$ benchlab gpus"
    done = benchlab_cli("gpus", env={**os.environ, "BENCHLAB_GPU_DOUBLE": str(RECORDING)})
    printed = done.stdout.splitlines()
    # The title names the source; the doc shows a real machine's.
    assert printed[0].startswith("GPUs (recorded:") and shown[1] == "GPUs (nvml, 2 s window)"
    assert printed[1:] == shown[2:]


def test_json_excerpt_in_the_doc_is_device_3_of_the_double():
    done = benchlab_cli("gpus", "--json", env={**os.environ, "BENCHLAB_GPU_DOUBLE": str(RECORDING)})
    assert json.loads(_blocks("json")[0]) == json.loads(done.stdout)[3]
