"""docs/gpus.md says what the code does: its examples are run here."""

from __future__ import annotations

import json
from pathlib import Path

from gpu_trace import benchlab_cli, recorded_env

from benchlab_testing import doc_blocks, run_python_blocks

DOC = Path(__file__).parents[2] / "docs" / "gpus.md"


def test_python_examples_in_the_doc_run():
    assert run_python_blocks(DOC) >= 5  # the example's own asserts, all of which ran


def test_table_in_the_doc_is_what_the_double_prints():
    shown = doc_blocks(DOC, "console")[0].splitlines()
    assert shown[0] == "$ benchlab gpus"
    done = benchlab_cli("gpus", env=recorded_env())
    printed = done.stdout.splitlines()
    # The title names the source; the doc shows a real machine's.
    assert printed[0].startswith("GPUs (recorded:") and shown[1] == "GPUs (nvml, 2 s window)"
    assert printed[1:] == shown[2:]


def test_json_excerpt_in_the_doc_is_device_3_of_the_double():
    done = benchlab_cli("gpus", "--json", env=recorded_env())
    assert json.loads(doc_blocks(DOC, "json")[0]) == json.loads(done.stdout)[3]


def test_h100_tables_in_the_doc_are_what_the_recorded_h100_prints():
    import os

    h100 = Path(__file__).parents[1] / "data" / "gpus" / "h100-80gb"
    shown = [b for b in doc_blocks(DOC, "console") if "H100 80GB HBM3 │" in b]
    assert len(shown) == 2
    for block, state in ((shown[0], "idle"), (shown[1], "foreign-idle-10GB")):
        env = {**os.environ, "BENCHLAB_GPU_DOUBLE": str(h100 / f"{state}.nvml.json")}
        printed = benchlab_cli("gpus", env=env).stdout.splitlines()
        lines = block.splitlines()
        assert lines[0] == "$ benchlab gpus" and lines[1] == "GPUs (nvml, 2 s window)"
        assert printed[1:] == lines[2:], state
