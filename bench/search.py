"""benchlab search with median pruning vs without pruning vs Ray Tune, on one synthetic objective.

The objective: a learning curve whose final value depends on three params (a, b, c), at most
200 steps a trial, each step costing a fixed sleep. 64 trials, 2 at a time, TPE (seeded) in all
three. benchlab runs each trial as a subprocess (as `benchlab search` does); Ray Tune runs the
same steps in its trainable (Tuner + OptunaSearch + ASHAScheduler, reuse_actors=True) on a local
Ray. Printed: wall time, best value, trial-steps run, and benchlab's per-trial overhead beyond
the runs themselves ((2 × wall − the runs' summed run time) / trials).

    python bench/search.py [--trials 64] [--step-s 0.005]
"""

from __future__ import annotations

import argparse
import math
import os
import sqlite3
import sys
import tempfile
import textwrap
import time
from pathlib import Path

STEPS = 200

SCRIPT = '''
import math, sys, time
from benchlab import log, summary
a, b, c, nap = float(sys.argv[1]), float(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4])
final = 1 - (a - 0.6) ** 2 - (math.log10(b) + 1.5) ** 2 / 4 - (c - 5) ** 2 / 50
for t in range(%(steps)d):
    value = final * (1 - math.exp(-(t + 1) / 30))
    log(step=t, value=value)
    time.sleep(nap)
summary(value=value)
'''.replace("%(steps)d", str(STEPS))


def objective_curve(a: float, b: float, c: int, t: int) -> float:
    final = 1 - (a - 0.6) ** 2 - (math.log10(b) + 1.5) ** 2 / 4 - (c - 5) ** 2 / 50
    return final * (1 - math.exp(-(t + 1) / 30))


SPEC = """
name: synth
tasks: [{name: t}]
configs: [{name: base, params: {a: 0.5, b: 0.1, c: 3}}]
seeds: 1
command: python run.py {a} {b} {c} %(nap)s
metrics: {primary: {name: value, goal: max}}
retries: 0
search:
  metric: {name: value, goal: max, allow_primary: true, reason: a synthetic objective with no test split}
  space:
    a: {uniform: [0, 1]}
    b: {log_uniform: [0.001, 1]}
    c: {int: [1, 8]}
  seeds: [1]
  budget: %(trials)d
  pruner: %(pruner)s
"""


def run_benchlab(root: Path, pruner: str, trials: int, nap: float) -> dict[str, float]:
    from benchlab.search import SearchRun
    from benchlab.search.study import read_study
    from benchlab.spec import load_spec

    folder = root / pruner
    folder.mkdir()
    (folder / "run.py").write_text(SCRIPT)
    (folder / "bench.yaml").write_text(textwrap.dedent(SPEC % {"nap": nap, "trials": trials, "pruner": pruner}))
    spec = load_spec(folder / "bench.yaml")
    t0 = time.perf_counter()
    result = SearchRun(spec, folder / "results", jobs=2).run()
    wall = time.perf_counter() - t0
    study_dir = folder / "results" / "search" / "search"
    study = read_study(study_dir)
    con = sqlite3.connect(study_dir / "benchlab.db")
    run_s = con.execute("SELECT SUM(ended - started) FROM attempts").fetchone()[0]
    con.close()
    steps = 0
    for t in study.trials:
        steps += (max(t.intermediate_values) + 1) if t.intermediate_values else (STEPS if t.value is not None else 0)
    return {"wall_s": wall, "best": result.best_value or float("nan"), "steps": steps,
            "pruned": result.pruned, "overhead_ms": 1000 * (2 * wall - run_s) / trials}


def run_ray_tune(root: Path, trials: int, nap: float) -> dict[str, float]:
    from ray.tune.schedulers import ASHAScheduler
    from ray.tune.search.optuna import OptunaSearch

    import ray
    from ray import tune

    def trainable(config: dict) -> None:
        for t in range(STEPS):
            tune.report({"value": objective_curve(config["a"], config["b"], config["c"], t), "step": t})
            time.sleep(nap)

    ray.init(num_cpus=2, include_dashboard=False, logging_level="ERROR", log_to_driver=False)
    try:
        space = {"a": tune.uniform(0, 1), "b": tune.loguniform(0.001, 1), "c": tune.randint(1, 9)}
        tuner = tune.Tuner(
            trainable, param_space=space,
            tune_config=tune.TuneConfig(metric="value", mode="max", num_samples=trials, max_concurrent_trials=2,
                                        search_alg=OptunaSearch(seed=0),
                                        scheduler=ASHAScheduler(max_t=STEPS, grace_period=10),
                                        reuse_actors=True),
            run_config=tune.RunConfig(storage_path=str(root / "ray"), verbose=0))
        t0 = time.perf_counter()
        grid = tuner.fit()
        wall = time.perf_counter() - t0
        best = grid.get_best_result().metrics["value"]
        steps = sum(int(r.metrics.get("step", -1)) + 1 for r in grid)
    finally:
        ray.shutdown()
    return {"wall_s": wall, "best": best, "steps": steps, "pruned": float("nan"), "overhead_ms": float("nan")}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--trials", type=int, default=64)
    parser.add_argument("--step-s", type=float, default=0.005)
    parser.add_argument("--skip-ray", action="store_true")
    args = parser.parse_args()
    os.environ["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")])
    load = os.getloadavg()
    print(f"{args.trials} trials, 2 at a time, {STEPS} steps of {args.step_s * 1000:g} ms; "
          f"load average {load[0]:.1f} {load[1]:.1f} {load[2]:.1f} on {os.cpu_count()} cores")
    rows = {}
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        rows["benchlab, median pruning"] = run_benchlab(root, "median", args.trials, args.step_s)
        rows["benchlab, no pruning"] = run_benchlab(root, "none", args.trials, args.step_s)
        if not args.skip_ray:
            rows["Ray Tune (OptunaSearch + ASHA)"] = run_ray_tune(root, args.trials, args.step_s)
    print(f"{'':34} {'wall s':>8} {'best':>8} {'trial-steps':>12} {'pruned':>7} {'overhead ms/trial':>18}")
    for name, r in rows.items():
        print(f"{name:34} {r['wall_s']:8.1f} {r['best']:8.4f} {r['steps']:12.0f} {r['pruned']:7.0f} "
              f"{r['overhead_ms']:18.1f}")
    med, none = rows["benchlab, median pruning"], rows["benchlab, no pruning"]
    print(f"pruning saved {1 - med['steps'] / none['steps']:.0%} of trial-steps (goal: at least 50%)")
    if "Ray Tune (OptunaSearch + ASHA)" in rows:
        ray_wall = rows["Ray Tune (OptunaSearch + ASHA)"]["wall_s"]
        print(f"wall time, Ray Tune / benchlab median: {ray_wall / med['wall_s']:.2f}")


if __name__ == "__main__":
    main()
