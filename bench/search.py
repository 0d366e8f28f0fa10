"""benchlab search (median, asha and no pruning) vs Ray Tune, on one synthetic objective.

The objective: a learning curve whose final value depends on three params (a, b, c), at most
200 steps a trial, each step costing a fixed sleep. 64 trials, 2 at a time, TPE (seeded) in
every run. benchlab runs each trial as a subprocess (as `benchlab search` does); Ray Tune runs the
same steps in its trainable (Tuner + OptunaSearch + ASHAScheduler, reuse_actors=True) on a local
Ray. Each sampler seed (--seeds) is one run of each.

Printed per seed: wall time, best value, trial-steps (the steps the trials reported to the
pruner), ran (the steps the trials' runs wrote, those a pruned run made before it was stopped
included), the runs' summed time, pruned trials, and benchlab's per-trial overhead, over the
completed trials:

- beyond: the trial's wall time minus its run's own wall time. The trial's wall time is Optuna's
  (``datetime_start``, when the trial is asked, to ``datetime_complete``, when it is told); the
  run's own is what the run measures itself, from the first line of its script to the last
  (``import benchlab`` in the script counts as the run's: its cost is printed as ``import``).
  It splits into:
- driver: benchlab's work in the search process, the trial's wall time minus the attempt's
  spawn-to-reap time in the ledger (asking Optuna, which samples; the ledger; the run folder;
  the spawn call; collecting, recording, telling Optuna);
- start: from the spawn to the script's first line (``/bin/sh`` and the Python interpreter);
- exit: from the script's last line to the reap (the interpreter's shutdown, ``benchlab.log``
  closing its files, the wake-up of the search process).
- optuna: the time in Optuna's ``Study.ask`` and ``Study.tell`` (the sampler, its storage), the
  mean over all trials; part of ``driver``.
- idle: (2 × wall − the runs' summed run time) / trials, slot time outside any run, start-up
  of the search and the last trial's tail included (the figure this file printed first).
- gap: how long a slot stands empty between one run's exit (its reap) and the next run's spawn,
  every trial but the first two; ``own`` is the gap less the time in Optuna's ask and tell
  within it: benchlab's part of a trial's cost beyond its run, the slot's idle time.

The floor (``bare loop``): a loop of a few lines that does only what no search can skip between
two trials (wait on the pidfd, read the run's value, tell, ask, make the run folder, spawn),
keeping no record: no ledger, no provenance, no curve read back. Its gap is the least a trial
can cost beyond its run on this machine, with the same script, sampler and storage.

Runs of benchlab: median pruning (the default), asha with Optuna's defaults, asha with the rungs
of the Ray Tune run (``{name: asha, min_steps: 10, reduction_factor: 4}``), and no pruning.

    python bench/search.py [--trials 64] [--step-s 0.005] [--seeds 0,1,2] [--skip-ray] [--skip-floor]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import select
import shlex
import sqlite3
import statistics
import sys
import tempfile
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

STEPS = 200

SCRIPT = '''
import time
T0 = time.time()  # the run's own clock starts at its first line
import json, math, os, sys
from benchlab import log, summary
T1 = time.time()
a, b, c, nap = float(sys.argv[1]), float(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4])
final = 1 - (a - 0.6) ** 2 - (math.log10(b) + 1.5) ** 2 / 4 - (c - 5) ** 2 / 50
for t in range(%(steps)d):
    value = final * (1 - math.exp(-(t + 1) / 30))
    log(step=t, value=value)
    time.sleep(nap)
summary(value=value)
with open(os.path.join(os.environ["BENCHLAB_RUN_DIR"], "wall.json"), "w") as fh:
    json.dump([T0, T1, time.time()], fh)  # the run's own wall time, first line to last
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
  sampler_seed: %(seed)d
  budget: %(trials)d
  pruner: %(pruner)s
"""


#: benchlab's pruner for each kind of run; ``asha-ray`` has the rungs of the Ray Tune run below
#: (``ASHAScheduler(grace_period=10, reduction_factor=4)``: steps 10, 40, 160).
PRUNERS = {"median": "median", "asha": "asha", "asha-ray": "{name: asha, min_steps: 10, reduction_factor: 4}",
           "none": "none"}


def run_benchlab(root: Path, kind: str, trials: int, nap: float, seed: int) -> dict[str, float]:
    from benchlab.names.run_files import run_dir_of
    from benchlab.search import SearchRun
    from benchlab.search.study import read_study
    from benchlab.spec import load_spec

    folder = root / f"{kind}-{seed}"
    folder.mkdir()
    (folder / "run.py").write_text(SCRIPT)
    values = {"nap": nap, "trials": trials, "pruner": PRUNERS[kind], "seed": seed}
    (folder / "bench.yaml").write_text(textwrap.dedent(SPEC % values))
    spec = load_spec(folder / "bench.yaml")
    with _timing_optuna() as calls:
        t0 = time.perf_counter()
        result = SearchRun(spec, folder / "results", jobs=2).run()
        wall = time.perf_counter() - t0
    optuna_s = [end - begin for begin, end in calls]
    study_dir = folder / "results" / "search" / "search"
    study = read_study(study_dir)
    con = sqlite3.connect(study_dir / "benchlab.db")
    attempts = {rid: (started, ended) for rid, started, ended in
                con.execute("SELECT run_id, started, ended FROM attempts")}
    con.close()
    run_s = sum(e - s for s, e in attempts.values())
    gaps, own = slot_gaps(list(attempts.values()), calls)
    steps = 0
    ran = 0  # the steps the trials' runs wrote, those after a prune decision included
    driver: list[float] = []  # per completed trial: (tell - ask) - (spawn ... exit), in s
    beyond: list[float] = []  # per completed trial: (tell - ask) - the run's own wall time
    start_up: list[float] = []  # per completed trial: the run's first line - its spawn
    exits: list[float] = []  # per completed trial: its reap - the run's last line
    imports: list[float] = []  # per completed trial: `from benchlab import log` in the run
    for t in study.trials:
        steps += (max(t.intermediate_values) + 1) if t.intermediate_values else (STEPS if t.value is not None else 0)
        for run_id in t.user_attrs.get("benchlab_runs", []):
            curve = run_dir_of(study_dir, run_id) / "metrics.jsonl"
            ran += curve.read_bytes().count(b"\n") if curve.exists() else 0
        if t.state.name != "COMPLETE" or t.datetime_start is None or t.datetime_complete is None:
            continue
        (run_id,) = t.user_attrs["benchlab_runs"]
        first, imported, last = json.loads((run_dir_of(study_dir, run_id) / "wall.json").read_text())
        spawned, reaped = attempts[run_id]
        trial_s = t.datetime_complete.timestamp() - t.datetime_start.timestamp()
        driver.append(trial_s - (reaped - spawned))
        beyond.append(trial_s - (last - first))
        start_up.append(first - spawned)
        exits.append(reaped - last)
        imports.append(imported - first)
    return {"wall_s": wall, "best": result.best_value or float("nan"), "steps": steps, "ran": ran, "run_s": run_s,
            "pruned": result.pruned, "overhead_ms": 1000 * statistics.mean(beyond),
            "driver_ms": 1000 * statistics.mean(driver), "start_ms": 1000 * statistics.mean(start_up),
            "exit_ms": 1000 * statistics.mean(exits), "import_ms": 1000 * statistics.mean(imports),
            "idle_ms": 1000 * (2 * wall - run_s) / trials, "optuna_ms": 1000 * sum(optuna_s) / len(study.trials),
            "gap_ms": _mean_ms(gaps), "own_ms": _mean_ms(own), "own": own}


def _mean_ms(values: list[float]) -> float:
    """The mean in ms, NaN where there is none (no trial after the first two)."""
    return 1000 * statistics.mean(values) if values else float("nan")


def slot_gaps(attempts: list[tuple[float, float]], calls: list[tuple[float, float]]) -> tuple[list[float], list[float]]:
    """For each spawn after a reap: the time since the last reap before it, and that time less the
    Optuna calls inside it (``attempts``: (spawned, reaped); ``calls``: (begin, end); wall clock)."""
    reaps = sorted(end for _, end in attempts)
    gaps: list[float] = []
    own: list[float] = []
    for spawned, _ in sorted(attempts):
        before = [r for r in reaps if r <= spawned]
        if not before:
            continue  # the first runs: no slot was freed for them
        freed = before[-1]
        gaps.append(spawned - freed)
        own.append(spawned - freed - sum(end - begin for begin, end in calls if begin >= freed and end <= spawned))
    return gaps, own


@contextlib.contextmanager
def _timing_optuna() -> Iterator[list[float]]:
    """When Optuna's ``Study.ask`` and ``Study.tell`` ran (the sampler, the study's bookkeeping and
    its storage): a (begin, end) per call, while the block runs."""
    import optuna

    spent: list[tuple[float, float]] = []  # (begin, end) of each call, wall clock as the ledger's
    originals = {name: getattr(optuna.Study, name) for name in ("ask", "tell")}

    def timed(original: Any) -> Any:
        def call(*args: Any, **kwargs: Any) -> Any:
            t0 = time.time()
            try:
                return original(*args, **kwargs)
            finally:
                spent.append((t0, time.time()))
        return call

    for name, original in originals.items():
        setattr(optuna.Study, name, timed(original))
    try:
        yield spent
    finally:
        for name, original in originals.items():
            setattr(optuna.Study, name, original)


def run_floor(root: Path, trials: int, nap: float, seed: int) -> dict[str, float]:
    """The bare loop (see the module's docstring): two slots, the same script, TPE and storage."""
    import optuna

    from benchlab.search.study import journal_storage

    folder = root / f"floor-{seed}"
    folder.mkdir()
    (folder / "run.py").write_text(SCRIPT)
    dist = optuna.distributions
    space = {"a": dist.FloatDistribution(0, 1), "b": dist.FloatDistribution(0.001, 1, log=True),
             "c": dist.IntDistribution(1, 8)}
    study = optuna.create_study(storage=journal_storage(folder / "study"), direction="maximize",
                                sampler=optuna.samplers.TPESampler(seed=seed))
    env = dict(os.environ, BENCHLAB_FLUSH_S="0.02")
    poll = select.poll()
    running: dict[int, tuple[int, Any, Path, float]] = {}
    attempts: list[tuple[float, float]] = []
    calls: list[tuple[float, float]] = []
    asked = 0

    def launch() -> None:
        nonlocal asked
        t0 = time.time()
        trial = study.ask(space)
        calls.append((t0, time.time()))
        run_dir = folder / "runs" / str(asked)
        asked += 1
        run_dir.mkdir(parents=True)
        (run_dir / "config.json").write_text(json.dumps(trial.params))
        log = os.open(run_dir / "train.log", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        p = trial.params
        spawned = time.time()
        command = f"cd {shlex.quote(str(folder))} && python run.py {p['a']} {p['b']} {p['c']} {nap}"
        pid = os.posix_spawn("/bin/sh", ["/bin/sh", "-c", command], dict(env, BENCHLAB_RUN_DIR=str(run_dir)),
                             setsid=True,
                             file_actions=[(os.POSIX_SPAWN_DUP2, log, 1), (os.POSIX_SPAWN_DUP2, log, 2)])
        os.close(log)
        fd = os.pidfd_open(pid)
        poll.register(fd, select.POLLIN)
        running[fd] = (pid, trial, run_dir, spawned)

    t0 = time.perf_counter()
    launch()
    launch()
    while running:
        for fd, _ in poll.poll():
            pid, trial, run_dir, spawned = running.pop(fd)
            poll.unregister(fd)
            os.close(fd)
            os.waitpid(pid, 0)
            attempts.append((spawned, time.time()))
            value = json.loads((run_dir / "metrics.json").read_text())["value"]
            begin = time.time()
            study.tell(trial, value)
            calls.append((begin, time.time()))
            if asked < trials:
                launch()
    wall = time.perf_counter() - t0
    gaps, own = slot_gaps(attempts, calls)
    nan = float("nan")
    run_s = sum(e - s for s, e in attempts)
    return {"wall_s": wall, "best": study.best_value, "steps": STEPS * trials, "ran": nan, "run_s": run_s,
            "pruned": 0, "overhead_ms": nan, "driver_ms": nan, "start_ms": nan, "exit_ms": nan, "import_ms": nan,
            "idle_ms": 1000 * (2 * wall - run_s) / trials,
            "optuna_ms": 1000 * sum(e - b for b, e in calls) / trials, "gap_ms": _mean_ms(gaps),
            "own_ms": _mean_ms(own), "own": own}


def run_ray_tune(root: Path, trials: int, nap: float, seed: int) -> dict[str, float]:
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
                                        search_alg=OptunaSearch(seed=seed),
                                        scheduler=ASHAScheduler(max_t=STEPS, grace_period=10),
                                        reuse_actors=True),
            run_config=tune.RunConfig(storage_path=str(root / f"ray-{seed}"), verbose=0))
        t0 = time.perf_counter()
        grid = tuner.fit()
        wall = time.perf_counter() - t0
        best = grid.get_best_result().metrics["value"]
        steps = sum(int(r.metrics.get("step", -1)) + 1 for r in grid)
    finally:
        ray.shutdown()
    nan = float("nan")
    return {"wall_s": wall, "best": best, "steps": steps, "ran": nan, "run_s": nan, "pruned": nan, "overhead_ms": nan,
            "driver_ms": nan, "start_ms": nan, "exit_ms": nan, "import_ms": nan, "idle_ms": nan, "optuna_ms": nan,
            "gap_ms": nan, "own_ms": nan}


COLUMNS = [("wall s", "wall_s", 6, 1), ("best", "best", 7, 4), ("trial-steps", "steps", 11, 0), ("ran", "ran", 5, 0),
           ("run s", "run_s", 6, 1), ("pruned", "pruned", 6, 0), ("beyond ms", "overhead_ms", 9, 1),
           ("driver", "driver_ms", 6, 1), ("optuna", "optuna_ms", 6, 1), ("start", "start_ms", 5, 1),
           ("exit", "exit_ms", 5, 1), ("import", "import_ms", 6, 1), ("idle ms", "idle_ms", 7, 1),
           ("gap ms", "gap_ms", 6, 2), ("own", "own_ms", 5, 2)]
NAMES = {"median": "benchlab, median pruning", "asha": "benchlab, asha pruning", "asha-ray": "benchlab, asha as Ray's",
         "none": "benchlab, no pruning", "floor": "bare loop (no records)", "ray": "Ray Tune (OptunaSearch + ASHA)"}


def _row(name: str, r: dict[str, float]) -> str:
    return f"{name[:29]:29} " + " ".join(f"{r[key]:{width}.{digits}f}" for _, key, width, digits in COLUMNS)


def _percentiles(values: list[float]) -> str:
    if len(values) < 2:
        return "too few trials for percentiles"
    return (f"median {1000 * statistics.median(values):.2f} ms, 90th percentile "
            f"{1000 * statistics.quantiles(values, n=10)[-1]:.2f} ms")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--trials", type=int, default=64)
    parser.add_argument("--step-s", type=float, default=0.005)
    parser.add_argument("--seeds", default="0", help="sampler seeds, comma-separated: one run of all three each")
    parser.add_argument("--skip-ray", action="store_true")
    parser.add_argument("--skip-floor", action="store_true")
    parser.add_argument("--kinds", help="only these runs, comma-separated (e.g. none,floor); the summary "
                                        "lines that need others are left out")
    args = parser.parse_args()
    seeds = [int(s) for s in args.seeds.split(",")]
    os.environ["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")])
    load = os.getloadavg()
    print(f"{args.trials} trials, 2 at a time, {STEPS} steps of {args.step_s * 1000:g} ms, sampler seeds {seeds}; "
          f"load average {load[0]:.1f} {load[1]:.1f} {load[2]:.1f} on {os.cpu_count()} cores")
    kinds = ["median", "asha", "asha-ray", "none"] + ([] if args.skip_floor else ["floor"]) + \
        ([] if args.skip_ray else ["ray"])
    if args.kinds:
        kinds = [k for k in args.kinds.split(",") if k in NAMES]
    rows: dict[str, list[dict[str, float]]] = {k: [] for k in kinds}
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        for seed in seeds:
            for kind in kinds:
                if kind == "ray":
                    rows[kind].append(run_ray_tune(root, args.trials, args.step_s, seed))
                elif kind == "floor":
                    rows[kind].append(run_floor(root, args.trials, args.step_s, seed))
                else:
                    rows[kind].append(run_benchlab(root, kind, args.trials, args.step_s, seed))
    print(f"{'seed':>4} {'':29} " + " ".join(f"{title:>{width}}" for title, _, width, _ in COLUMNS))
    for i, seed in enumerate(seeds):
        for kind in kinds:
            print(f"{seed:4} " + _row(NAMES[kind], rows[kind][i]))
    if not {"median", "asha", "asha-ray", "none"} <= set(kinds):
        return
    med, none = rows["median"], rows["none"]
    saved = [1 - m["steps"] / n["steps"] for m, n in zip(med, none, strict=True)]
    saved_s = [1 - m["run_s"] / n["run_s"] for m, n in zip(med, none, strict=True)]

    def spread(values: list[float], fmt: str) -> str:
        return (f"{statistics.mean(values):{fmt}} (seeds: {', '.join(format(v, fmt) for v in values)})"
                if len(values) > 1 else format(values[0], fmt))

    saved_ran = [1 - m["ran"] / n["ran"] for m, n in zip(med, none, strict=True)]
    print(f"median pruning saved {spread(saved, '.0%')} of trial-steps (goal: at least 50%), "
          f"{spread(saved_ran, '.0%')} of the steps run, {spread(saved_s, '.0%')} of the runs' time")
    for kind, label in (("asha", "asha pruning (Optuna's defaults)"),
                        ("asha-ray", "asha pruning with Ray's rungs (min_steps 10, reduction_factor 4)")):
        saved_k = [1 - a["steps"] / n["steps"] for a, n in zip(rows[kind], none, strict=True)]
        ran_k = [1 - a["ran"] / n["ran"] for a, n in zip(rows[kind], none, strict=True)]
        print(f"{label} saved {spread(saved_k, '.0%')} of trial-steps ({spread(ran_k, '.0%')} of the steps run), "
              "best value "
              f"{spread([r['best'] for r in rows[kind]], '.4f')}")
    print(f"best value, median pruning: {spread([r['best'] for r in med], '.4f')}; "
          f"no pruning: {spread([r['best'] for r in none], '.4f')}")
    print(f"per completed trial beyond its run: {spread([r['overhead_ms'] for r in med], '.1f')} ms with pruning, "
          f"{spread([r['overhead_ms'] for r in none], '.1f')} ms without (goal: at most 2 ms); of which the "
          f"search process's own work: {spread([r['driver_ms'] for r in none], '.1f')} ms without pruning, and "
          f"of that Optuna's ask and tell (every trial's mean): {spread([r['optuna_ms'] for r in none], '.1f')} ms")
    print(f"a slot's gap between one run's exit and the next one's spawn, without pruning: "
          f"{spread([r['gap_ms'] for r in none], '.2f')} ms, of which benchlab's own (less Optuna's ask and tell "
          f"within it): {spread([r['own_ms'] for r in none], '.2f')} ms (goal: at most 2 ms); over every trial of "
          f"every seed, {_percentiles([x for r in none for x in r['own']])}; "
          f"with median pruning {spread([r['own_ms'] for r in med], '.2f')} ms")
    if "floor" in rows:
        floor = rows["floor"]
        print(f"the bare loop's gap: {spread([r['gap_ms'] for r in floor], '.2f')} ms, of which its own: "
              f"{spread([r['own_ms'] for r in floor], '.2f')} ms; benchlab's own less the bare loop's: "
              f"{spread([n['own_ms'] - f['own_ms'] for n, f in zip(none, floor, strict=True)], '.2f')} ms")
    if "ray" in rows:
        ratio = [r["wall_s"] / m["wall_s"] for r, m in zip(rows["ray"], med, strict=True)]
        print(f"wall time, Ray Tune / benchlab median: {spread(ratio, '.2f')}")
        same = [r["wall_s"] / m["wall_s"] for r, m in zip(rows["ray"], rows["asha-ray"], strict=True)]
        print(f"wall time, Ray Tune / benchlab asha with the same rungs: {spread(same, '.2f')}")
        print(f"best value, Ray Tune: {spread([r['best'] for r in rows['ray']], '.4f')}")


if __name__ == "__main__":
    main()
