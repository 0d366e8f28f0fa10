"""Report speed: `benchlab report` (tables, statistics, plots, HTML) on 10,000 runs x 100 points.

A synthetic results folder is written straight through :class:`benchlab.ledger.Store`
(no subprocesses): 10 tasks x 10 configs x 100 seeds = 10,000 completed runs,
each with two final scalars (``score``, goal max, and ``time``, goal min) and a
100-point learning curve of ``score``. Config ``c0`` is the baseline; config
``ci`` is ``0.01 * i`` better on average, so some comparisons are significant and
some are not. Every task has a target and a reference pair, so BENCHMARKS.md
statuses and performance profiles are exercised.

Then the real command runs in a subprocess, as a user would run it, and its
wall-clock time is printed against the goal (5 s). For scale, the time of the
part every report must pay anyway (starting Python and loading the long results
table with its 1,000,000 curve points through ``benchlab.results.load``) is
printed too. Both run ``--rounds`` times in turn (default 5): on a shared 2-core
machine one run of the same code moves by a third with its neighbours, so every
round is printed and the verdict is on the median, as ``bench/questions.py``'s.

    python bench/report.py [--runs-per-group 100] [--rounds 5] [--keep DIR]
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

import numpy as np

from benchlab.ledger import Store
from benchlab.names.benchmark_info import BenchmarkInfo
from benchlab.plan import Run

GOAL_S = 5.0
N_TASKS = 10
N_CONFIGS = 10
N_POINTS = 100


def build(
    folder: Path,
    seeds: int,
    tasks: int = N_TASKS,
    configs: int = N_CONFIGS,
    points: int = N_POINTS,
    rng_seed: int = 0,
) -> int:
    """Write a synthetic results folder; returns the number of runs."""
    rng = np.random.default_rng(rng_seed)
    task_names = [f"task{t:02d}" for t in range(tasks)]
    config_names = [f"c{c}" for c in range(configs)]
    with Store.create(folder) as store:
        store.set_benchmark(BenchmarkInfo(
            name="synthetic",
            description="Synthetic benchmark for timing reports.",
            primary="score",
            goal={"score": "max", "time": "min"},
            metrics=["score", "time"],
            baseline="c0",
            tasks=task_names,
            configs=config_names,
            targets={t: 0.9 + 0.02 * i for i, t in enumerate(task_names)},
            references={t: (0.0, 1.0) for t in task_names},
            seeds=list(range(seeds)),
            spec_path=None,
            overrides={},
            spec={
                "name": "synthetic",
                "command": "python train.py --lr {lr}",
                "configs": [
                    {"name": c, "params": {"lr": 10 ** -(i % 4 + 2)}}
                    for i, c in enumerate(config_names)
                ],
            },
        ))
        runs = [
            Run(
                run_id=f"{t}-{c}-{s}",
                benchmark="synthetic",
                task=t,
                config=c,
                seed=s,
                params={},
                command="python train.py",
            )
            for s in range(seeds)
            for t in task_names
            for c in config_names
        ]
        store.register(runs)
        steps = np.linspace(0, 1e6, points)
        shape = 1 - np.exp(-steps / 2e5)
        with store.transaction() as c:
            rows_a, rows_m, rows_s = [], [], []
            for i, r in enumerate(runs):
                ti, ci = task_names.index(r.task), config_names.index(r.config)
                final = 0.8 + 0.02 * ti + 0.01 * ci + rng.normal(0, 0.03)
                curve = final * shape + rng.normal(0, 0.01, points)
                rows_a.append((r.run_id, 1, "completed", 0, float(i), float(i) + 60.0, "synthetic"))
                rows_m += [
                    (r.run_id, "score", float(final)),
                    (r.run_id, "time", float(60 + 5 * ci + rng.normal(0, 2))),
                ]
                rows_s.append(
                    (
                        r.run_id,
                        "score",
                        steps.astype("<f8").tobytes(),
                        curve.astype("<f8").tobytes(),
                    )
                )
            # Bulk insert in one transaction: the same rows Store.finish_attempt writes, faster.
            c.executemany(
                "INSERT INTO attempts (run_id, number, status, exit_code, started, ended,"
                " host) VALUES (?, ?, ?, ?, ?, ?, ?)",
                rows_a,
            )
            c.execute("UPDATE runs SET status = 'completed'")
            c.executemany("INSERT INTO metrics VALUES (?, ?, ?)", rows_m)
            c.executemany("INSERT INTO series VALUES (?, ?, ?, ?)", rows_s)
    return len(runs)


def timed(cmd: list[str]) -> tuple[float, float, subprocess.CompletedProcess[str]]:
    """Wall-clock seconds, CPU seconds of the command and all its processes, and the result."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, "NO_COLOR": "1"})
    elapsed = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    if proc.returncode != 0:
        sys.exit(f"{' '.join(cmd)} exited {proc.returncode}:\n{proc.stdout}\n{proc.stderr}")
    return elapsed, cpu, proc


def phases(folder: Path) -> None:
    """CPU seconds of each step of a report, in this process (figures drawn here, one by one)."""
    start = time.process_time()
    import benchlab.stats  # noqa: F401  (scipy.stats: the heaviest import of a report)

    print(f"    {'import benchlab.stats (scipy.stats)':44s} {time.process_time() - start:5.2f} s CPU")
    from benchlab.report import analyze, gather
    from benchlab.report.html import write_html
    from benchlab.report.markdown import render_markdown
    from benchlab.report.plots import draw
    from benchlab.results import read

    out = folder / "phases"

    def step(label: str, fn):  # type: ignore[no-untyped-def]
        start = time.process_time()
        result = fn()
        print(f"    {label:44s} {time.process_time() - start:5.2f} s CPU")
        return result

    table = step("results.read (the results table, one ledger pass)", lambda: read(folder))
    data = step("gather", lambda: gather(table))
    data = step("the analysis (stats.results_analysis: every metric, once)", lambda: analyze(data))
    plots = step("5 figures (in workers in a real report)",
                 lambda: draw(out / "plots", data.info, data.analysis, workers=0)())
    data = replace(data, plots=[p.as_dict() for p in plots])
    text = step("BENCHMARK_REPORT.md", lambda: render_markdown(data))
    step("report.html", lambda: write_html(text, out, "report"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs-per-group", type=int, default=100,
                        help="seeds per (task, config); 100 gives 10,000 runs")
    parser.add_argument("--rounds", type=int, default=5,
                        help="times the floor and the report are run, in turn; the verdict is on the median")
    parser.add_argument("--keep", type=Path, default=None, help="build the folder here and keep it")
    parser.add_argument("--phases", action="store_true",
                        help="also print the CPU time of each step, measured in this process")
    args = parser.parse_args()
    from bytecode_first import compile_benchlab

    compile_benchlab()
    with tempfile.TemporaryDirectory() as tmp:
        folder = args.keep or Path(tmp) / "results"
        t0 = time.perf_counter()
        n = build(folder, args.runs_per_group)
        print(f"built {n} runs x {N_POINTS} points ({N_TASKS} tasks x {N_CONFIGS} configs x "
              f"{args.runs_per_group} seeds) in {time.perf_counter() - t0:.1f} s")
        load_cmd = "import sys, benchlab.results as r; r.load(sys.argv[1])"
        out = folder / "report"
        floors: list[float] = []
        tooks: list[float] = []
        for round_ in range(1, args.rounds + 1):
            floor, floor_cpu, _ = timed([sys.executable, "-c", load_cmd, str(folder)])
            print(f"  round {round_}: python + results.load(series=True) (the floor)  {floor:6.2f} s wall, "
                  f"{floor_cpu:5.2f} s CPU")
            took, cpu, _ = timed([sys.executable, "-m", "benchlab", "report", str(folder),
                                  "--out", str(out)])
            plots = sorted((out / "plots").glob("*.png"))
            size = (out / "report.html").stat().st_size / 1e6
            print(f"  round {round_}: benchlab report (md, csv, {len(plots)} plots, html) {took:6.2f} s wall, "
                  f"{cpu:5.2f} s CPU in all its processes (report.html {size:.1f} MB)")
            floors.append(floor)
            tooks.append(took)
        print(f"  load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
        if args.phases:
            print("  CPU time of each step:")
            phases(folder)
        took = statistics.median(tooks)
        within = sum(t <= GOAL_S for t in tooks)
        print(f"  median of {len(tooks)} rounds: report {took:.2f} s wall (floor {statistics.median(floors):.2f} s);"
              f" {within} of {len(tooks)} rounds within {GOAL_S:.0f} s")
        verdict = "met" if took <= GOAL_S else "NOT met"
        print(f"  goal: benchlab report <= {GOAL_S:.0f} s wall (median) -> {verdict}")


if __name__ == "__main__":
    main()
