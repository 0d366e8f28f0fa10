"""GPU packing with real subprocesses: benchlab against the shell loop and FIFO.

48 runs (``sleep`` of seeded heterogeneous durations, the runs of
``bench/packing_sim.py`` scaled from minutes down to 0.2-2 s) with mixed
requests (1 GPU, half a GPU, 2 GPUs) on 8 simulated devices: the GPU double,
a recording of 8 free A100s, so benchlab's real local backend places real
processes. Every scheduler runs the same 48 commands for real:

- benchlab, cold: the first sweep of these configs, no durations known yet;
- benchlab, warm: the same configs again, with durations learned from the
  first sweep's attempts (``Store.durations``), so the queue goes longest first;
- FIFO: benchlab's accounting with the queue left in submission order;
- then 16 configs x 3 seeds, a first sweep: benchlab learning each config's
  duration from its first seed, against FIFO;
- the round-robin shell loop of the seed notes: 8 background shell loops,
  ``(cmd1; cmd2; ...) &`` per GPU, run i on GPU i mod 8, serial per GPU (a
  2-GPU run simply goes in one queue, which flatters the loop: it oversubscribes).

Prints makespan / lower bound for each, with lower bound =
max(total device-seconds / 8, longest run), and benchlab's GPU busy share. Then
the refill gap: 30 runs of 1 GPU on a single device, from one run's end to the
next one's start as the ledger records them (benchlab's own latency: collecting
the run, the ledger, the device's memory check, starting the next process).

    python bench/packing.py [--seed 0]
"""

from __future__ import annotations

import argparse
import os
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from packing_sim import N_DEVICES, lower_bound, make_runs  # noqa: E402

from benchlab.execute import queue as queue_module  # noqa: E402
from benchlab.execute.sweep import Sweep  # noqa: E402
from benchlab.spec import load_spec  # noqa: E402

SCALE = 1 / 1000  # simulated seconds -> real seconds
GPU_ROW = "{i}, GPU-00000000-0000-0000-0000-00000000000{i}, NVIDIA A100-SXM4-80GB, 81920, 4, 0"
METRIC = "echo '{{\"score\": 1}}' > \"$BENCHLAB_RUN_DIR/metrics.json\""


def write_double(folder: Path) -> None:
    folder.mkdir()
    rows = "\n".join(GPU_ROW.format(i=i) for i in range(N_DEVICES))
    (folder / "query-gpu.0.csv").write_text(rows + "\n")


def write_spec(path: Path, durations: list[float], gpus: list[float], seeds: int = 1) -> None:
    configs = "\n".join(
        f"  - {{name: r{i:02d}, params: {{d: {d:.3f}}}, resources: {{gpus: {g:g}}}}}"
        for i, (d, g) in enumerate(zip(durations, gpus, strict=True)))
    path.write_text(f"""name: packing
tasks: [{{name: sleep}}]
configs:
{configs}
seeds: {seeds}
variables: {{sweep: cold}}
command: >-
  sleep {{d}} && {METRIC} # {{sweep}}
metrics: {{primary: {{name: score, goal: max}}}}
retries: 0
""")


def measure(results: Path, since: float) -> tuple[float, list[float]]:
    """(makespan, gaps) of the attempts started after ``since``, from the ledger; a gap is how
    long after a run's end the next run started (anywhere)."""
    con = sqlite3.connect(results / "benchlab.db")
    rows = con.execute("SELECT started, ended FROM attempts WHERE started >= ? ORDER BY started",
                       (since,)).fetchall()
    con.close()
    starts = sorted(s for s, _ in rows)
    gaps = []
    for _, end in rows:
        later = [s for s in starts if s >= end]
        if later:
            gaps.append(later[0] - end)  # how long a freed slot stayed empty, at most
    return max(e for _, e in rows) - min(s for s, _ in rows), gaps


def run_sweep(spec_path: Path, results: Path, sweep_name: str, fifo: bool = False
              ) -> tuple[float, list[float], float | None]:
    spec = load_spec(spec_path, [f"sweep={sweep_name}"])
    since = time.time()
    original = queue_module.order_queue
    if fifo:
        queue_module.order_queue = lambda todo, estimates: None  # type: ignore[assignment]
    try:
        result = Sweep(spec, results, jobs=32, gpus="auto").run()
    finally:
        queue_module.order_queue = original
    if result.completed != len(spec.configs) * len(spec.seed_list):
        raise SystemExit(f"{sweep_name}: only {result.completed} runs completed")
    makespan, gaps = measure(results, since)
    return makespan, gaps, result.gpu_busy_share


def measure_refill(root: Path, n: int = 30) -> list[float]:
    """Gaps (s) between one run's end and the next one's start on a single device (1 GPU per
    run, so each start waits for the previous end), as the ledger records them."""
    folder = root / "one-gpu"
    folder.mkdir()
    (folder / "query-gpu.0.csv").write_text(GPU_ROW.format(i=0) + "\n")
    os.environ["BENCHLAB_GPU_DOUBLE"] = str(folder)
    spec = root / "refill.yaml"
    spec.write_text(f"""name: refill
tasks: [{{name: t}}]
configs: [{{name: a}}]
seeds: {n}
resources: {{gpus: 1}}
command: >-
  sleep 0.05 && {METRIC}
metrics: {{primary: {{name: score, goal: max}}}}
""")
    Sweep(load_spec(spec), root / "refill", jobs=4, gpus="auto").run()
    con = sqlite3.connect(root / "refill" / "benchlab.db")
    rows = con.execute("SELECT started, ended FROM attempts ORDER BY started").fetchall()
    con.close()
    return [b[0] - a[1] for a, b in zip(rows, rows[1:], strict=False)]


def run_shell_loop(durations: list[float], workdir: Path) -> float:
    queues: list[list[str]] = [[] for _ in range(N_DEVICES)]
    for i, d in enumerate(durations):
        queues[i % N_DEVICES].append(f"CUDA_VISIBLE_DEVICES={i % N_DEVICES} sleep {d:.3f}")
    script = " ".join(f"( {'; '.join(q)} ) &" for q in queues) + " wait"
    t0 = time.monotonic()
    subprocess.run(["sh", "-c", script], cwd=workdir, check=True)
    return time.monotonic() - t0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    sim = make_runs(args.seed)
    durations = [max(0.2, r.duration_s * SCALE) for r in sim]
    gpus = [r.gpus for r in sim]
    lb = max(sum(d * g for d, g in zip(durations, gpus, strict=True)) / N_DEVICES, max(durations))
    assert abs(lb - lower_bound(sim) * SCALE) < 1.0  # same workload as the simulation, scaled
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        write_double(root / "gpus")
        os.environ["BENCHLAB_GPU_DOUBLE"] = str(root / "gpus")
        spec = root / "packing.yaml"
        write_spec(spec, durations, gpus)
        print(f"{len(durations)} runs on {N_DEVICES} simulated GPUs (seed {args.seed}): "
              f"{gpus.count(1.0)} x 1, {gpus.count(0.5)} x 0.5, {gpus.count(2.0)} x 2 GPUs; "
              f"sleeps {min(durations):.2f}-{max(durations):.2f} s; lower bound {lb:.2f} s")
        rows = []
        cold = run_sweep(spec, root / "results", "cold")
        rows.append(("benchlab, cold (no durations known)", *cold))
        warm = run_sweep(spec, root / "results", "warm")
        rows.append(("benchlab, warm (learned durations)", *warm))
        fifo = run_sweep(spec, root / "fifo", "fifo", fifo=True)
        rows.append(("FIFO (benchlab, submission order)", *fifo))
        # 16 configs x 3 seeds: a first sweep that learns each config's duration from its
        # first seed and orders the other seeds by it.
        per_config_d, per_config_g = durations[:16], gpus[:16]
        seeded = root / "seeded.yaml"
        write_spec(seeded, per_config_d, per_config_g, seeds=3)
        lb_seeded = max(3 * sum(d * g for d, g in zip(per_config_d, per_config_g, strict=True))
                        / N_DEVICES, max(per_config_d))
        learn = run_sweep(seeded, root / "seeded", "cold")
        learn_fifo = run_sweep(seeded, root / "seeded-fifo", "cold", fifo=True)
        shell = run_shell_loop(durations, root)
        rows.append(("round-robin shell loop", shell, [], None))
        refill = sorted(measure_refill(root))
    for name, makespan, _gaps, share in rows:
        extra = ""
        if share is not None:
            extra += f"; GPU busy {share:.0%}"
        print(f"  {name:<38} makespan {makespan:5.2f} s = {makespan / lb:.3f} x lower bound{extra}")
    print(f"16 configs x 3 seeds (the first 16 runs' durations and requests), a first sweep; "
          f"lower bound {lb_seeded:.2f} s")
    for name, (makespan, _gaps, share) in (("benchlab (learns from each config's first seed)", learn),
                                           ("FIFO (benchlab, submission order)", learn_fifo)):
        print(f"  {name:<48} makespan {makespan:5.2f} s = {makespan / lb_seeded:.3f} x lower bound; "
              f"GPU busy {share:.0%}")
    print(f"  refill on one GPU ({len(refill) + 1} runs of 1 GPU in a row): a run's end to the "
          f"next start: median {statistics.median(refill) * 1000:.1f} ms, "
          f"max {refill[-1] * 1000:.1f} ms")
    goal = warm[0] / lb
    print(f"  goal: benchlab (warm) <= 1.10 x lower bound -> {'met' if goal <= 1.10 else 'NOT met'}")


if __name__ == "__main__":
    main()
