"""Dispatch overhead on Ray: benchlab's ray backend vs Ray Tune, on the same trivial runs.

Both run N trivial commands (``echo score=1``) on one local Ray instance: benchlab as
a full sweep (run directories, ledger, provenance, results shipped home), Ray
Tune as N trials of a function trainable (``reuse_actors=True``) that runs
``subprocess.run`` of the same command and reports one metric. Printed: wall time per run
for each and the ratio. Goal: benchlab <= 10 ms per run.

    python bench/dispatch_ray.py --runs 500
"""

from __future__ import annotations

import argparse
import logging
import os
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

GOAL_MS = 10.0
COMMAND = "echo score=1"  # trivial, and gives benchlab's sweep a metric to collect


def bench_benchlab(runs: int, work: Path) -> float:
    from benchlab.execute.sweep import Sweep
    from benchlab.spec import load_spec

    work.mkdir(parents=True, exist_ok=True)
    spec_path = work / "dispatch.yaml"
    spec_path.write_text(textwrap.dedent(f"""
        name: dispatch
        tasks: [{{name: noop}}]
        configs: [{{name: echo}}]
        seeds: {runs}
        command: {COMMAND}
        metrics:
          primary: {{name: score, from: {{regex: 'score=(\\d+)'}}}}
        resources: {{cpus: 1}}
        retries: 0
    """).lstrip())
    spec = load_spec(spec_path, [])
    t0 = time.perf_counter()
    result = Sweep(spec, work / "results", backend="ray").run()
    wall = time.perf_counter() - t0
    assert result.total == runs, result
    return wall


def trivial_trial(config: dict) -> None:
    from ray import tune

    subprocess.run(COMMAND, shell=True, check=True, stdout=subprocess.DEVNULL)
    tune.report({"score": 1.0})


def bench_tune(runs: int, work: Path) -> float:
    from ray import tune

    tuner = tune.Tuner(
        tune.with_resources(trivial_trial, {"cpu": 1}),
        param_space={"i": tune.grid_search(list(range(runs)))},
        tune_config=tune.TuneConfig(reuse_actors=True),
        run_config=tune.RunConfig(storage_path=str(work / "tune"), name="dispatch", verbose=0),
    )
    t0 = time.perf_counter()
    grid = tuner.fit()
    wall = time.perf_counter() - t0
    assert len(grid) == runs and not grid.errors, grid.errors
    return wall


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=500)
    parser.add_argument("--cpus", type=int, default=os.cpu_count() or 2,
                        help="CPUs of the local Ray instance [default: this machine's cores]")
    args = parser.parse_args()
    os.environ.setdefault("RAY_AIR_NEW_OUTPUT", "0")
    import ray

    ray.init(num_cpus=args.cpus, include_dashboard=False, logging_level=logging.WARNING,
             log_to_driver=False)
    try:
        with tempfile.TemporaryDirectory() as tmp:
            work = Path(tmp)
            # Each side gets a warm-up round right before it is timed, so Ray's worker
            # start-up is charged to neither.
            bench_benchlab(2 * args.cpus, work / "warm")
            ours = bench_benchlab(args.runs, work) * 1000 / args.runs
            bench_tune(2 * args.cpus, work / "warm")
            tune_ms = bench_tune(args.runs, work) * 1000 / args.runs
    finally:
        ray.shutdown()
    print(f"{args.runs} trivial runs ('{COMMAND}') on a local Ray instance with {args.cpus} CPUs")
    print(f"  benchlab --backend ray   {ours:7.2f} ms per run")
    print(f"  Ray Tune (reuse_actors)  {tune_ms:7.2f} ms per run")
    print(f"  ratio Ray Tune / benchlab = {tune_ms / ours:.2f}")
    verdict = "met" if ours <= GOAL_MS else "NOT met"
    print(f"  goal: benchlab <= {GOAL_MS:g} ms per run -> {verdict}")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
