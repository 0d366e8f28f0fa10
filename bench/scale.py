"""Scale: how benchlab's start-up, dispatch and read commands grow with the size of a sweep.

    python bench/scale.py [--sizes 1000,10000,100000] [--jobs 2] [--window 15] [--report-runs 10000]

For each size N, a spec of N trivial runs (10 tasks x 10 configs x N/100 seeds of
`true`, the metric read back from config.yaml) is measured in a fresh results folder:

- ``validate``, ``run --dry-run`` and (after the sweep) ``status``: wall seconds and
  peak memory of the whole command;
- ``run -j J``: seconds from the command's start to the first run's launch (read
  from the ledger), in wall time and in the CPU time benchlab spent until then (its
  CPU clock sampled every 2 ms from /proc and read at the launch's time), then runs
  completed per second over the second half of a ``--window``-second sweep (steady
  state), then a stop (SIGINT), a resume and its first launch; the sweep's peak memory;
- the anchor: the same dispatch on a 500-run spec, run to its end just before each
  size (the machine's load moves), whose ratio to N's steady state says whether
  dispatch per run stays flat as the queue grows. The sweep records its plan in the
  ledger while its first runs go (``plan recorded``: seconds after the first launch);
  the steady state is taken after that, over at least half the window.

Then ``report`` on a completed ``--report-runs`` sweep (wall and peak memory).

Peak memory is the command's maximum resident set (``ru_maxrss`` of its process,
read by a small wrapper that runs nothing else). On a machine shared with other
work, wall times swing (the load average is printed at the start and the end); run it
twice and keep the lower figures.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import threading
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
    # The CPU time benchlab spent until its first launch (on a loaded machine, wall time says
    # little): its CPU clock is sampled every few milliseconds, and read at the first attempt's
    # start time (from the ledger) between the two samples around it.
    samples: list[tuple[float, float]] = []
    sampling = threading.Event()
    sampler = threading.Thread(target=_sample_cpu, args=(wrapper, samples, sampling), daemon=True)
    sampler.start()
    # The window counts from the first launch, however long the start took.
    while wrapper.poll() is None and _last_attempt(results) <= before:
        time.sleep(0.02)
    time.sleep(0.05)
    sampling.set()
    sampler.join()
    # The sweep records its plan while its first runs go: the steady state begins after that.
    launched = time.time()
    recorded = None
    while wrapper.poll() is None and (window is not None or recorded is None):
        if recorded is None and not _recording(results):
            recorded = time.time()
        if window is not None and time.time() >= max(launched + window, (recorded or float("inf")) + window / 2):
            for child in _children(wrapper.pid):
                os.kill(child, signal.SIGINT)
            break
        time.sleep(0.1)
    out, _ = wrapper.communicate()
    stats = json.loads(out.strip().splitlines()[-1])
    ended = time.time()
    with ledger(results) as con:
        rows = con.execute("SELECT started, ended, status FROM attempts WHERE attempt_id > ? ORDER BY started",
                           (before,)).fetchall()
    first = rows[0][0] - t0 if rows else float("nan")
    start_cpu = _at(samples, rows[0][0]) if rows else float("nan")
    last = max((r[1] or r[0] for r in rows), default=ended)
    half = rows[0][0] + (last - rows[0][0]) / 2 if rows else ended
    half = max(half, recorded or ended) if rows else ended
    late = [r for r in rows if r[2] == "completed" and r[1] is not None and r[1] >= half]
    rate = len(late) / max(1e-9, last - half)
    return {"first_launch_s": first, "first_launch_cpu": start_cpu, "runs_per_s": rate,
            "plan_recorded_s": (recorded or ended) - rows[0][0] if rows else float("nan"),
            "rss_mib": stats["rss_mib"], "cpu": stats["cpu"],
            "completed": sum(1 for r in rows if r[2] == "completed")}


def _sample_cpu(wrapper: subprocess.Popen[str], samples: list[tuple[float, float]], done: threading.Event) -> None:
    """(wall time, CPU seconds of the benchlab process) every 2 ms until ``done``."""
    pid = None
    while not done.is_set() and wrapper.poll() is None:
        try:
            pid = pid or next(iter(_children(wrapper.pid)), None)
            if pid is not None:
                samples.append((time.time(), _cpu(pid)))
        except OSError:
            pass
        time.sleep(0.002)


def _at(samples: list[tuple[float, float]], when: float) -> float:
    """The CPU seconds at wall time ``when``, between the samples around it (NaN: none before it)."""
    before = [s for s in samples if s[0] <= when]
    after = [s for s in samples if s[0] > when]
    if not before:
        return float("nan")
    (t1, c1), (t2, c2) = before[-1], (after[0] if after else before[-1])
    return c1 if t2 <= t1 else c1 + (c2 - c1) * (when - t1) / (t2 - t1)


def _recording(results: Path) -> bool:
    """Whether the sweep is still recording its plan (the ledger's ``plan_recording`` key)."""
    try:
        with ledger(results) as con:
            return con.execute("SELECT 1 FROM meta WHERE key = 'plan_recording'").fetchone() is not None
    except sqlite3.Error:
        return True


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
    print(f"# benchlab scale: -j {args.jobs}, {os.cpu_count()} cores, folder {root}, load average "
          f"{_load()} at the start")
    header = ("| runs | validate (wall / CPU / peak) | run --dry-run | first launch (wall / CPU) "
              "| resume: first launch | plan recorded | dispatch (runs/s) | 500 runs just before | ratio "
              "| status | sweep peak memory |")
    rows = [header, "|---" * (header.count("|") - 1) + "|"]
    for n in (int(s) for s in args.sizes.split(",")):
        spec = write_spec(root, n)
        results = root / f"r{n}"
        validate = measured(benchlab("validate", str(spec), "-r", str(results)), root)
        dry = measured(benchlab("run", str(spec), "-r", str(results), "--dry-run"), root)
        # The anchor, just before: the machine's load changes from one minute to the next.
        shutil.rmtree(root / "r500", ignore_errors=True)
        anchor = sweep(write_spec(root, 500), root / "r500", args.jobs, None)
        first = sweep(spec, results, args.jobs, args.window)
        resume = sweep(spec, results, args.jobs, 2.0)
        status = measured(benchlab("status", str(results)), root)
        rows.append(
            f"| {n:,} | {cmd(validate)} | {cmd(dry)} | {launch(first)} | {launch(resume)} "
            f"| {first['plan_recorded_s']:.1f} s | {first['runs_per_s']:.0f} | {anchor['runs_per_s']:.0f} "
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
    print(f"# load average {_load()} at the end")


def _load() -> str:
    """The 1, 5 and 15-minute load averages."""
    return " ".join(f"{x:.1f}" for x in os.getloadavg())


if __name__ == "__main__":
    main()
