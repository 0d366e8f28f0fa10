"""GPU smoke test on a real machine: 8 short PyTorch jobs sharing GPUs, watched through NVML.

Each job asks for ``gpus: 0.25`` and ``gpu_memory: 2`` (GiB), allocates about
1.5 GiB on the device benchlab gave it and multiplies matrices for a few seconds.
While the sweep runs, a thread samples the inventory every 0.2 s. The summary
says, per device, how many jobs ran on it, the most that ran at once, the peak
memory seen, and whether every job saw exactly the device it was given.

    python bench/gpu_smoke.py [--jobs 8] [--seconds 4] [--gpus auto|0,1]

Needs a CUDA GPU, PyTorch and nvidia-ml-py (``pip install 'benchlab[gpu]' torch``);
elsewhere it says what is missing and exits with status 2.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import threading
import time
from collections import defaultdict
from pathlib import Path

JOB = r'''
import json, os, sys, time
import torch
seconds = float(sys.argv[1])
assert torch.cuda.device_count() == 1, torch.cuda.device_count()
x = torch.randn(12000, 12000, device="cuda")  # ~0.55 GiB, with the product ~1.5 GiB
t0 = time.time()
n = 0
while time.time() - t0 < seconds:
    y = x @ x
    torch.cuda.synchronize()
    n += 1
info = {"cvd": os.environ.get("CUDA_VISIBLE_DEVICES"), "name": torch.cuda.get_device_name(0),
        "start": t0, "end": time.time(), "matmuls": n,
        "peak_gib": torch.cuda.max_memory_allocated() / 2**30}
with open(os.path.join(os.environ["BENCHLAB_RUN_DIR"], "metrics.json"), "w") as f:
    json.dump({"matmuls": n}, f)
with open(os.path.join(os.environ["BENCHLAB_RUN_DIR"], "job.json"), "w") as f:
    json.dump(info, f)
'''


def missing() -> str | None:
    """Why this machine cannot run the smoke test, or None."""
    try:
        import torch
    except ImportError:
        return "PyTorch is not installed (pip install torch)"
    if not torch.cuda.is_available():
        return "no CUDA GPU visible to PyTorch"
    from benchlab.execute.gpus import NoInventory, open_inventory

    inventory = open_inventory()
    if isinstance(inventory, NoInventory):
        return inventory.reason
    return None


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=8)
    parser.add_argument("--seconds", type=float, default=4.0)
    parser.add_argument("--gpus", default="auto", help="as `benchlab run --gpus` (auto: the free ones)")
    parser.add_argument("--mixed", action="store_true",
                        help="also a whole-GPU config beside the quarter-GPU one (fractions and whole GPUs)")
    args = parser.parse_args()
    if args.jobs < 1 or args.seconds <= 0:
        parser.error("--jobs must be at least 1 and --seconds above 0")
    from benchlab.errors import BenchlabError
    from benchlab.execute.placement import parse_gpus

    try:
        parse_gpus(args.gpus)
        why = missing()
    except BenchlabError as exc:
        print(f"gpu_smoke: {exc}", file=sys.stderr)
        return 2
    if why:
        print(f"gpu_smoke: cannot run here: {why}. It needs a machine with an NVIDIA GPU.")
        return 2
    try:
        return _smoke(args)
    except BenchlabError as exc:  # a user error (a GPU index this machine lacks, none free, ...)
        print(f"gpu_smoke: {exc}", file=sys.stderr)
        return 2


def _smoke(args: argparse.Namespace) -> int:
    from benchlab.execute.gpus import open_inventory
    from benchlab.execute.sweep import Sweep
    from benchlab.spec import load_spec

    inventory = open_inventory()
    samples: list[tuple[float, list]] = []
    stop = threading.Event()

    def watch() -> None:
        while not stop.is_set():
            samples.append((time.time(), inventory.read()))
            time.sleep(0.2)

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        (root / "job.py").write_text(JOB)
        (root / "smoke.yaml").write_text(f"""name: gpu-smoke
tasks: [{{name: matmul}}]
configs:
  - {{name: quarter, resources: {{gpus: 0.25, gpu_memory: 2}}}}
{"  - {name: whole, resources: {gpus: 1}}" if args.mixed else ""}
seeds: {args.jobs}
command: {sys.executable} job.py {args.seconds}
metrics: {{primary: {{name: matmuls, goal: max}}}}
retries: 0
""")
        watcher = threading.Thread(target=watch, daemon=True)
        watcher.start()
        t0 = time.time()
        result = Sweep(load_spec(root / "smoke.yaml"), root / "out", jobs=args.jobs,
                       gpus=args.gpus).run()
        stop.set()
        watcher.join()
        jobs = [json.loads(p.read_text()) for p in (root / "out" / "runs").glob("*/job.json")]
    print(f"{result.completed}/{result.total} jobs completed in {time.time() - t0:.1f} s on "
          f"GPUs {result.gpus}; busy share "
          + (f"{result.gpu_busy_share:.0%}" if result.gpu_busy_share is not None else "n/a"))
    for w in result.warnings:
        print(f"warning: {w}")
    by_device: dict[str, list[dict]] = defaultdict(list)
    for j in jobs:
        by_device[j["cvd"]].append(j)
    for dev, js in sorted(by_device.items()):
        at_once = max(sum(1 for k in js if k["start"] <= j["start"] < k["end"]) for j in js)
        peak = max((r.memory_used_mib for _, rs in samples for r in rs if str(r.index) == dev),
                   default=0)
        print(f"  GPU {dev} ({js[0]['name']}): {len(js)} jobs, at most {at_once} at once, "
              f"peak memory seen {peak / 1024:.1f} GiB, "
              f"job peak {max(j['peak_gib'] for j in js):.2f} GiB each")
    print(f"  NVML samples: {len(samples)} (every 0.2 s)")
    ok = result.completed == result.total and all(j["cvd"] and "," not in j["cvd"] for j in jobs)
    print("OK" if ok else "FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
