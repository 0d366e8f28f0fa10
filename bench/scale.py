"""Scale: how benchlab's start-up, dispatch and read commands grow with the size of a sweep.

    python bench/scale.py [--sizes 1000,10000,100000] [--jobs 2] [--window 15] [--report-runs 10000]

For each size N, a spec of N trivial runs (10 tasks x 10 configs x N/100 seeds of
`true`, the metric read back from config.yaml) is measured in a fresh results folder:

- ``validate``, ``run --dry-run`` and (after the sweep) ``status``: wall seconds and
  peak memory of the whole command;
- ``run -j J``: seconds from the command's start to the first run's launch (read
  from the ledger), then runs completed per second over the second half of a
  ``--window``-second sweep (steady state), then a stop (SIGINT), a resume and its
  first launch; the sweep's peak memory;
- the anchor: the same steady-state dispatch on a 500-run spec, whose ratio to
  N's says whether dispatch per run stays flat as the queue grows.

Then ``report`` on a completed ``--report-runs`` sweep (wall and peak memory).

Peak memory is the command's maximum resident set (``ru_maxrss`` of its process,
read by a small wrapper that runs nothing else). On a machine shared with other
work, wall times swing; run it twice and keep the lower figures.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

SPEC = """\
name: scale
tasks: [{tasks}]
configs: [{configs}]
seeds: {seeds}
command: "true"
metrics:
  primary: {{name: seed, from: {{regex: 'seed: (\\d+)', file: config.yaml}}}}
retries: 0
"""

# Runs a command and prints its wall seconds and peak resident memory (MiB) as JSON on stderr's last line.
WRAP = """
import json, resource, subprocess, sys, time
t0 = time.perf_counter()
proc = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
wall = time.perf_counter() - t0
use = resource.getrusage(resource.RUSAGE_CHILDREN)
print(json.dumps({"wall": wall, "cpu": use.ru_utime + use.ru_stime, "rss_mib": use.ru_maxrss / 1024,
                  "rc": proc.returncode}))
"""


def write_spec(folder: Path, runs: int) -> Path:
    tasks, configs = (10, 10) if runs >= 100 else (1, 1)
    seeds = max(1, runs // (tasks * configs))
    spec = folder / f"scale{runs}.yaml"
    spec.write_text(SPEC.format(tasks=", ".join(f"{{name: t{i}}}" for i in range(tasks)),
                                configs=", ".join(f"{{name: c{i}}}" for i in range(configs)), seeds=seeds))
    return spec


def benchlab(*args: str) -> list[str]:
    return [sys.executable, "-m", "benchlab", *args]


def measured(command: list[str], cwd: Path) -> dict[str, float]:
    out = subprocess.run([sys.executable, "-c", WRAP, *command], cwd=cwd, capture_output=True, text=True,
                         check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def ledger(results: Path) -> sqlite3.Connection:
    return sqlite3.connect(f"file:{results / 'benchlab.db'}?mode=ro", uri=True, timeout=30)


def sweep(spec: Path, results: Path, jobs: int, window: float | None) -> dict[str, float]:
    """One ``benchlab run``, stopped after ``window`` seconds (None: to the end).

    Returns the seconds to its first launch, the runs per second it completed in the
    second half of its time, and its peak memory (MiB)."""
    before = _last_attempt(results) if (results / "benchlab.db").exists() else 0
    wrapper = subprocess.Popen([sys.executable, "-c", WRAP, *benchlab(
        "run", str(spec), "-r", str(results), "-j", str(jobs), "--no-report")],
        cwd=spec.parent, stdout=subprocess.PIPE, text=True)
    t0 = time.time()
    start_cpu = float("nan")
    # The window counts from the first launch, however long the start took; the CPU time benchlab
    # spent until then is read as it happens (on a loaded machine, wall time says little).
    while wrapper.poll() is None and _last_attempt(results) <= before:
        time.sleep(0.02)
    if wrapper.poll() is None:
        start_cpu = sum(_cpu(child) for child in _children(wrapper.pid))
    if window is not None:
        time.sleep(window)
        for child in _children(wrapper.pid) if wrapper.poll() is None else []:
            os.kill(child, signal.SIGINT)
    out, _ = wrapper.communicate()
    stats = json.loads(out.strip().splitlines()[-1])
    ended = time.time()
    with ledger(results) as con:
        rows = con.execute("SELECT started, ended, status FROM attempts WHERE attempt_id > ? ORDER BY started",
                           (before,)).fetchall()
    first = rows[0][0] - t0 if rows else float("nan")
    last = max((r[1] or r[0] for r in rows), default=ended)
    half = rows[0][0] + (last - rows[0][0]) / 2 if rows else ended
    late = [r for r in rows if r[2] == "completed" and r[1] is not None and r[1] >= half]
    rate = len(late) / max(1e-9, last - half)
    return {"first_launch_s": first, "first_launch_cpu": start_cpu, "runs_per_s": rate,
            "rss_mib": stats["rss_mib"], "cpu": stats["cpu"],
            "completed": sum(1 for r in rows if r[2] == "completed")}


def _last_attempt(results: Path) -> int:
    try:
        with ledger(results) as con:
            return con.execute("SELECT COALESCE(MAX(attempt_id), 0) FROM attempts").fetchone()[0]
    except sqlite3.Error:
        return 0


def launch(m: dict[str, float]) -> str:
    """Seconds to the first launch: wall / CPU."""
    if m["first_launch_s"] != m["first_launch_s"]:  # NaN: the sweep before had finished every run
        return "— (nothing left)"
    return f"{m['first_launch_s']:.2f} s / {m['first_launch_cpu']:.2f} s"


def cmd(m: dict[str, float]) -> str:
    """A command's figures: wall seconds / CPU seconds / peak memory."""
    return f"{m['wall']:.2f} s / {m['cpu']:.2f} s / {m['rss_mib']:.0f} MiB"


def _cpu(pid: int) -> float:
    """User + system CPU seconds of ``pid`` so far."""
    with open(f"/proc/{pid}/stat") as fh:
        fields = fh.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _children(pid: int) -> list[int]:
    with open(f"/proc/{pid}/task/{pid}/children") as fh:
        return [int(p) for p in fh.read().split()]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", default="1000,10000,100000")
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--window", type=float, default=15.0)
    parser.add_argument("--report-runs", type=int, default=10000)
    parser.add_argument("--dir", default=tempfile.gettempdir())
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="benchlab-scale-", dir=args.dir))
    print(f"# benchlab scale: -j {args.jobs}, {os.cpu_count()} cores, folder {root}")
    anchor = sweep(write_spec(root, 500), root / "r500", args.jobs, None)
    print(f"anchor: 500 runs, steady state {anchor['runs_per_s']:.0f} runs/s, first launch {launch(anchor)}")
    header = ("| runs | validate (wall / CPU / peak) | run --dry-run | first launch (wall / CPU) "
              "| resume: first launch | dispatch (runs/s) | vs 500 runs | status | sweep peak memory |")
    rows = [header, "|---" * (header.count("|") - 1) + "|"]
    for n in (int(s) for s in args.sizes.split(",")):
        spec = write_spec(root, n)
        results = root / f"r{n}"
        validate = measured(benchlab("validate", str(spec), "-r", str(results)), root)
        dry = measured(benchlab("run", str(spec), "-r", str(results), "--dry-run"), root)
        first = sweep(spec, results, args.jobs, args.window)
        resume = sweep(spec, results, args.jobs, 2.0)
        status = measured(benchlab("status", str(results)), root)
        rows.append(
            f"| {n:,} | {cmd(validate)} | {cmd(dry)} | {launch(first)} | {launch(resume)} | {first['runs_per_s']:.0f} "
            f"| {first['runs_per_s'] / anchor['runs_per_s']:.2f} | {cmd(status)} "
            f"| {max(first['rss_mib'], resume['rss_mib']):.0f} MiB |")
        print(rows[-1], flush=True)
    if args.report_runs:
        spec = write_spec(root, args.report_runs)
        results = root / f"report{args.report_runs}"
        done = sweep(spec, results, max(args.jobs, 2), None)
        report = measured(benchlab("report", str(results)), root)
        rows.append(f"\nreport on {done['completed']:,} completed runs: {cmd(report)}")
    print("\n".join(rows))


if __name__ == "__main__":
    main()
