"""GPU use per run: the sweep's sampler, on a two-device machine made of the real H100's idle reading.

Each run writes itself into the recording while it runs, as the driver would show it:
its own pid with the memory it holds (3 GiB, then 5 GiB), the utilisation it drives
on its device, and a neighbour's process (pid 1, 7 GiB) on the same device that must
not be counted as the run's.
"""

from __future__ import annotations

import copy
import json
import os
import re
from pathlib import Path

import pytest
from gpu_trace import run_cli

from benchlab.execute.gpu_sampler import GpuSampler
from benchlab.execute.gpus import DeviceReading, GpuProcess
from benchlab_testing import doc_blocks

H100 = Path(__file__).parents[1] / "data" / "gpus" / "h100-80gb"
DOC = Path(__file__).parents[2] / "docs" / "gpus.md"
GIB = 2**30

RUN = r'''
import fcntl, json, os, sys, time
rec, util = sys.argv[1], int(sys.argv[2])
dev = int(os.environ["CUDA_VISIBLE_DEVICES"])

def edit(change):
    with open(rec + ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        data = json.load(open(rec))
        change(data["devices"][dev])
        open(rec + ".tmp", "w").write(json.dumps(data))
        os.replace(rec + ".tmp", rec)

def hold(gib):
    def change(d):
        d["compute_processes"] = [p for p in d["compute_processes"] if p["pid"] != os.getpid()]
        if gib:
            d["compute_processes"].append({"pid": os.getpid(), "usedGpuMemory": gib * 2**30})
        d["utilization_samples"] = [{"gpu": util, "memory": 0}] * 5
    edit(change)

hold(3)
time.sleep(1.5)
hold(5)
time.sleep(2.5)
hold(0)
json.dump({"score": util}, open(os.path.join(os.environ["BENCHLAB_RUN_DIR"], "metrics.json"), "w"))
'''


def _two_h100s(tmp_path: Path) -> Path:
    data = json.loads((H100 / "idle.nvml.json").read_text())
    first = data["devices"][0]
    second = copy.deepcopy(first)
    second.update(index=1, uuid=first["uuid"][:-4] + "0001")
    data["devices"] = [first, second]
    for d in data["devices"]:
        d["compute_processes"] = [{"pid": 1, "usedGpuMemory": 7 * GIB}]  # a neighbour, not ours
    rec = tmp_path / "machine.nvml.json"
    rec.write_text(json.dumps(data))
    return rec


@pytest.mark.slow
def test_each_run_gets_its_utilisation_and_own_peak_memory(tmp_path):
    rec = _two_h100s(tmp_path)
    (tmp_path / "run.py").write_text(RUN)
    (tmp_path / "bench.yaml").write_text(
        "name: use\ntasks: [{name: t}]\nseeds: 1\nmetrics: {primary: {name: score, goal: max}}\n"
        f"command: python run.py {rec} {{util}}\n"
        "configs:\n  - {name: busy, params: {util: 90}, resources: {gpus: 1}}\n"
        "  - {name: starved, params: {util: 20}, resources: {gpus: 1}}\n")
    env = {"BENCHLAB_GPU_DOUBLE": str(rec)}
    # Named devices: the neighbour's process keeps them from counting as free.
    done = run_cli("run", "bench.yaml", "-r", "out", "-j", "2", "--gpus", "0,1", "--no-report",
                   cwd=tmp_path, env=env)
    assert done.returncode == 0, done.stdout + done.stderr
    closing = re.search(r"GPUs 0,1: busy (\d+)% of the time they were available, "
                        r"mean utilisation (\d+)% while runs held them", done.stdout)
    assert closing, done.stdout
    assert 20 <= int(closing.group(2)) <= 90  # between the two runs' own figures

    status = run_cli("status", "out", "--json", cwd=tmp_path)
    use = {u["run"]: u for u in json.loads(status.stdout)["gpu_use"]}
    assert set(use) == {"t/busy/s0", "t/starved/s0"}
    busy, starved = use["t/busy/s0"], use["t/starved/s0"]
    assert (busy["util_mean"], busy["util_max"], busy["likely_cpu_bound"]) == (90, 90, False)
    assert (starved["util_mean"], starved["util_max"], starved["likely_cpu_bound"]) == (20, 20, True)
    # The run's own processes only: 5 GiB at its peak, never the neighbour's 7 GiB beside it.
    assert busy["mem_peak_mib"] == starved["mem_peak_mib"] == 5 * 1024

    text = run_cli("status", "out", cwd=tmp_path).stdout
    assert "t/starved/s0 on GPU" in text and "20% / 20%, 5.0 GiB — likely CPU-bound" in text
    assert "t/busy/s0 on GPU" in text and "90% / 90%, 5.0 GiB\n" in text
    # docs/gpus.md shows this very output (which run got which GPU may differ).
    [block] = [b for b in doc_blocks(DOC, "console") if b.startswith("$ benchlab status out")]
    gpu_lines = [re.sub(r"on GPU \d", "on GPU N", line) for line in text.splitlines()
                 if line.startswith(("GPU use of", "  t/"))]
    assert gpu_lines == [re.sub(r"on GPU \d", "on GPU N", line) for line in block.splitlines()[2:]]

    report = run_cli("report", "out", "--no-plots", "--no-html", cwd=tmp_path)
    assert report.returncode == 0, report.stdout + report.stderr
    md = (tmp_path / "out" / "BENCHMARK_REPORT.md").read_text()
    hardware = next(line for line in md.splitlines() if line.startswith("**Hardware:**"))
    assert hardware.startswith("**Hardware:** 2× NVIDIA H100 80GB HBM3; CPU: ")
    assert f"({os.cpu_count()} cores)" in hardware
    assert re.search(r"\| t/starved/s0 \| [01] \| 20 \| 20 \| 5\.0 \| likely CPU-bound \|", md)
    assert re.search(r"\| t/busy/s0 \| [01] \| 90 \| 90 \| 5\.0 \|  \|", md)


class _Machine:
    """An inventory whose readings a test sets."""

    def __init__(self) -> None:
        self.now: list[DeviceReading] = []

    def read(self) -> list[DeviceReading]:
        return self.now

    def sample(self, window_s: float) -> list:  # pragma: no cover - not used here
        return []


def _dev(index: int, util: int | None, procs: tuple[GpuProcess, ...]) -> DeviceReading:
    return DeviceReading(index, f"GPU-{index}", "NVIDIA H100 80GB HBM3", 81559, 0, util, procs)


def test_sampler_credits_each_attempt_with_its_devices_and_its_own_group():
    machine = _Machine()
    sampler = GpuSampler(machine)
    me = os.getpid()
    group = os.getpgid(me)
    sampler.track(1, [0, 1], group)  # a two-device run: this test process's group
    sampler.track(2, [2], group + 10**6)  # a group no process has
    machine.now = [_dev(0, 100, (GpuProcess(me, None, 2048), GpuProcess(1, "root", 9000))),
                   _dev(1, 50, (GpuProcess(me, None, 1024),)), _dev(2, 10, ())]
    sampler.sample_once()
    machine.now = [_dev(0, 40, (GpuProcess(me, None, 512),)), _dev(1, 20, ()), _dev(2, None, ())]
    sampler.sample_once()
    one = sampler.finish(1)
    assert one is not None
    # Means over its two devices per reading: (100+50)/2 = 75, then (40+20)/2 = 30.
    assert (one.util_mean, one.util_max) == (52.5, 75.0)
    assert one.mem_peak_mib == 2048 + 1024  # never pid 1's 9000 MiB
    two = sampler.finish(2)
    assert two is not None and (two.util_mean, two.util_max, two.mem_peak_mib) == (10.0, 10.0, None)
    assert two.likely_cpu_bound and not one.likely_cpu_bound
    # The sweep's mean over the devices runs held, per reading: 100, 50, 10, then 40, 20.
    assert sampler.mean_utilization == pytest.approx((100 + 50 + 10 + 40 + 20) / 5)
    assert sampler.finish(3) is None


def test_sampler_reads_nothing_while_no_run_holds_a_gpu():
    machine = _Machine()
    reads = []
    machine.read = lambda: reads.append(1) or []  # type: ignore[method-assign]
    sampler = GpuSampler(machine, interval_s=0.01).start()
    try:
        import time

        time.sleep(0.3)
        assert reads == []
        sampler.track(1, [0], 12345)
        deadline = time.monotonic() + 10
        while not reads and time.monotonic() < deadline:
            time.sleep(0.01)
        assert reads
    finally:
        sampler.stop()
