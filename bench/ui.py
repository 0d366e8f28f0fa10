"""`benchlab ui` at scale, and what it costs a sweep it watches.

1. Latency and memory. A synthetic results folder of 10,000 completed runs with 100 logged
   points each (``bench/report.py``'s ``build``: 10 tasks x 10 configs x 100 seeds) is served by
   the real command in a subprocess. Each page is asked for once, in the order a user opens
   them, right after the server listens: its first response time is printed against the goal
   (1 s), and the peak resident memory of the server and the processes it starts (sampled
   every 20 ms) against 500 MB. Two cases, each with a server of its own, printed apart: first
   the folder as a sweep run with ``--no-report`` leaves it, never reported (the report's tables
   are computed at the dashboard's start, by the process ``benchlab ui`` starts for them beside
   its server), then the same folder after the real ``benchlab report`` (the dashboard shows the
   tables the report kept in ``report-tables.json``, which are current since nothing changed in
   between).

2. Dispatch overhead. ``bench/dispatch.py``'s sweep of trivial runs (`true`, ``-j 2``) is timed
   without the dashboard, then with it serving the sweep's folder while headless Chromium keeps
   the benchmark page and the curves page open (each polls every second and fetches again on
   every change), alternately; the medians of ``--repeat`` are compared. The goal: the sweep's
   wall time with the dashboard open within 10% of the time without it.

   The browser stands for a user's tab and does only what one does: the pages run ``ui.js``
   on their own (nothing drives them or listens to their requests from here; the requests are
   counted in the pages), and every process of the browser is kept at nice 19, the server's
   priority (Chromium raises its renderers and GPU process again, to nice 0 and below, when left
   alone). The dashboard is up and idle before the sweep starts, as a dashboard left open is:
   the server's start-up (its imports) is printed apart, in CPU seconds, since a sweep pays it at
   most once however long it is. The CPU seconds the server and the browser took during the sweep
   are printed with the wall times: on a shared machine they hold where wall times swing.

    python bench/ui.py [--runs-per-group 100] [--sweep-runs 2000] [--repeat 3] [--skip-scale] [--no-nice]

On a loaded machine wall times swing: the load average is printed with the figures.
"""

from __future__ import annotations

import argparse
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil

sys.path.insert(0, str(Path(__file__).parent))
from dispatch import SPEC  # noqa: E402

from report import build  # noqa: E402

LATENCY_GOAL_S = 1.0
MEMORY_GOAL_MB = 500.0
OVERHEAD_GOAL = 0.10


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Server:
    """`benchlab ui FOLDER` in a subprocess, its resident memory sampled while it lives."""

    def __init__(self, folder: Path, *, nice: bool = True) -> None:
        self.port = free_port()
        self.proc = subprocess.Popen([sys.executable, "-m", "benchlab", "ui", str(folder), "--port", str(self.port),
                                      "--nice" if nice else "--no-nice"],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.peak_rss = 0
        self._stop = threading.Event()
        self._sampler = threading.Thread(target=self._sample, daemon=True)
        self._sampler.start()
        deadline = time.monotonic() + 60
        while True:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.2).close()
                break
            except OSError:
                if time.monotonic() > deadline or self.proc.poll() is not None:
                    raise RuntimeError("benchlab ui did not start") from None
                time.sleep(0.02)
        self.url = f"http://127.0.0.1:{self.port}"

    def _sample(self) -> None:
        # The server and the processes it starts (the first tables' worker), together.
        p = psutil.Process(self.proc.pid)
        while not self._stop.is_set():
            try:
                total = p.memory_info().rss
                for child in p.children(recursive=True):
                    try:
                        total += child.memory_info().rss
                    except psutil.Error:
                        pass
            except psutil.Error:
                return
            self.peak_rss = max(self.peak_rss, total)
            time.sleep(0.02)

    def get(self, path: str) -> tuple[float, int]:
        t0 = time.perf_counter()
        with urllib.request.urlopen(self.url + path, timeout=120) as r:
            body = r.read()
        return time.perf_counter() - t0, len(body)

    def close(self) -> None:
        self._stop.set()
        self.proc.terminate()
        self.proc.wait(timeout=30)


PAGES = [
    ("benchmarks", "/"),
    ("a benchmark", "/b/synthetic"),
    ("a benchmark's report tables", "/b/synthetic/numbers"),
    ("curves page", "/b/synthetic/curves"),
    ("curves data (task00, score)", "/b/synthetic/curves.json?task=task00&metric=score"),
    ("a run", "/b/synthetic/runs/task00-c1-0"),
    ("a run's log", "/b/synthetic/runs/task00-c1-0/log"),
    ("change feed", "/api/changes"),
    ("a benchmark, live part", "/b/synthetic?fragment=1"),
]


def serve_pages(folder: Path, nice: bool, case: str) -> None:
    """Start `benchlab ui` on ``folder``, ask for each page right after it listens, and print each
    page's first response (and again), the slowest against the goal and the peak memory."""
    server = Server(folder, nice=nice)
    print(f"{case}\n  server: benchlab ui {'--nice (the default)' if nice else '--no-nice'}, "
          f"load average {os.getloadavg()[0]:.2f}")
    try:
        worst = 0.0
        print(f"  {'page':34}{'first response':>16}{'again':>10}{'bytes':>12}")
        for label, path in PAGES:
            first, size = server.get(path)
            again, _ = server.get(path)
            worst = max(worst, first)
            print(f"    {label:32}{first * 1000:13.0f} ms{again * 1000:7.0f} ms{size:12,}")
        time.sleep(0.1)
        peak = server.peak_rss / 1e6
    finally:
        server.close()
    print(f"  goal: every page's first response <= {LATENCY_GOAL_S:.0f} s -> "
          f"{'met' if worst <= LATENCY_GOAL_S else 'NOT met'} (slowest {worst * 1000:.0f} ms)")
    print(f"  goal: server memory <= {MEMORY_GOAL_MB:.0f} MB -> "
          f"{'met' if peak <= MEMORY_GOAL_MB else 'NOT met'} (peak RSS {peak:.0f} MB)")


def scale(runs_per_group: int, nice: bool) -> None:
    """Both cases on one folder: never reported (the dashboard computes the report's tables), then
    reported by the real `benchlab report` (the dashboard takes the tables it kept)."""
    from benchlab.names.results_files import report_tables_file

    tmp = Path(tempfile.mkdtemp(prefix="benchlab-ui-"))
    try:
        folder = tmp / "synthetic"
        t0 = time.perf_counter()
        n = build(folder, runs_per_group)
        # One run with the files of a run directory, for its page.
        run = folder / "runs" / "task00-c1-0"
        run.mkdir(parents=True)
        (run / "train.log").write_text("".join(f"step {i} score {i / 1000:.3f}\n" for i in range(1000)))
        (run / "config.yaml").write_text("task: task00\nconfig: c1\nseed: 0\n")
        print(f"results folder: {n} runs x 100 points, written in {time.perf_counter() - t0:.1f} s")
        tables = report_tables_file(folder)
        assert not tables.exists()
        serve_pages(folder, nice, "1. a folder never reported (no report-tables.json): the report's tables are "
                                  "computed at the dashboard's start, beside its server; asked for right after "
                                  "it listens")
        t0 = time.perf_counter()
        done = subprocess.run([sys.executable, "-m", "benchlab", "report", str(folder)],
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        if done.returncode != 0 or not tables.is_file():
            raise RuntimeError(f"benchlab report exited with {done.returncode}:\n{done.stderr[-3000:]}")
        print(f"`benchlab report {folder.name}` (the real command, all outputs): "
              f"{time.perf_counter() - t0:.1f} s wall; it kept the tables in {tables.name} "
              f"({tables.stat().st_size:,} bytes)")
        serve_pages(folder, nice, f"2. the same folder reported by `benchlab report`: the dashboard shows the "
                                  f"tables it kept ({tables.name}, current for this ledger)")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def sweep_once(spec: Path, results: Path) -> float:
    t0 = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "benchlab", "run", str(spec), "-r", str(results), "-j", "2",
                           "--no-report"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"the sweep into {results} exited with {done.returncode}:\n{done.stderr[-3000:]}")
    return time.perf_counter() - t0


def cpu_seconds(procs: list[psutil.Process]) -> float:
    """User and system CPU seconds of ``procs`` so far (those gone count nothing)."""
    total = 0.0
    for p in procs:
        try:
            t = p.cpu_times()
        except psutil.Error:
            continue
        total += t.user + t.system
    return total


def wait_idle(proc: psutil.Process, quiet_s: float = 0.5, limit_s: float = 60.0) -> None:
    """Until ``proc`` used under 5% of a core over ``quiet_s``: a dashboard left open, not starting."""
    deadline = time.monotonic() + limit_s
    before = cpu_seconds([proc])
    while time.monotonic() < deadline:
        time.sleep(quiet_s)
        now = cpu_seconds([proc])
        if now - before < 0.05 * quiet_s:
            return
        before = now


class Lowest:
    """Keeps the processes ``roots`` and all they start at nice 19 while it runs: Chromium sets its
    renderers' and GPU process's priority itself, above the sweep's, whatever it was started with."""

    def __init__(self, roots: list[psutil.Process]) -> None:
        self.roots = roots
        self.raised = 0  # times a process was found above nice 19 after the first look
        self._stop = threading.Event()
        self._seen: set[int] = set()
        self._thread = threading.Thread(target=self._keep, daemon=True)

    def __enter__(self) -> Lowest:
        self.pin()
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def processes(self) -> list[psutil.Process]:
        found = []
        for root in self.roots:
            try:
                found += [root, *root.children(recursive=True)]
            except psutil.Error:
                pass
        return found

    def pin(self) -> None:
        for child in self.processes():
            try:
                if child.nice() < 19:
                    self.raised += child.pid in self._seen
                    child.nice(19)
                self._seen.add(child.pid)
            except psutil.Error:
                pass

    def _keep(self) -> None:
        while not self._stop.wait(0.2):
            self.pin()


#: Counts the page's requests in the page itself (its fetches, and its own load).
COUNT_FETCHES = """
window.__benchlabRequests = 1;
const fetchOf = window.fetch.bind(window);
window.fetch = (...args) => { window.__benchlabRequests += 1; return fetchOf(...args); };
"""


@dataclass
class Watched:
    """One sweep timed with the dashboard open, and what the dashboard's side took meanwhile."""

    wall_s: float
    server_cpu_s: float
    browser_cpu_s: float  # Chromium's processes and Playwright's driver
    startup_cpu_s: float  # the server's, from its start until it was idle, before the sweep
    requests: int
    raised: int


def watched_sweep(spec: Path, results: Path) -> Watched:
    """The sweep timed while the dashboard serves it and Chromium keeps two of its pages open."""
    from playwright.sync_api import sync_playwright

    results.mkdir(parents=True)
    server = Server(results.parent)
    served = psutil.Process(server.proc.pid)
    try:
        with sync_playwright() as p:
            # The browser stands for the user's, which is usually elsewhere (an SSH tunnel from a
            # laptop): here it shares the machine, and runs at the lowest priority as the server does.
            driver = [c for c in psutil.Process().children() if c.pid != server.proc.pid]
            browser = p.chromium.launch(executable_path=shutil.which("chromium") or "/usr/bin/chromium",
                                        args=["--no-sandbox", "--disable-gpu"])
            with Lowest(driver) as lowest:
                pages = [browser.new_page(), browser.new_page()]
                for page in pages:
                    page.add_init_script(COUNT_FETCHES)
                pages[0].goto(server.url + "/")
                wait_idle(served)
                startup = cpu_seconds([served])
                others = lowest.processes()
                browser_before = cpu_seconds(others)
                wall = watch(spec, results, server.url, pages)
                server_cpu = cpu_seconds([served]) - startup
                everyone = {q.pid: q for q in others + lowest.processes()}
                browser_cpu = cpu_seconds(list(everyone.values())) - browser_before
            requests = sum(int(page.evaluate("window.__benchlabRequests || 0")) for page in pages)
            browser.close()
        return Watched(wall, server_cpu, browser_cpu, startup, requests, lowest.raised)
    finally:
        server.close()


def watch(spec: Path, results: Path, url: str, pages: list[Any]) -> float:
    """The sweep's wall time, its pages opened as soon as it has a ledger and then left to themselves."""
    done = threading.Event()
    box: list[float] = []
    failed: list[BaseException] = []

    def run() -> None:
        try:
            box.append(sweep_once(spec, results))
        except BaseException as exc:  # noqa: BLE001 - raised again below, in the main thread
            failed.append(exc)
        finally:
            done.set()

    threading.Thread(target=run, daemon=True).start()
    while not (results / "benchlab.db").exists() and not done.is_set():
        time.sleep(0.02)
    if not done.is_set():
        time.sleep(3.2)  # the dashboard looks for new benchmarks every 3 s
        pages[0].goto(f"{url}/b/{results.name}")
        pages[1].goto(f"{url}/b/{results.name}/curves")
    done.wait()
    if failed:
        raise failed[0]
    return box[0]


def overhead(runs: int, repeat: int) -> None:
    tmp = Path(tempfile.mkdtemp(prefix="benchlab-ui-dispatch-"))
    try:
        spec = tmp / "spec.yaml"
        spec.write_text(SPEC.format(runs=runs))
        without: list[float] = []
        watched: list[Watched] = []
        loads: list[float] = []
        for i in range(repeat):
            loads.append(os.getloadavg()[0])
            without.append(sweep_once(spec, tmp / f"plain{i}" / "dispatch"))
            watched.append(watched_sweep(spec, tmp / f"ui{i}" / "dispatch"))
        loads.append(os.getloadavg()[0])
        base = statistics.median(without)
        with_ui = statistics.median(w.wall_s for w in watched)
        ratio = with_ui / base - 1
        print(f"sweep of {runs} runs of `true`, -j 2, medians of {repeat}, alternated ({os.cpu_count()} cores, "
              f"load average {min(loads):.1f}-{max(loads):.1f})")
        print(f"  without the dashboard      {base:8.2f} s  ({base / runs * 1000:.2f} ms/run)  all: "
              + ", ".join(f"{w:.2f}" for w in without))
        print(f"  with it open and polling   {with_ui:8.2f} s  ({with_ui / runs * 1000:.2f} ms/run)  all: "
              + ", ".join(f"{w.wall_s:.2f}" for w in watched))
        print("  during each watched sweep, CPU s of the server: "
              + ", ".join(f"{w.server_cpu_s:.2f}" for w in watched)
              + "; of the browser: " + ", ".join(f"{w.browser_cpu_s:.2f}" for w in watched)
              + f"; requests: {[w.requests for w in watched]}")
        print("  the server's start-up before each (CPU s): " + ", ".join(f"{w.startup_cpu_s:.2f}" for w in watched)
              + f"; browser processes found above nice 19 again: {[w.raised for w in watched]}")
        print(f"goal: within {OVERHEAD_GOAL:.0%} of the sweep without it -> "
              f"{'met' if ratio <= OVERHEAD_GOAL else 'NOT met'} ({ratio:+.1%})")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs-per-group", type=int, default=100, help="seeds per (task, config): 100 = 10,000 runs")
    parser.add_argument("--sweep-runs", type=int, default=2000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--skip-scale", action="store_true")
    parser.add_argument("--skip-overhead", action="store_true")
    parser.add_argument("--no-nice", action="store_true",
                        help="latency with the server at normal priority (on a loaded machine nice 19 gets leftovers)")
    args = parser.parse_args()
    from bytecode_first import compile_benchlab

    compile_benchlab()
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    if not args.skip_scale:
        scale(args.runs_per_group, nice=not args.no_nice)
    if not args.skip_overhead:
        overhead(args.sweep_runs, args.repeat)


if __name__ == "__main__":
    main()
