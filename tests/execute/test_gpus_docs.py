"""docs/gpus.md says what the code does: its examples are run here."""

from __future__ import annotations

import json
import re
from pathlib import Path

from gpu_trace import benchlab_cli, recorded_env

DOC = Path(__file__).parents[2] / "docs" / "gpus.md"


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
    done = benchlab_cli("gpus", env=recorded_env())
    printed = done.stdout.splitlines()
    # The title names the source; the doc shows a real machine's.
    assert printed[0].startswith("GPUs (recorded:") and shown[1] == "GPUs (nvml, 2 s window)"
    assert printed[1:] == shown[2:]


def test_json_excerpt_in_the_doc_is_device_3_of_the_double():
    done = benchlab_cli("gpus", "--json", env=recorded_env())
    assert json.loads(_blocks("json")[0]) == json.loads(done.stdout)[3]
