"""Chaos for processes: nothing a run or a report starts outlives it, however it escapes or ends."""

from __future__ import annotations

import re
import signal
import time
from pathlib import Path

import psutil
import pytest
from chaos_kit import finish, start, wait_for

from benchlab_testing import run_cli

pytestmark = pytest.mark.slow


def sleepers(seconds: str) -> list[psutil.Process]:
    """Live ``sleep <seconds>`` processes (a number no other test uses)."""
    found = []
    for proc in psutil.process_iter(["cmdline", "status"]):
        if proc.info["cmdline"] == ["sleep", seconds] and proc.info["status"] != psutil.STATUS_ZOMBIE:
            found.append(proc)
    return found


def gone(seconds: str, within: float = 5.0) -> bool:
    deadline = time.monotonic() + within
    while sleepers(seconds) and time.monotonic() < deadline:
        time.sleep(0.1)
    left = sleepers(seconds)
    for proc in left:  # leave the machine clean whatever the verdict
        proc.kill()
    return not left


ESCAPES = """
case "$1" in
  exits) setsid env -i sleep 31301.5 & ;;
  hangs) setsid env -i sleep 31302.5 & sleep 60 ;;
  late) sleep 0.5; (setsid env -i sleep 31303.5 &) ;;
  quick) sleep 0.3 ;;
  server) (setsid sleep 31304.5 &); sleep 2; pgrep -f "sleep 31304.5" > /dev/null || exit 9 ;;
  bare) (setsid env -i sleep 31305.5 &); sleep 2; pgrep -f "sleep 31305.5" > /dev/null || exit 9 ;;
esac
echo '{"score": 1}' > "$BENCHLAB_RUN_DIR/metrics.json"
"""


def escape_bench(root: Path, configs: list[str]) -> None:
    (root / "esc.sh").write_text(ESCAPES)
    (root / "bench.yaml").write_text(f"""
name: escape
tasks: [{{name: t}}]
configs: [{", ".join(f"{{name: {c}}}" for c in configs)}]
seeds: [0]
command: sh esc.sh {{config}}
metrics: {{primary: {{name: score, goal: max}}}}
timeout: 3s
retries: 0
""")


def test_escapees_with_a_new_session_and_an_empty_environment_die_with_their_run(tmp_path):
    escape_bench(tmp_path, ["exits", "hangs", "late"])
    proc = run_cli("run", "bench.yaml", "-r", "out", "--no-report", "-j", "3", cwd=tmp_path)
    assert proc.returncode == 1, proc.stdout + proc.stderr  # the hanging one timed out
    assert "2 completed, 1 failed" in proc.stdout
    for seconds in ("31301.5", "31302.5", "31303.5"):
        assert gone(seconds, within=2.0), f"sleep {seconds} outlived its run"


def test_an_orphan_of_a_run_still_going_outlives_another_runs_end_and_dies_with_its_own(tmp_path):
    escape_bench(tmp_path, ["quick", "server"])
    proc = run_cli("run", "bench.yaml", "-r", "out", "--no-report", "-j", "2", cwd=tmp_path)
    # The server's helper, an orphan from its start, lived through the quick run's end (the server
    # found it at its own end) and died with the server.
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert gone("31304.5", within=2.0)


def test_an_orphan_that_names_no_run_lives_while_a_run_that_may_own_it_goes_and_dies_after(tmp_path):
    escape_bench(tmp_path, ["quick", "bare"])
    proc = run_cli("run", "bench.yaml", "-r", "out", "--no-report", "-j", "2", cwd=tmp_path)
    # The bare run's helper has an empty environment and a session of its own: nothing names its
    # run. The quick run's end left it alone (the bare run, going when it started, may own it; the
    # bare run checks that its helper is still there), and it died with the last such run.
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "2 completed" in proc.stdout
    assert gone("31305.5", within=2.0)


CURVES = """
import json, math, os, sys
d, seed = os.environ["BENCHLAB_RUN_DIR"], int(os.environ["BENCHLAB_SEED"])
with open(os.path.join(d, "metrics.jsonl"), "w") as f:
    f.writelines(json.dumps({"step": i, "score": math.sin(i / 50 + seed)}) + "\\n" for i in range(20000))
with open(os.path.join(d, "metrics.json"), "w") as f:
    json.dump({"score": seed + len(sys.argv[1])}, f)
"""


def report_world(root: Path) -> None:
    """A results folder whose report takes a few seconds: 12 runs with 20,000-step curves."""
    (root / "curves.py").write_text(CURVES)
    (root / "bench.yaml").write_text("""
name: plots
tasks: [{name: t1}, {name: t2}]
configs: [{name: a}, {name: bb}]
seeds: 3
command: python3 curves.py {config}
metrics: {primary: {name: score, goal: max}}
retries: 0
""")
    proc = run_cli("run", "bench.yaml", "-r", "out", "--no-report", "-j", "2", cwd=root, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def figures_of(report: Path) -> list[str]:
    return re.findall(r"\]\((plots/[^)]+\.png)\)", report.read_text())


@pytest.mark.skipif(len(psutil.Process().cpu_affinity() or []) < 2, reason="figures are drawn in workers only "
                    "with two or more cores")
def test_figure_workers_die_with_a_killed_or_interrupted_report_and_the_previous_report_stays_whole(tmp_path):
    report_world(tmp_path)
    out = tmp_path / "out"
    assert run_cli("report", "out", cwd=tmp_path, timeout=300).returncode == 0
    before = {p: (out / p).read_bytes() for p in ("BENCHMARK_REPORT.md", "report.html", "results.csv")}
    figures = figures_of(out / "BENCHMARK_REPORT.md")
    assert figures
    for sig in (signal.SIGKILL, signal.SIGTERM, signal.SIGINT):
        proc = start(tmp_path, "report", "out", ctrl_c=sig == signal.SIGINT)
        me = psutil.Process(proc.pid)
        # The first worker is the report's child, the others its children (plots.FigureWorkers).
        wait_for(lambda me=me: len(me.children(recursive=True)) >= 2, within=60, proc=proc)
        workers = me.children(recursive=True)
        # Ctrl-C: the terminal sends SIGINT to the whole process group, workers included.
        for target in [me, *workers] if sig == signal.SIGINT else [me]:
            target.send_signal(sig)
        code, _, err = finish(proc)
        if sig == signal.SIGINT:  # stopped as interrupted, without a traceback (of a worker's either)
            assert code == 130 and "Traceback" not in err, err
        _, alive = psutil.wait_procs(workers, timeout=5)
        assert alive == [], f"{len(alive)} figure workers outlived the report ({sig.name})"
        # The previous report is whole: its files as they were, every figure it shows present.
        assert {p: (out / p).read_bytes() for p in before} == before
        assert all((out / f).exists() for f in figures)
    # The next report clears what the killed ones left behind.
    assert run_cli("report", "out", cwd=tmp_path, timeout=300).returncode == 0
    assert not list(out.glob(".plots-*")) and not list(out.glob(".*.tmp"))
    assert all((out / f).exists() for f in figures_of(out / "BENCHMARK_REPORT.md"))
