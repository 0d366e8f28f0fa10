"""The slurm backend on a real one-node Slurm (4 declared CPUs, 4 fake GPUs): placement, arrays,
faults, a driver that dies, and the quick-start benchmark giving the report it gives locally."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import psutil
import pytest
import yaml

from benchlab_testing import CHATTY_RUN, CHATTY_SPEC, SCRIPT, capped_chatty_log, run_cli
from localslurm import LocalSlurm

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]


def make_bench(root: Path, name: str, body: str) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / "run.py").write_text(SCRIPT)
    spec = root / "bench.yaml"
    spec.write_text(f"name: {name}\n" + textwrap.dedent(body).lstrip())
    return spec


def ledger(results: Path, sql: str, args: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    conn = sqlite3.connect(results / "benchlab.db", timeout=30)
    try:
        return conn.execute(sql, args).fetchall()
    finally:
        conn.close()


def attempts(results: Path) -> list[dict[str, Any]]:
    rows = ledger(results, "SELECT a.attempt_id, r.name, a.number, a.status, a.failure_class, a.error, a.node,"
                           " a.gpus, a.started, a.ended, p.job_id, p.state FROM attempts a JOIN runs r USING (run_id)"
                           " LEFT JOIN placements p USING (attempt_id) ORDER BY a.attempt_id")
    keys = ("attempt_id", "run", "number", "status", "failure_class", "error", "node", "gpus", "started",
            "ended", "job_id", "state")
    return [dict(zip(keys, r, strict=True)) for r in rows]


def wait_until(check: Any, timeout: float, what: str) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(0.2)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}")


def running_jobs(results: Path) -> list[str]:
    """The Slurm job ids that runs of ``results`` wrote in their ``slurm.json`` when they started (read
    from the run directories, not the ledger, while a driver writes it)."""
    found = []
    for f in results.glob("runs/*/slurm.json"):
        try:
            found.append(json.loads(f.read_text())["job_id"])
        except (OSError, ValueError, KeyError):
            continue
    return found


def run_processes(results: Path, timeout: float) -> list[psutil.Process]:
    """The process of the one run of ``results`` once its script has started (it writes ``env.json``
    first thing)."""
    wait_until(lambda: (results / "runs").is_dir() and list((results / "runs").glob("*/env.json")), timeout,
               "the run to start")
    run_id = next((results / "runs").glob("*/env.json")).parent.name

    def found() -> list[psutil.Process]:
        procs = []
        for p in psutil.process_iter(["cmdline"]):
            try:
                # "run.py" as an argument of its own: the interpreter, not a shell that starts it.
                if "run.py" in (p.info["cmdline"] or []) and p.environ().get("BENCHLAB_RUN_ID") == run_id:
                    procs.append(p)
            except psutil.Error:
                continue
        return procs
    return wait_until(found, timeout, "the run's process")


def sacct_jobs(name: str) -> list[tuple[str, str]]:
    """(job id, state) of every job named ``name`` that Slurm's accounting knows, array tasks one each."""
    out = subprocess.run(["sacct", "-X", "-n", "-P", "--name", name, "-S", "now-1hour", "-o", "JobID,State"],
                         capture_output=True, text=True, check=True).stdout
    return [tuple(line.split("|")) for line in out.splitlines() if line.strip()]  # type: ignore[misc]


def settled_sacct_jobs(name: str, job_ids: set[str], timeout: float = 60) -> list[tuple[str, str]]:
    """``sacct_jobs(name)`` once Slurm's accounting has caught up: slurmctld hands job records to slurmdbd
    asynchronously, so just after a job ends sacct may not know it yet, or may still show it running.
    Array tasks that never started are one record, ``20_[1-3]``; it is counted for each task it names."""
    def covered(jobs: list[tuple[str, str]]) -> set[str]:
        ids = set()
        for job, _ in jobs:
            m = re.fullmatch(r"(\d+)_\[(\d+)-(\d+)\]", job)
            ids |= {f"{m[1]}_{i}" for i in range(int(m[2]), int(m[3]) + 1)} if m else {job}
        return ids
    deadline = time.monotonic() + timeout
    jobs = sacct_jobs(name)
    while not (job_ids <= covered(jobs) and not any(s in ("PENDING", "RUNNING", "REQUEUED") for _, s in jobs)):
        if time.monotonic() > deadline:
            raise AssertionError(f"after {timeout}s Slurm's accounting shows {jobs}, not jobs {sorted(job_ids)} ended")
        time.sleep(0.5)
        jobs = sacct_jobs(name)
    return jobs


def squeue_ids(name: str) -> list[str]:
    out = subprocess.run(["squeue", "-h", "-r", "--name", name, "-o", "%i"], capture_output=True, text=True,
                         check=True).stdout
    return out.split()


def start_driver(spec: Path, results: Path, *args: str) -> subprocess.Popen[str]:
    """``benchlab run`` in the background, its output in ``driver.log`` next to the spec."""
    env = {**os.environ, "COLUMNS": "200", "NO_COLOR": "1"}
    with open(spec.parent / "driver.log", "a") as log:
        return subprocess.Popen([sys.executable, "-m", "benchlab", "run", str(spec), "--backend", "slurm",
                                 "--results", str(results), "--no-report", *args], cwd=spec.parent, env=env,
                                stdout=log, stderr=subprocess.STDOUT, text=True)


def test_sweep_spreads_runs_over_the_fake_gpus(slurm_cluster: LocalSlurm, tmp_path: Path) -> None:
    spec = make_bench(tmp_path, "gpus", """
        tasks: [{name: t}]
        configs: [{name: a}]
        seeds: 4
        command: python run.py sleep=2
        resources: {gpus: 1}
        metrics: {primary: score}
    """)
    out = tmp_path / "out"
    proc = run_cli("run", str(spec), "--backend", "slurm", "-j", "4", "--results", str(out), "--no-report",
                   cwd=tmp_path, timeout=180)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    rows = attempts(out)
    assert [r["status"] for r in rows] == ["completed"] * 4
    # One array of four tasks, each recorded with its node and the device Slurm gave it.
    masters = {r["job_id"].split("_")[0] for r in rows}
    assert len(masters) == 1 and sorted(r["job_id"].split("_")[1] for r in rows) == ["0", "1", "2", "3"]
    seen = {}
    for r in rows:
        run_dir = out / "runs" / ledger(out, "SELECT run_id FROM attempts WHERE attempt_id = ?",
                                        (r["attempt_id"],))[0][0]
        env = json.loads((run_dir / "env.json").read_text())
        assert r["node"] == slurm_cluster_node()
        assert r["gpus"] == env["CUDA_VISIBLE_DEVICES"]  # the ledger names the device the run saw
        seen[r["run"]] = (env["CUDA_VISIBLE_DEVICES"], r["started"], r["ended"])
    # Runs that overlapped in time had different devices.
    for a, (ga, sa, ea) in seen.items():
        for b, (gb, sb, eb) in seen.items():
            if a < b and sa < eb and sb < ea:
                assert ga != gb, f"{a} and {b} ran at once on GPU {ga}"
    assert {g for g, _, _ in seen.values()} <= {"0", "1", "2", "3"}


def slurm_cluster_node() -> str:
    return subprocess.run(["sinfo", "-h", "-o", "%N"], capture_output=True, text=True, check=True).stdout.strip()


def test_an_array_is_throttled_to_jobs_and_queued_runs_show_slurms_reason(
        slurm_cluster: LocalSlurm, tmp_path: Path) -> None:
    spec = make_bench(tmp_path, "throttle", """
        tasks: [{name: t}]
        configs: [{name: a}]
        seeds: 6
        command: python run.py sleep=5
        metrics: {primary: score}
    """)
    out = tmp_path / "out"
    # Runs of 5 s, two at a time: runs wait in the queue for 10 s or more, while `benchlab status`
    # (a Python start-up of its own, seconds on a loaded machine) is asked, twice.
    driver = start_driver(spec, out, "-j", "2")
    try:
        # While it runs, `benchlab status` tells queued runs from running ones, with Slurm's reason.
        def queued_status() -> str | None:
            if not (out / "benchlab.db").exists():
                return None
            p = run_cli("status", str(out), cwd=tmp_path)
            return p.stdout if "JobArrayTaskLimit" in p.stdout else None

        text = wait_until(queued_status, 60, "a queued run in `benchlab status`")
        assert re.search(r"queued t/a/s\d \(attempt 1, job \d+_\d, \d+s, reason: JobArrayTaskLimit\)", text)
        # The same from --json, in one snapshot. A run queued behind the throttle may have just been
        # given a slot and wait with another of Slurm's reasons (None, Resources, Priority) for a
        # moment: every queued run names one, and a run held by the throttle says so.
        def queued_json() -> list[dict] | None:
            queued = [r for r in json.loads(run_cli("status", str(out), "--json", cwd=tmp_path).stdout)["running"]
                      if r.get("queued")]
            return queued if any(r["reason"] == "JobArrayTaskLimit" for r in queued) else None

        queued = wait_until(queued_json, 60, "a run queued behind the throttle in `benchlab status --json`")
        assert all(re.fullmatch(r"[A-Za-z]+", r["reason"] or "") for r in queued), queued
        assert driver.wait(120) == 0, (tmp_path / "driver.log").read_text()
    finally:
        if driver.poll() is None:
            driver.kill()
    rows = attempts(out)
    assert [r["status"] for r in rows] == ["completed"] * 6
    assert len({r["job_id"].split("_")[0] for r in rows}) == 1  # one array
    # The job array carried the throttle, and never more than two of its tasks ran at once.
    script = next((out / ".slurm").rglob("*_submission.sh")).read_text()
    assert "#SBATCH --array=0-5%2" in script
    spans = sorted((r["started"], r["ended"]) for r in rows)
    most = max(sum(1 for s, e in spans if s <= t < e) for t, _ in spans)
    assert most <= 2


def test_a_job_cancelled_from_outside_is_classed_cancelled_and_retried(
        slurm_cluster: LocalSlurm, tmp_path: Path) -> None:
    # The run waits as long as the hold file exists, so it cannot end by itself before the
    # cancellation reaches it however loaded the machine is; the hold goes once the first
    # attempt's process is gone, and the retry then ends at once.
    hold = tmp_path / "hold"
    hold.touch()
    spec = make_bench(tmp_path, "cancelled", f"""
        tasks: [{{name: t}}]
        configs: [{{name: a}}]
        seeds: 1
        command: python run.py wait_file={hold}
        metrics: {{primary: score}}
        retries: 1
    """)
    out = tmp_path / "out"
    driver = start_driver(spec, out)
    try:
        (job,) = wait_until(lambda: running_jobs(out), 60, "the job to run")
        (proc,) = run_processes(out, 60)
        subprocess.run(["scancel", job], check=True)
        wait_until(lambda: not proc.is_running() or proc.status() == psutil.STATUS_ZOMBIE, 60,
                   "the cancelled run's process to end")
        hold.unlink()
        assert driver.wait(120) == 0, (tmp_path / "driver.log").read_text()
    finally:
        if driver.poll() is None:
            driver.kill()
    first, second = attempts(out)
    assert (first["status"], first["failure_class"]) == ("failed", "cancelled")
    assert first["error"] == f"Slurm job {job} was cancelled by 0"  # by root, says sacct
    assert first["state"] == "CANCELLED"
    assert second["status"] == "completed" and second["job_id"] != job
    status = run_cli("status", str(out), cwd=tmp_path).stdout
    assert "1 completed" in status


def test_a_job_killed_mid_run_is_triaged_like_a_local_kill_and_retried(
        slurm_cluster: LocalSlurm, tmp_path: Path) -> None:
    hold = tmp_path / "hold"
    hold.touch()
    spec = make_bench(tmp_path, "killed", f"""
        tasks: [{{name: t}}]
        configs: [{{name: a}}]
        seeds: 1
        command: python run.py wait_file={hold}
        metrics: {{primary: score}}
    """)
    out = tmp_path / "out"
    driver = start_driver(spec, out)
    try:
        (proc,) = run_processes(out, 60)
        proc.kill()  # SIGKILL to the run's own process, mid-run: it waits on the hold, so it is mid-run
        hold.unlink()  # the retry ends at once
        assert driver.wait(120) == 0, (tmp_path / "driver.log").read_text()
    finally:
        if driver.poll() is None:
            driver.kill()
    first, second = attempts(out)
    # What docs/failures.md says of SIGKILL on any backend: the host's OOM killer's signature.
    assert (first["status"], first["failure_class"]) == ("failed", "out-of-memory")
    assert first["error"] and "SIGKILL" in first["error"]
    assert second["status"] == "completed"


def test_a_timeout_is_classed_timeout_and_not_retried(slurm_cluster: LocalSlurm, tmp_path: Path) -> None:
    spec = make_bench(tmp_path, "timeout", """
        tasks: [{name: t}]
        configs: [{name: a}]
        seeds: 1
        command: python run.py sleep=60
        metrics: {primary: score}
        timeout: 2
    """)
    out = tmp_path / "out"
    t0 = time.monotonic()
    proc = run_cli("run", str(spec), "--backend", "slurm", "--results", str(out), "--no-report",
                   cwd=tmp_path, timeout=120)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert time.monotonic() - t0 < 40
    (only,) = attempts(out)
    assert (only["status"], only["failure_class"]) == ("failed", "timeout")
    assert only["error"] == "timed out after 2s"
    script = next((out / ".slurm").rglob("*_submission.sh")).read_text()
    assert "#SBATCH --time=3" in script  # the timeout in minutes, rounded up, plus the margin


def test_a_driver_killed_and_run_again_reattaches_without_submitting_twice(
        slurm_cluster: LocalSlurm, tmp_path: Path) -> None:
    hold = tmp_path / "hold"
    hold.write_text("4")
    spec = make_bench(tmp_path, "resumed", f"""
        tasks: [{{name: t}}]
        configs: [{{name: a}}, {{name: b}}]
        seeds: 2
        command: python run.py sleep_file={hold}
        metrics: {{primary: score}}
    """)
    out = tmp_path / "out"
    driver = start_driver(spec, out, "-j", "2")
    try:
        wait_until(lambda: len(squeue_ids("benchlab-resumed")) == 4 and running_jobs(out), 60,
                   "four submitted jobs, one running")
    finally:
        driver.send_signal(signal.SIGKILL)
        driver.wait()
    before = {r["run"]: r["job_id"] for r in attempts(out)}
    assert squeue_ids("benchlab-resumed"), "the jobs outlive their driver"
    proc = run_cli("run", str(spec), "--backend", "slurm", "-j", "2", "--results", str(out), "--no-report",
                   cwd=tmp_path, timeout=180)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    rows = attempts(out)
    # One attempt per run, each the job the first driver submitted.
    assert [r["status"] for r in rows] == ["completed"] * 4
    assert {r["run"]: r["job_id"] for r in rows} == before
    jobs = settled_sacct_jobs("benchlab-resumed", set(before.values()))
    assert sorted(j for j, _ in jobs) == sorted(before.values())
    assert {s for _, s in jobs} == {"COMPLETED"}


def test_ctrl_c_cancels_every_job_of_the_sweep(slurm_cluster: LocalSlurm, tmp_path: Path) -> None:
    spec = make_bench(tmp_path, "ctrlc", """
        tasks: [{name: t}]
        configs: [{name: a}]
        seeds: 4
        command: python run.py sleep=60
        metrics: {primary: score}
    """)
    out = tmp_path / "out"
    driver = start_driver(spec, out, "-j", "1")
    try:
        wait_until(lambda: running_jobs(out), 60, "a running job")
        driver.send_signal(signal.SIGINT)
        assert driver.wait(60) == 130
    finally:
        if driver.poll() is None:
            driver.kill()
    assert squeue_ids("benchlab-ctrlc") == []
    rows = attempts(out)
    assert {r["status"] for r in rows} == {"interrupted"} and len(rows) == 4
    # Array tasks cancelled while pending may never reach the accounting; squeue above shows them gone.
    started = set(running_jobs(out))
    assert started, "at least one job had started"
    jobs = settled_sacct_jobs("benchlab-ctrlc", started)
    assert {s for _, s in jobs} == {"CANCELLED by 0"}  # by root, with scancel


def _report_without_times(folder: Path) -> list[str]:
    """The report's lines with what the runs found, not where they were written or how fast they
    ran: the results folder's path becomes RESULTS, and the columns and lines of ``fit_time``
    (seconds measured by the runs themselves) are left out."""
    keep, drop = [], None
    text = (folder / "BENCHMARK_REPORT.md").read_text().replace(str(folder), "RESULTS")
    for line in text.splitlines():
        cells = line.split("|")
        if not line.startswith("|"):
            drop = None
        elif drop is None and any(c.strip() == "fit_time" for c in cells):
            drop = next(i for i, c in enumerate(cells) if c.strip() == "fit_time")
        if drop is not None and len(cells) > drop:
            line = "|".join(c for i, c in enumerate(cells) if i != drop)
        elif "fit_time" in line:
            continue
        keep.append(line)
    return keep


def test_the_quick_start_gives_the_same_report_on_slurm_as_locally(
        slurm_cluster: LocalSlurm, tmp_path: Path) -> None:
    pytest.importorskip("sklearn")
    src = REPO / "examples" / "quickstart"
    work = tmp_path / "quickstart"
    shutil.copytree(src, work)
    spec = work / "benchlab.yaml"
    # Two of the three tasks (the small ones) at two seeds: 12 runs a backend, each importing
    # scikit-learn (3 s of CPU); every section of the report still has several tasks to show.
    data = yaml.safe_load(spec.read_text())
    assert [t["name"] for t in data["tasks"]] == ["digits", "wine", "breast_cancer"], "the quick start changed"
    data["tasks"], data["seeds"] = data["tasks"][1:], 2
    spec.write_text(yaml.safe_dump(data, sort_keys=False))
    local = run_cli("run", str(spec), "-s", "epochs=1", "-j", "2", "--results", str(tmp_path / "local"),
                    cwd=work, timeout=300)
    assert local.returncode == 0, local.stdout + local.stderr
    slurm = run_cli("run", str(spec), "-s", "epochs=1", "-j", "4", "--backend", "slurm", "--results",
                    str(tmp_path / "slurm"), cwd=work, timeout=300)
    assert slurm.returncode == 0, slurm.stdout + slurm.stderr
    a, b = _report_without_times(tmp_path / "local"), _report_without_times(tmp_path / "slurm")
    assert any("accuracy" in line for line in a)
    assert a == b


def test_a_secret_variable_reaches_the_job_and_no_file_holds_its_value(slurm_cluster: LocalSlurm,
                                                                        tmp_path: Path) -> None:
    spec = make_bench(tmp_path, "secret", """
        tasks: [{name: t}]
        configs: [{name: a}]
        seeds: 1
        variables: {tok: null}
        secrets: [tok]
        command: TOK=${tok} python run.py
        metrics: {primary: score}
    """)
    out = tmp_path / "out"
    value = "hf_slurmsecret0123456789abcdef"
    proc = run_cli("run", str(spec), "--backend", "slurm", "--results", str(out), "--no-report", "-s",
                   f"tok={value}", cwd=tmp_path, timeout=180)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (env_file,) = out.glob("runs/*/env.json")
    assert json.loads(env_file.read_text())["BENCHLAB_SECRET_TOK"] == value
    env_file.unlink()  # the test script's own dump of its environment, not benchlab's
    holding = [str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*")
               if p.is_file() and p.name != "bench.yaml" and value.encode() in p.read_bytes()]
    assert holding == []


def test_a_chatty_run_on_slurm_leaves_the_capped_log_a_local_run_leaves(slurm_cluster: LocalSlurm,
                                                                        tmp_path: Path) -> None:
    # The job writes its log on the shared file system; the sweep keeps it within log_cap_mb and
    # cuts it at the attempt's end, as it does a local run's: the same bytes, the score still read.
    (tmp_path / "chatty.py").write_text(CHATTY_RUN)
    (tmp_path / "bench.yaml").write_text(CHATTY_SPEC.format(name="loud-slurm"))
    proc = run_cli("run", "bench.yaml", "--backend", "slurm", "--results", "out", "--no-report",
                   cwd=tmp_path, timeout=180)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (log,) = (tmp_path / "out" / "runs").glob("*/train.log")
    assert log.read_bytes() == capped_chatty_log(tmp_path)
    assert ledger(tmp_path / "out", "SELECT value FROM metrics WHERE metric = 'score'") == [(0.75,)]
