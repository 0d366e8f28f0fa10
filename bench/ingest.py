"""Metric ingest: 100 runs × 1,000 logged steps of one metric, written and read back.

benchlab: each run's steps go through `benchlab.log` into its metrics.jsonl, then
the sweep's collector puts them into the SQLite ledger; reading back is
`benchlab.load(results)`, a long-format DataFrame.
MLflow (the anchor): its local store (SQLite, MLflow's default since the file store
went into maintenance), one `log_batch` of 1,000 metrics per run;
reading back is each run's metric history, gathered into a DataFrame.
The goal (issue 2): benchlab at least 50× faster both ways.

    pip install mlflow   # the anchor; also in the `bench` extra
    python bench/ingest.py [--runs 100] [--steps 1000] [--repeat 3] [--dir DIR]

Each side is timed ``--repeat`` times in fresh folders under ``--dir`` (default: the
system temp folder) and its best time is kept.
"""

from __future__ import annotations

import argparse
import logging
import math
import os
import shutil
import tempfile
import time
import warnings
from pathlib import Path


def values(run: int, steps: int) -> list[float]:
    return [math.exp(-s / 300) + 0.001 * ((run * 7919 + s) % 97) for s in range(steps)]


def benchlab_write(root: Path, runs: int, steps: int) -> Path:
    from benchlab.collect import collect_run
    from benchlab.ledger import COMPLETED, Store
    from benchlab.names.benchmark_info import BenchmarkInfo
    from benchlab.plan import Run
    from benchlab.runlog import Logger
    from benchlab.spec import Metric

    results = root / "benchlab"
    plan = [Run(run_id=f"r{i:04d}", benchmark="ingest", task="t", config="c", seed=i, params={},
                command="true") for i in range(runs)]
    for run in plan:
        logger = Logger(results / "runs" / run.run_id)
        for step, value in enumerate(values(run.seed, steps)):
            logger.log(step=step, loss=value)
        logger.close()
    metrics = [Metric(name="loss", goal="min")]
    with Store.create(results) as store:
        store.set_benchmark(BenchmarkInfo(name="ingest", primary="loss", goal={"loss": "min"},
                                          baseline=None, tasks=["t"], configs=["c"]))
        store.register(plan)
        for run in plan:
            attempt, _ = store.start_attempt(run.run_id, host="bench")
            got = collect_run(results / "runs" / run.run_id, metrics)
            store.finish_attempt(attempt, run.run_id, status=COMPLETED, run_status=COMPLETED,
                                 exit_code=0, metrics=got.finals, series=got.series)
    return results


def benchlab_read(results: Path):
    import benchlab

    return benchlab.load(results)


def mlflow_write(root: Path, runs: int, steps: int) -> list[str]:
    import mlflow
    from mlflow.entities import Metric as MlMetric
    from mlflow.tracking import MlflowClient

    mlflow.set_tracking_uri(f"sqlite:///{root / 'mlflow.db'}")
    client = MlflowClient()
    exp = client.create_experiment("ingest")
    ids = []
    now = int(time.time() * 1000)
    for i in range(runs):
        run = client.create_run(exp)
        batch = [MlMetric("loss", v, now, s) for s, v in enumerate(values(i, steps))]
        client.log_batch(run.info.run_id, metrics=batch)
        client.set_terminated(run.info.run_id)
        ids.append(run.info.run_id)
    return ids


def mlflow_read(root: Path, ids: list[str]):
    import mlflow
    import pandas as pd
    from mlflow.tracking import MlflowClient

    mlflow.set_tracking_uri(f"sqlite:///{root / 'mlflow.db'}")
    client = MlflowClient()
    frames = []
    for seed, rid in enumerate(ids):
        hist = client.get_metric_history(rid, "loss")
        frames.append(pd.DataFrame({"seed": seed, "metric": "loss", "step": [m.step for m in hist],
                                    "value": [m.value for m in hist]}))
    return pd.concat(frames, ignore_index=True)


def create_latency_ms(folder: Path, n: int = 100) -> float:
    """Milliseconds to create and write one small file in ``folder``: benchlab writes
    two per run (and a directory), MLflow one database in all, so a disk slow at
    creating files weighs on benchlab's side only."""
    probe = Path(tempfile.mkdtemp(prefix="probe-", dir=folder))
    t0 = time.perf_counter()
    for i in range(n):
        (probe / f"f{i}").write_bytes(b"x" * 100)
    took = (time.perf_counter() - t0) / n * 1000
    shutil.rmtree(probe, ignore_errors=True)
    return took


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=100)
    parser.add_argument("--steps", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--dir", type=Path, default=None, help="where both write (default: temp folder)")
    args = parser.parse_args()
    logging.getLogger("mlflow").setLevel(logging.ERROR)
    warnings.filterwarnings("ignore")
    os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")
    root = Path(tempfile.mkdtemp(prefix="benchlab-ingest-", dir=args.dir))
    # Imports happen before any timing, for both sides: the figures are the work, not start-up.
    import numpy  # noqa: F401
    import pandas  # noqa: F401

    import benchlab.collect  # noqa: F401
    import benchlab.ledger  # noqa: F401
    import benchlab.results  # noqa: F401
    try:
        import mlflow  # noqa: F401
        from mlflow.tracking import MlflowClient  # noqa: F401
        have_mlflow = True
    except ImportError:
        have_mlflow = False
    best = {k: float("inf") for k in ("bl_write", "bl_read", "ml_write", "ml_read")}
    latency_before = create_latency_ms(root.parent)

    def timed(key: str, fn, *a):  # type: ignore[no-untyped-def]
        t0 = time.perf_counter()
        out = fn(*a)
        best[key] = min(best[key], time.perf_counter() - t0)
        return out

    try:
        for i in range(args.repeat):
            results = timed("bl_write", benchlab_write, root / f"b{i}", args.runs, args.steps)
            table = timed("bl_read", benchlab_read, results)
            curve = table[table["step"].notna()]
            assert len(curve) == args.runs * args.steps, len(curve)
            if have_mlflow:
                (root / f"m{i}").mkdir()
                ids = timed("ml_write", mlflow_write, root / f"m{i}", args.runs, args.steps)
                ml_table = timed("ml_read", mlflow_read, root / f"m{i}", ids)
                assert len(ml_table) == args.runs * args.steps
    finally:
        shutil.rmtree(root, ignore_errors=True)
    points = args.runs * args.steps
    print(f"{args.runs} runs x {args.steps} steps = {points:,} points, best of {args.repeat}, in {root.parent} "
          f"(creating a file there: {latency_before:.2f} ms before, {create_latency_ms(root.parent):.2f} after)")
    if not have_mlflow:
        print(f"benchlab: write {best['bl_write']:.3f} s, read {best['bl_read']:.3f} s "
              "(install mlflow to measure the anchor)")
        return
    for way in ("write", "read"):
        ml, bl = best[f"ml_{way}"], best[f"bl_{way}"]
        print(f"  {way + ':':6} mlflow {ml:7.3f} s   benchlab {bl:6.3f} s   {ml / bl:6.1f}x faster")
    ok = all(best[f"ml_{w}"] / best[f"bl_{w}"] >= 50 for w in ("write", "read"))
    print(f"goal: at least 50x faster both ways -> {'met' if ok else 'NOT met'}")


if __name__ == "__main__":
    main()
