"""What the sweep's GPU sampler costs: CPU time of its thread as a share of one core.

The machine is 8 devices made of a real H100's NVML answers (tests/data/gpus/h100-80gb,
``idle.nvml.json``), each with one real process of its own (a sleeping child in a
process group of its own, as the local backend starts runs), all tracked as running
attempts. The sampler runs at its real interval (1 s) for ``--seconds`` and reports its
thread's CPU time (``time.thread_time``) over the wall time, against the goal of 1% of
one core. Beside it, the same number of bare inventory readings, timed alone: the part
of the cost that is reading the devices, and so would differ on a real driver (the
double parses a JSON file per call; NVML calls into the driver).

    python bench/gpu_sampler.py [--seconds 30] [--devices 8]
"""

from __future__ import annotations

import argparse
import copy
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
H100 = ROOT / "tests" / "data" / "gpus" / "h100-80gb" / "idle.nvml.json"
GOAL_SHARE = 0.01


def machine(folder: Path, pids: list[int]) -> Path:
    """An NVML recording: ``len(pids)`` copies of the idle H100, device i held by pids[i] (10 GiB, 80%)."""
    data = json.loads(H100.read_text())
    base = data["devices"][0]
    devices = []
    for i, pid in enumerate(pids):
        d = copy.deepcopy(base)
        d.update(index=i, uuid=f"{base['uuid'][:-4]}{i:04d}",
                 compute_processes=[{"pid": pid, "usedGpuMemory": 10 * 2**30}],
                 utilization_samples=[{"gpu": 80, "memory": 10}] * 5)
        devices.append(d)
    data["devices"] = devices
    path = folder / "machine.nvml.json"
    path.write_text(json.dumps(data))
    return path


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument("--devices", type=int, default=8)
    args = parser.parse_args()
    if args.seconds <= 0 or args.devices < 1:
        parser.error("--seconds must be above 0 and --devices at least 1")

    from benchlab.execute.gpu_double import RecordedNvmlInventory
    from benchlab.execute.gpu_sampler import INTERVAL_S, GpuSampler

    children = [subprocess.Popen([sys.executable, "-c", "import time; time.sleep(3600)"],
                                 process_group=0) for _ in range(args.devices)]
    try:
        with tempfile.TemporaryDirectory() as tmp:
            inventory = RecordedNvmlInventory(machine(Path(tmp), [c.pid for c in children]))
            sampler = GpuSampler(inventory).start()
            wall0 = time.monotonic()
            for i, child in enumerate(children):
                sampler.track(i, [i], child.pid)
            time.sleep(args.seconds)
            sampler.stop()
            wall = time.monotonic() - wall0
            uses = [sampler.finish(i) for i in range(args.devices)]
            # The reading alone, as many times as the sampler read.
            t0 = time.thread_time()
            for _ in range(max(1, sampler.readings)):
                inventory.read()
            read_cpu = time.thread_time() - t0
    finally:
        for child in children:
            child.kill()
            child.wait()
    assert all(u is not None and u.util_mean == 80 and u.mem_peak_mib == 10240 for u in uses), uses
    share = sampler.cpu_s / wall
    per = sampler.cpu_s / max(1, sampler.readings)
    read_per = read_cpu / max(1, sampler.readings)
    print(f"GPU sampler, {args.devices} devices with one run each, interval {INTERVAL_S:g} s, {wall:.1f} s wall:")
    print(f"  {sampler.readings} readings, thread CPU {sampler.cpu_s * 1000:.1f} ms = {share:.3%} of one core "
          f"(goal: at most {GOAL_SHARE:.0%}; {'met' if share <= GOAL_SHARE else 'NOT met'})")
    print(f"  per reading: {per * 1000:.2f} ms, of which reading the recorded devices alone "
          f"{read_per * 1000:.2f} ms (ratio sampler/bare reading {per / read_per if read_per else float('nan'):.2f})")
    return 0 if share <= GOAL_SHARE else 1


if __name__ == "__main__":
    sys.exit(main())
