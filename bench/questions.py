"""Question-level analysis of a checkpoint sweep: benchlab against plain pandas + scipy, same work.

20 checkpoints x 10 tasks x 5,000 questions x 4 samples (4 million sample rows) in a samples
CSV and the same table in Parquet. Both sides read the file and compute, for every (task,
checkpoint), the mean over questions, its standard error and t interval, and for every (task,
checkpoint) against checkpoint 0 the paired difference over question means with its standard
error, t interval and p-value, Pearson's r, and Holm's correction across all comparisons. The
anchor is what one writes with pandas (``read_csv`` or ``read_parquet``, ``groupby``, ``merge``)
and scipy (``ttest_rel``, ``sem``, ``pearsonr``).

The anchor's read is the plain call, ``pandas.read_csv(path)``: the fastest a user would write.
Its default C engine reads a large local file in parallel threads (pandas 3.1) and keeps text as
Arrow strings; ``engine="pyarrow"`` was measured slower on this table (2.2-2.6 s CPU against
0.7-1.1 s).

Each side runs in a child process of its own; prints each side's wall time (reading, analysis,
total) and peak memory (the child's peak resident set), the ratio, and the largest difference
between the two sides' numbers.

    python bench/questions.py [--checkpoints 20] [--tasks 10] [--questions 5000] [--samples 4] [--rounds 1]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np


def write_table(path: Path, checkpoints: int, tasks: int, questions: int, samples: int) -> None:
    """A samples CSV and Parquet file (``path`` with ``.parquet``): question difficulty per task, a
    skill per checkpoint, binary answers."""
    import pandas as pd

    rng = np.random.default_rng(0)
    frames = []
    for t in range(tasks):
        difficulty = rng.normal(0, 1.5, size=questions)
        for c in range(checkpoints):
            skill = 0.02 * c
            p = 1 / (1 + np.exp(-(difficulty + skill)))
            answers = (rng.random((questions, samples)) < p[:, None]).astype(np.int8)
            frames.append(pd.DataFrame({
                "task": f"task{t}", "config": f"ckpt{c:02d}", "seed": 0,
                "repeat": np.tile(np.arange(samples), questions),
                "question": np.repeat(np.arange(questions), samples),
                "metric": "acc", "value": answers.ravel()}))
    table = pd.concat(frames, ignore_index=True)
    table.to_csv(path, index=False)
    table.to_parquet(path.with_suffix(".parquet"), index=False)


def run_benchlab(path: Path) -> dict[str, object]:
    # Imports before the clock, on both sides: what is timed is the work. pandas too: the anchor
    # imports it before its clock, and benchlab's reader imports it on first use (0.3-0.5 s).
    import pandas  # noqa: F401
    import pyarrow.csv  # noqa: F401
    import pyarrow.parquet  # noqa: F401

    import benchlab.ledger  # noqa: F401
    from benchlab.collect.samples import check_pairing, read_samples
    from benchlab.stats.question_table import analyze_questions

    c0, t0 = time.process_time(), time.perf_counter()
    table, _ = read_samples(path)
    table, _ = check_pairing(table)
    t1, c1 = time.perf_counter(), time.process_time()
    result = analyze_questions(table, baseline="ckpt00")
    t2, c2 = time.perf_counter(), time.process_time()
    rows = {f"{c.task}/{c.candidate}": [c.result.mean_diff, c.result.se, c.result.ci_low, c.result.pvalue,
                                         c.p_holm, c.result.correlation] for c in result.comparisons}
    means = {f"{r.task}/{r.config}": [r.result.mean, r.result.se, r.result.ci_low] for r in result.summary}
    return {"read": t1 - t0, "read_cpu": c1 - c0, "analyse": t2 - t1, "cpu": c2 - c0, "rows": rows, "means": means}


def run_anchor(path: Path) -> dict[str, object]:
    import pandas as pd
    import pyarrow.parquet  # noqa: F401
    from scipy import stats

    c0, t0 = time.process_time(), time.perf_counter()
    table = pd.read_csv(path) if path.suffix == ".csv" else pd.read_parquet(path)
    t1, c1 = time.perf_counter(), time.process_time()
    q = table.groupby(["task", "config", "question"], sort=True)["value"].mean().rename("score").reset_index()
    means = {}
    for (task, config), g in q.groupby(["task", "config"], sort=True):
        x = g["score"].to_numpy()
        se = stats.sem(x)
        low = x.mean() - stats.t.ppf(0.975, len(x) - 1) * se
        means[f"{task}/{config}"] = [float(x.mean()), float(se), float(low)]
    rows = {}
    keys, pvalues = [], []
    for task, g in q.groupby("task", sort=True):
        base = g[g["config"] == "ckpt00"][["question", "score"]]
        for config, h in g.groupby("config", sort=True):
            if config == "ckpt00":
                continue
            m = base.merge(h[["question", "score"]], on="question", suffixes=("_b", "_c"))
            d = m["score_c"].to_numpy() - m["score_b"].to_numpy()
            test = stats.ttest_rel(m["score_c"], m["score_b"])
            ci = test.confidence_interval(0.95)
            r = stats.pearsonr(m["score_b"], m["score_c"])[0]
            key = f"{task}/{config}"
            rows[key] = [float(d.mean()), float(stats.sem(d)), float(ci.low), float(test.pvalue), None, float(r)]
            keys.append(key)
            pvalues.append(float(test.pvalue))
    p = np.array(pvalues)
    order = np.argsort(p, kind="stable")
    adjusted = np.minimum(1.0, np.maximum.accumulate((len(p) - np.arange(len(p))) * p[order]))
    for rank, k in enumerate(order):
        rows[keys[k]][4] = float(adjusted[rank])
    t2, c2 = time.perf_counter(), time.process_time()
    return {"read": t1 - t0, "read_cpu": c1 - c0, "analyse": t2 - t1, "cpu": c2 - c0, "rows": rows, "means": means}


def child(side: str, path: Path) -> None:
    out = run_benchlab(path) if side == "benchlab" else run_anchor(path)
    out["peak_mib"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    sys.stdout.write(json.dumps(out))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--checkpoints", type=int, default=20)
    parser.add_argument("--tasks", type=int, default=10)
    parser.add_argument("--questions", type=int, default=5000)
    parser.add_argument("--samples", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child[0], Path(args.child[1]))
        return
    rows = args.checkpoints * args.tasks * args.questions * args.samples
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "samples.csv"
        write_table(path, args.checkpoints, args.tasks, args.questions, args.samples)
        print(f"{rows:,} sample rows ({args.checkpoints} checkpoints x {args.tasks} tasks x {args.questions} "
              f"questions x {args.samples} samples), CSV {path.stat().st_size / 2**20:.0f} MiB, Parquet "
              f"{path.with_suffix('.parquet').stat().st_size / 2**20:.0f} MiB")
        seen: dict[str, list[dict[str, dict]]] = {"csv": [], "parquet": []}
        for round_ in range(args.rounds):
            for source in (path, path.with_suffix(".parquet")):
                results = {}
                load = os.getloadavg()[0]
                for side in ("benchlab", "pandas+scipy"):
                    proc = subprocess.run([sys.executable, __file__, "--child", side, str(source)],
                                          capture_output=True, text=True, check=True)
                    results[side] = json.loads(proc.stdout)
                print(f"round {round_ + 1}, {source.suffix[1:]} (load {load:.1f}):")
                report(results)
                seen[source.suffix[1:]].append(results)
        if args.rounds > 1:
            summary(seen)


def report(results: dict[str, dict]) -> None:
    for side, r in results.items():
        print(f"  {side:>13}: read {r['read']:.2f} s, analysis {r['analyse']:.2f} s, total "
              f"{r['read'] + r['analyse']:.2f} s (CPU {r['cpu']:.2f} s), peak {r['peak_mib']:.0f} MiB")
    b, a = results["benchlab"], results["pandas+scipy"]
    ratio = (a["read"] + a["analyse"]) / (b["read"] + b["analyse"])
    print(f"  ratio (pandas+scipy / benchlab): {ratio:.2f}x total wall, {a['cpu'] / b['cpu']:.2f}x CPU, "
          f"{a['analyse'] / b['analyse']:.2f}x analysis")
    print(f"  benchlab's read / the bare read: {b['read'] / a['read']:.2f}x wall, "
          f"{b['read_cpu'] / a['read_cpu']:.2f}x CPU (goal: within 1.5x)")
    worst = 0.0
    for part in ("rows", "means"):
        for key, values in a[part].items():
            for x, y in zip(values, b[part][key], strict=True):
                worst = max(worst, abs(x - y))
    print(f"  largest difference between the two sides' numbers: {worst:.2e}")


def summary(seen: dict[str, list[dict[str, dict]]]) -> None:
    """Medians over the rounds: this machine's system time for fresh memory swings from one
    process to the next (a 4-million-row read has taken 0.2 s and 0.8 s of it), so one round's
    ratio says little."""
    import statistics

    for fmt, rounds in seen.items():
        def med(side: str, key: str, rounds: list[dict[str, dict]] = rounds) -> float:
            return statistics.median(r[side][key] for r in rounds)

        total = {side: statistics.median(r[side]["read"] + r[side]["analyse"] for r in rounds)
                 for side in ("benchlab", "pandas+scipy")}
        print(f"{fmt}, medians of {len(rounds)} rounds: benchlab {total['benchlab']:.2f} s, pandas+scipy "
              f"{total['pandas+scipy']:.2f} s ({total['pandas+scipy'] / total['benchlab']:.2f}x ahead); read "
              f"{med('benchlab', 'read'):.2f} s against the bare read's {med('pandas+scipy', 'read'):.2f} s "
              f"({med('benchlab', 'read') / med('pandas+scipy', 'read'):.2f}x wall, "
              f"{med('benchlab', 'read_cpu') / med('pandas+scipy', 'read_cpu'):.2f}x CPU; goal within 1.5x)")


if __name__ == "__main__":
    main()
