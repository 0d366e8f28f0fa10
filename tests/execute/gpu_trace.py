"""Shared by the GPU tests: the recorded machine, the real command, and a run script that
records what it was given and when it ran.

The recording (tests/data/gpus/dgx-a100) stands in for nvidia-smi when
``BENCHLAB_GPU_DOUBLE`` names it.

Each attempt of the run script writes ``<trace>/<run_id>.<attempt>.json`` with its
start and end times (taken by the run itself), ``CUDA_VISIBLE_DEVICES``,
``CUDA_DEVICE_ORDER`` and the share and memory it asked for, so tests judge the
packing from the runs' own records.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

from benchlab_testing import run_cli as shared_run_cli

SRC = str(Path(__file__).resolve().parents[2] / "src")
RECORDING = Path(__file__).parents[1] / "data" / "gpus" / "dgx-a100"


def double_env(folder: Path = RECORDING) -> dict[str, str]:
    """The variable that makes benchlab read ``folder``'s recording instead of a GPU."""
    return {"BENCHLAB_GPU_DOUBLE": str(folder)}


def recorded_env(folder: Path = RECORDING) -> dict[str, str]:
    """This process's environment, with benchlab reading ``folder``'s recording instead of a GPU."""
    return {**os.environ, **double_env(folder)}


def benchlab_cli(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """The real `benchlab` command of this checkout with exactly ``env`` (160 columns wide)."""
    full = {**env, "PYTHONPATH": SRC + os.pathsep + env.get("PYTHONPATH", ""), "COLUMNS": "160"}
    return subprocess.run(
        [sys.executable, "-c", "from benchlab.cli import main; main()", *args],
        capture_output=True,
        text=True,
        env=full,
        timeout=60,
        check=False,
    )


def run_cli(*args: str, cwd: Path, env: dict[str, str] | None = None,
            timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """The shared ``run_cli``, pinned to this checkout's benchlab whatever PYTHONPATH says."""
    merged = {**os.environ, **(env or {})}
    pinned = {**(env or {}), "PYTHONPATH": SRC + os.pathsep + merged.get("PYTHONPATH", "")}
    return shared_run_cli(*args, cwd=cwd, timeout=timeout, env=pinned)

TRACE_SCRIPT = r'''
import fcntl, json, os, sys, time
t0 = time.time()
args = dict(a.split("=", 1) for a in sys.argv[1:])
run_dir, run_id = os.environ["BENCHLAB_RUN_DIR"], os.environ["BENCHLAB_RUN_ID"]
attempt, seed = int(os.environ["BENCHLAB_ATTEMPT"]), int(os.environ["BENCHLAB_SEED"])
cvd = os.environ.get("CUDA_VISIBLE_DEVICES")
smi = args.get("smi")  # a recorded query-gpu.0.csv this run "allocates" on


def set_memory(mib):
    # Rewrite this run's devices' memory.used in the recording, under a lock (runs overlap).
    with open(smi + ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        rows = [r.split(", ") for r in open(smi).read().splitlines()]
        for r in rows:
            if r[0] in (cvd or "").split(","):
                r[4] = str(mib)
        open(smi + ".tmp", "w").write("".join(", ".join(r) + "\n" for r in rows))
        os.replace(smi + ".tmp", smi)


if smi:
    set_memory(30000)
if args.get("oom_seed") == str(seed) and attempt == 1:
    print("RuntimeError: CUDA out of memory. Tried to allocate 2.00 GiB", flush=True)
    sys.exit(1)
if args.get("fail") == "1":
    print("Traceback (most recent call last):\n  File \"x.py\", line 1\nValueError: broken config")
    sys.exit(2)
time.sleep(float(args.get("sleep", 0.2)))
if "nap" in args:  # a file holding seconds to sleep, so a test can shorten a later attempt
    time.sleep(float(open(args["nap"]).read()))
if smi and args.get("leak_seed") != str(seed):
    set_memory(4)
with open(os.path.join(run_dir, "metrics.json"), "w") as f:
    json.dump({"score": seed}, f)
record = {"run_id": run_id, "attempt": attempt, "seed": seed, "config": os.environ["BENCHLAB_CONFIG"],
          "start": t0, "end": time.time(), "cvd": cvd, "order": os.environ.get("CUDA_DEVICE_ORDER"),
          "gpus": float(args.get("gpus", 0)), "mem_gib": float(args.get("mem", 0))}
with open(os.path.join(args["trace"], f"{run_id}.{attempt}.json"), "w") as f:
    json.dump(record, f)
'''


def read_trace(folder: Path) -> list[dict[str, Any]]:
    """Every attempt's record, by start time."""
    return sorted((json.loads(p.read_text()) for p in folder.glob("*.json")),
                  key=lambda r: r["start"])


def devices_of(record: dict[str, Any]) -> list[int]:
    return [int(i) for i in (record["cvd"] or "").split(",") if i]


def peak_use(trace: list[dict[str, Any]]) -> dict[int, tuple[float, float]]:
    """Per device, the largest (sum of shares, sum of GiB) held at any instant by runs on it.

    Checked at every start, where the sum can only have grown. A run of ``gpus >= 1``
    holds each of its devices whole.
    """
    peak: dict[int, tuple[float, float]] = defaultdict(lambda: (0.0, 0.0))
    for r in trace:
        t = r["start"]
        active = [x for x in trace if x["start"] <= t < x["end"]]
        for dev in devices_of(r):
            on = [x for x in active if dev in devices_of(x)]
            share = sum(min(1.0, x["gpus"]) for x in on)
            mem = sum(x["mem_gib"] for x in on)
            old = peak[dev]
            peak[dev] = (max(old[0], share), max(old[1], mem))
    return dict(peak)
