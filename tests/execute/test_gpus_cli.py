"""`benchlab gpus` as a real subprocess, on the recorded double and on a machine without GPUs."""

from __future__ import annotations

import json
import os

import pytest
from gpu_trace import benchlab_cli, recorded_env


def test_gpus_json_on_the_double_gives_verdicts_and_the_zombie_owner():
    done = benchlab_cli("gpus", "--json", "--window", "2", env=recorded_env())
    assert done.returncode == 0, done.stderr
    devices = json.loads(done.stdout)
    assert {d["index"]: d["verdict"] for d in devices} == {
        0: "free",
        1: "busy",
        2: "free",
        3: "idle-held",
        4: "busy",
        5: "free",
        6: "busy",
        7: "free",
    }
    zombie = devices[3]
    assert zombie["processes"] == [{"pid": 48213, "user": "alice", "used_memory_mib": 31232}]
    assert zombie["hint"] == "kill 48213"
    assert zombie["max_utilization_pct"] == 0 and zombie["samples"] == 3
    assert devices[1]["processes"][0]["user"] == "bob"
    assert devices[6]["processes"] == []  # held from outside this container
    assert all(d["hint"] is None for d in devices if d["verdict"] != "idle-held")


def test_gpus_without_a_window_mistakes_a_pause_for_a_zombie():
    done = benchlab_cli("gpus", "--json", "--window", "0", env=recorded_env())
    devices = json.loads(done.stdout)
    assert devices[4]["verdict"] == "idle-held" and devices[4]["samples"] == 1


def test_gpus_table_names_the_zombie_and_never_kills():
    done = benchlab_cli("gpus", env=recorded_env())
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert "idle-held" in out and "48213 alice" in out
    assert "free: 0, 2, 5, 7" in out
    assert "kill 48213" in out
    assert "benchlab never kills processes it did not start; `benchlab gpus --reclaim` ends your own" in out


def test_gpus_with_a_bad_double_folder_is_a_user_error(tmp_path):
    done = benchlab_cli("gpus", env=recorded_env(tmp_path))
    assert done.returncode == 2
    assert "query-gpu.0.csv" in done.stderr and "Traceback" not in done.stderr


def _nvml_loads() -> bool:
    try:
        import pynvml
    except ImportError:
        return False
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError:
        return False
    pynvml.nvmlShutdown()  # pragma: no cover - a machine with a driver
    return True  # pragma: no cover


@pytest.mark.skipif(_nvml_loads(), reason="this machine has a working NVIDIA driver")
def test_gpus_without_any_gpu_says_so_and_exits_0(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "BENCHLAB_GPU_DOUBLE"}
    env["PATH"] = str(tmp_path)  # no nvidia-smi on it
    done = benchlab_cli("gpus", "--json", "--window", "0", env=env)
    assert done.returncode == 0
    assert json.loads(done.stdout) == []
    assert done.stderr.startswith("no NVIDIA GPU found (NVML: ")
    assert done.stderr.rstrip().endswith("; nvidia-smi: not found)")
    done = benchlab_cli("gpus", "--window", "0", env=env)
    assert done.returncode == 0 and done.stdout.startswith("no NVIDIA GPU found (NVML: ")
