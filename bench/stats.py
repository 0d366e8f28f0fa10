"""Across-task aggregates with stratified bootstrap CIs: benchlab vs rliable, same work.

5 configs x 26 tasks x 10 seeds of normalised scores; IQM, median, mean and
optimality gap, each with a 95% stratified-bootstrap percentile CI, at the same
number of resamples for both. Prints both wall times and the ratio, and checks
that the two agree within Monte Carlo error.

Then times the whole `benchlab analyze` command (a subprocess: start-up, imports,
every per-task statistic, the comparisons with config0 and the aggregates) on the
same table as a long-format CSV, at the same number of resamples; best of 3.

    pip install -e '.[bench]'
    python bench/stats.py [--reps 2000] [--configs 5] [--tasks 26] [--seeds 10] [--skip-rliable]
"""

from __future__ import annotations

import argparse
import inspect
import os
import resource
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np

from benchlab.stats import aggregate_many


def _load_rliable():  # type: ignore[no-untyped-def]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from arch.bootstrap import IIDBootstrap
        from rliable import library, metrics
    original = IIDBootstrap.__init__
    if "seed" in inspect.signature(original).parameters:
        # arch 8 renamed `random_state` to `seed`; rliable 1.2 still passes `random_state`.
        def init(self, *args, random_state=None, seed=None, **kwargs):  # type: ignore[no-untyped-def]
            original(self, *args, seed=seed if seed is not None else random_state, **kwargs)

        IIDBootstrap.__init__ = init  # type: ignore[method-assign]
    return library, metrics


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=2000)
    parser.add_argument("--configs", type=int, default=5)
    parser.add_argument("--tasks", type=int, default=26)
    parser.add_argument("--seeds", type=int, default=10)
    parser.add_argument("--skip-rliable", action="store_true",
                        help="time only `benchlab analyze` (rliable takes minutes at 50,000)")
    args = parser.parse_args()
    from bytecode_first import compile_benchlab

    compile_benchlab()

    rng = np.random.default_rng(0)
    scores = {
        f"config{i}": rng.normal(rng.uniform(0.2, 1.5, args.tasks), 0.25,
                                 size=(args.seeds, args.tasks))
        for i in range(args.configs)
    }
    if not args.skip_rliable:
        _versus_rliable(scores, args)
    _time_analyze(scores, args.reps)


def _time_analyze(scores: dict[str, np.ndarray], reps: int) -> None:
    rows = ["task,config,seed,value"]
    for config, matrix in scores.items():
        for seed, row in enumerate(matrix):
            rows += [f"task{t},{config},{seed},{v!r}" for t, v in enumerate(row.tolist())]
    with tempfile.TemporaryDirectory() as tmp:
        table = Path(tmp) / "table.csv"
        table.write_text("\n".join(rows) + "\n")
        command = [sys.executable, "-m", "benchlab", "analyze", str(table), "--baseline",
                   "config0", "--reps", str(reps), "--json"]
        walls, cpus = [], []
        for _ in range(3):
            before = resource.getrusage(resource.RUSAGE_CHILDREN)
            t0 = time.perf_counter()
            subprocess.run(command, check=True, stdout=subprocess.DEVNULL)
            walls.append(time.perf_counter() - t0)
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
            cpus.append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
    seeds, tasks = next(iter(scores.values())).shape
    print(f"benchlab analyze, {len(scores)} configs x {tasks} tasks x {seeds} seeds, {reps} "
          f"resamples, best of 3: {min(walls):.3f} s wall, {min(cpus):.3f} s CPU "
          f"(load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores)")


def _versus_rliable(scores: dict[str, np.ndarray], args: argparse.Namespace) -> None:
    library, metrics = _load_rliable()
    load_before = os.getloadavg()[0]

    def four(s: np.ndarray) -> np.ndarray:
        return np.array([metrics.aggregate_iqm(s), metrics.aggregate_median(s),
                         metrics.aggregate_mean(s), metrics.aggregate_optimality_gap(s)])

    np.random.seed(0)
    t0, c0 = time.perf_counter(), time.process_time()
    ref_point, ref_ci = library.get_interval_estimates(scores, four, reps=args.reps)
    t_rliable, c_rliable = time.perf_counter() - t0, time.process_time() - c0

    aggregate_many(list(scores.values()), reps=10, seed=0)  # warm-up: first-call costs
    t0, c0 = time.perf_counter(), time.process_time()
    # All configs at once, as rliable's get_interval_estimates takes them; rliable's
    # interval is the plain percentile one: the same work, comparable bounds.
    ours = dict(zip(scores, aggregate_many(list(scores.values()), reps=args.reps, seed=0,
                                           method="percentile"), strict=True))
    t_benchlab, c_benchlab = time.perf_counter() - t0, time.process_time() - c0

    names = ("iqm", "median", "mean", "optimality_gap")
    worst = 0.0
    for key in scores:
        for i, name in enumerate(names):
            value, low, high = ours[key][name]
            assert np.isclose(value, ref_point[key][i]), (key, name)
            width = ref_ci[key][1, i] - ref_ci[key][0, i]
            worst = max(worst, abs(low - ref_ci[key][0, i]) / width,
                        abs(high - ref_ci[key][1, i]) / width)

    print(f"work: {args.configs} configs x {args.tasks} tasks x {args.seeds} seeds, "
          f"4 aggregates, {args.reps} stratified resamples each")
    print(f"load average before/after: {load_before:.1f} / {os.getloadavg()[0]:.1f} "
          f"on {os.cpu_count()} cores (CPU time is the steadier figure on a busy machine)")
    print("             wall      CPU")
    print(f"rliable : {t_rliable:8.3f} s {c_rliable:8.3f} s")
    print(f"benchlab: {t_benchlab:8.3f} s {c_benchlab:8.3f} s")
    print(f"speed-up: {t_rliable / t_benchlab:8.1f}x  {c_rliable / c_benchlab:8.1f}x")
    print(f"largest CI bound difference: {worst:.3f} of the CI width (Monte Carlo error)")


if __name__ == "__main__":
    main()
