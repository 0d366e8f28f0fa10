"""Per-run overhead of the launcher backend on Docker, against a hand-written submit/poll loop.

Both run N trivial containers (the run writes its metric and exits), at most J at once, on the
same dockerd and image, with the Docker recipe of docs/launchers.md: ``docker run -d``, then
``docker inspect`` every ``--poll`` seconds until the container exited, ``docker logs`` into the
run's log, ``docker rm``. The loop is what a user writes without benchlab: a thread per slot,
no ledger, no spec, no retries. benchlab runs the whole sweep (spec, plan, ledger, run
directories, metrics collected, provenance) as ``benchlab run`` from its own process start, with
the recipe's ``poll_s`` and ``max_poll_s`` both set to ``--poll``, so that the two poll alike.
Each side's wall time over N is its time per run; the ratio is printed.

Without ``DOCKER_HOST`` in the environment a dockerd of its own is started for the measurement
(``tests/localdocker.py``: root, Debian's docker.io and busybox-static) and stopped at the end.

    python bench/launcher_overhead.py --runs 20,40 -j 4 --rounds 2
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from launcher_recipes import recipe  # noqa: E402
from localdocker import LocalDocker  # noqa: E402

# Braces are placeholders in a benchlab command: the JSON's are written as octal escapes.
JOB = """printf '\\173"score": 1\\175' > "$BENCHLAB_RUN_DIR/metrics.json"; echo done"""


def docker(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["docker", *args], capture_output=True, text=True, timeout=120)


def hand_loop(image: str, work: Path, runs: int, jobs: int, poll: float) -> float:
    """Seconds for ``runs`` containers, ``jobs`` at a time, submitted and polled by hand."""
    todo = list(range(runs))
    lock = threading.Lock()

    def slot() -> None:
        while True:
            with lock:
                if not todo:
                    return
                i = todo.pop()
            run_dir = work / f"run{i}"
            run_dir.mkdir(parents=True)
            cid = docker("run", "-d", "--name", f"hand-{os.getpid()}-{i}", "--network", "none",
                         "-e", f"BENCHLAB_RUN_DIR={run_dir}", "-v", f"{run_dir}:{run_dir}", image,
                         "sh", "-c", JOB).stdout.strip()
            while True:
                time.sleep(poll)
                state = docker("inspect", "-f", "{{.State.Status}} {{.State.ExitCode}}", cid).stdout
                if state.startswith(("exited", "dead")):
                    break
            (run_dir / "train.log").write_text(docker("logs", cid).stdout)
            docker("rm", cid)

    t0 = time.perf_counter()
    threads = [threading.Thread(target=slot) for _ in range(jobs)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return time.perf_counter() - t0


def benchlab_sweep(image: str, work: Path, runs: int, jobs: int, poll: float) -> float:
    """Seconds for ``benchlab run`` of ``runs`` runs on the launcher backend, from its process start."""
    section = {**recipe("docker-recipe")["launcher"], "poll_s": poll, "max_poll_s": poll}
    spec = {"name": "overhead", "tasks": [{"name": "t"}], "configs": [{"name": "a"}], "seeds": runs,
            "command": JOB, "metrics": {"primary": "score"}, "variables": {"image": image},
            "backend": "launcher", "launcher": section}
    work.mkdir(parents=True)
    path = work / "bench.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False, width=1000))
    t0 = time.perf_counter()
    p = subprocess.run([sys.executable, "-m", "benchlab", "run", str(path), "-j", str(jobs), "--results",
                        str(work / "out"), "--no-report"], cwd=work, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    if p.returncode != 0:
        raise SystemExit(f"benchlab run failed:\n{p.stdout}\n{p.stderr}")
    return wall


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", default="20,40", help="run counts, comma-separated: with two, the marginal time "
                                                    "per run (start-up left out) is printed too")
    ap.add_argument("-j", "--jobs", type=int, default=4)
    ap.add_argument("--poll", type=float, default=0.5, help="seconds between status commands, both sides")
    ap.add_argument("--rounds", type=int, default=2, help="alternating rounds of both sides, per run count")
    args = ap.parse_args()
    counts = [int(n) for n in args.runs.split(",")]
    daemon = None
    if not os.environ.get("DOCKER_HOST"):
        daemon = LocalDocker(Path(os.environ.get("BENCHLAB_DOCKER_ROOT") or tempfile.mkdtemp(prefix="bl-docker-")))
        daemon.start()
        os.environ.update(daemon.env)
        image = daemon.image
    else:
        from localdocker import image_tag

        image = image_tag()
    medians: dict[int, tuple[float, float]] = {}
    try:
        with tempfile.TemporaryDirectory() as tmp:
            for n in counts:
                hand, ours = [], []
                for r in range(args.rounds):
                    hand.append(hand_loop(image, Path(tmp) / f"hand{n}-{r}", n, args.jobs, args.poll))
                    ours.append(benchlab_sweep(image, Path(tmp) / f"bl{n}-{r}", n, args.jobs, args.poll))
                    print(f"{n} runs, round {r + 1}: hand loop {hand[-1]:.2f}s, benchlab {ours[-1]:.2f}s", flush=True)
                medians[n] = (statistics.median(hand), statistics.median(ours))
    finally:
        if daemon is not None:
            daemon.stop()
    print(f"-j {args.jobs}, poll {args.poll:g}s, {args.rounds} rounds each (medians):")
    for n, (h, b) in medians.items():
        print(f"  {n} runs: hand-written loop {h:.2f}s ({1000 * h / n:.0f} ms/run), benchlab {b:.2f}s "
              f"({1000 * b / n:.0f} ms/run): ratio {b / h:.3f} ({100 * (b / h - 1):+.1f}%, start-up included)")
    if len(counts) == 2:
        (n1, (h1, b1)), (n2, (h2, b2)) = medians.items()
        dh, db = (h2 - h1) / (n2 - n1), (b2 - b1) / (n2 - n1)
        print(f"  marginal time per run ({n1} -> {n2} runs, start-up left out): hand-written loop "
              f"{1000 * dh:.0f} ms, benchlab {1000 * db:.0f} ms: ratio {db / dh:.3f} ({100 * (db / dh - 1):+.1f}%; "
              "goal: within +10%)")


if __name__ == "__main__":
    main()
