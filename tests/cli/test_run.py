"""`benchlab run` end to end, as a user runs it: real subprocesses, a real SQLite ledger."""

from __future__ import annotations

import json
import re
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest
import yaml

from benchlab.results import load
from benchlab_testing import BASIC_SPEC, linked_run


def ledger(results: Path) -> sqlite3.Connection:
    return sqlite3.connect(results / "benchlab.db")


def attempts_by_run(results: Path) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for name, status in ledger(results).execute(
            "SELECT r.name, a.status FROM attempts a JOIN runs r USING (run_id) ORDER BY attempt_id"):
        out.setdefault(name, []).append(status)
    return out


def test_run_writes_run_directories_ledger_and_report(make_bench):
    bench = make_bench(BASIC_SPEC)
    proc = bench.cli("run", "bench.yaml", "-r", "out", "-j", "2")
    assert proc.returncode == 0, proc.stderr
    assert "[1/8]" in proc.stdout and "[8/8]" in proc.stdout
    assert "t1/a/s0 — score=0.5 " in proc.stdout
    runs = sorted((bench.results / "runs").iterdir())
    assert len(runs) == 8
    for run_dir in runs:
        config = yaml.safe_load((run_dir / "config.yaml").read_text())
        assert config["run_id"] == run_dir.name
        env = json.loads((run_dir / "env.json").read_text())
        assert env["BENCHLAB_RUN_DIR"] == str(run_dir)
        assert env["BENCHLAB_RUN_ID"] == run_dir.name
        assert env["BENCHLAB_SEED"] == str(config["seed"])
        assert "start" in (run_dir / "train.log").read_text()
        prov = json.loads((run_dir / "provenance.json").read_text())
        assert prov["exit_code"] == 0 and prov["python"] == sys.version.split()[0]
        assert prov["ended"] >= prov["started"]
    table = load(bench.results)
    assert list(table.columns) == ["benchmark", "task", "config", "seed", "metric", "step", "value"]
    finals = table[table["step"].isna()]
    score = finals[(finals.metric == "score")].set_index(["task", "config", "seed"])["value"]
    # base + seed / 100, as the run script computes it
    assert score[("t1", "a", 1)] == pytest.approx(0.51) and score[("t2", "b", 0)] == pytest.approx(0.7)
    curve = table[(table.metric == "score") & table.step.notna() & (table.task == "t1")
                  & (table.config == "a") & (table.seed == 0)]
    assert curve["step"].tolist() == [0, 10, 20]
    assert curve["value"].tolist() == pytest.approx([0.5 / 3, 1.0 / 3, 0.5])
    report = (bench.results / "BENCHMARK_REPORT.md").read_text()
    # t1/a: seeds 0,1 -> 0.50, 0.51: mean 0.505, sample std 0.00707; BENCHMARKS.md gives the
    # std to 2 significant digits and the mean to the same 4 decimals.
    board = (bench.results / "BENCHMARKS.md").read_text()
    # linked to the run folder of its median seed: of two, the worse, seed 0 (0.50).
    (href,) = re.findall(r"\| \[0\.5050 ± 0\.0071\]\((runs/[0-9a-f]+/)\) \|", board)
    run = linked_run(bench.results, href)
    assert (run["task"], run["config"], run["seed"]) == ("t1", "a", 0)
    assert "## Failure log" in report and "No failed runs." in report
    assert f"benchlab run {bench.spec}" in report
    csv = (bench.results / "results.csv").read_text().splitlines()
    assert csv[0] == "benchmark,task,config,seed,metric,step,value,status,failure_class" and len(csv) == 1 + 8 * 2
    assert all(line.endswith(",completed,") for line in csv[1:])


def test_second_run_does_only_what_is_not_done(make_bench):
    bench = make_bench(BASIC_SPEC)
    bench.cli("run", "bench.yaml", "--no-report", "-r", "out", check=True)
    again = bench.cli("run", "bench.yaml", "--no-report", "-r", "out")
    assert again.returncode == 0
    assert "8 of 8 runs already done" in again.stdout
    assert all(v == ["completed"] for v in attempts_by_run(bench.results).values())


def test_added_seed_and_changed_param_run_only_the_new_runs(make_bench):
    bench = make_bench(BASIC_SPEC)
    bench.cli("run", "bench.yaml", "--no-report", "-r", "out", check=True)
    bench.spec.write_text(BASIC_SPEC.replace("seeds: 2", "seeds: 3").replace("{extra: 2}", "{extra: 3}"))
    proc = bench.cli("run", "bench.yaml", "--no-report", "-r", "out")
    assert proc.returncode == 0
    # 12 runs now: a keeps its 4 and gains 2 seeds; b's 6 are new (changed param)
    assert "4 of 12 runs already done" in proc.stdout
    table = load(bench.results)
    finals = table[table.step.isna() & (table.metric == "score")]
    assert len(finals) == 12  # the replaced b runs left the table
    assert (ledger(bench.results).execute("SELECT COUNT(*) FROM runs WHERE current = 0").fetchone()[0] == 4)


def test_failed_run_is_retried_then_recorded_with_its_log_tail(make_bench):
    bench = make_bench(BASIC_SPEC.replace("{extra: 2}", "{extra: 2, fail_seed: 1}")
                       .replace("extra={extra}", "extra={extra} fail_seed={fail_seed}")
                       .replace("params: {extra: 1}", "params: {extra: 1, fail_seed: -1}"))
    proc = bench.cli("run", "bench.yaml", "-r", "out")
    assert proc.returncode == 1
    assert "t1/b/s1 — failed: ValueError: seed is cursed" in proc.stdout
    assert "retrying t1/b/s1" in proc.stdout
    tries = attempts_by_run(bench.results)
    assert tries["t1/b/s1"] == ["failed", "failed"] and tries["t1/b/s0"] == ["completed"]
    row = ledger(bench.results).execute(
        "SELECT exit_code, failure_class, error, log_tail FROM attempts a JOIN runs r USING (run_id)"
        " WHERE r.name = 't2/b/s1' ORDER BY attempt_id DESC").fetchone()
    assert row[0] == 3 and row[1] == "exception" and row[2] == "ValueError: seed is cursed"
    assert "ValueError: seed is cursed" in row[3]
    # the first attempt's files were kept apart, not mixed with the second's
    run_dir = bench.results / "runs" / ledger(bench.results).execute(
        "SELECT run_id FROM runs WHERE name = 't2/b/s1'").fetchone()[0]
    assert (run_dir / "attempts" / "1" / "train.log").exists()
    status = bench.cli("status", "out")
    assert "2 failed: exception" in status.stdout and "seed is cursed" in status.stdout
    report = (bench.results / "BENCHMARK_REPORT.md").read_text()
    assert "| t1/b/s1 | 2 | exception | ValueError: seed is cursed |" in report
    # a plain second run leaves the failed ones alone, and says how to run them again
    plain = bench.cli("run", "bench.yaml", "-r", "out")
    assert ("6 of 8 runs already done, 2 failed before (--rerun-failed runs them again); nothing to run"
            in plain.stdout)
    assert attempts_by_run(bench.results)["t1/b/s1"] == ["failed"] * 2
    # --rerun-failed runs exactly the failed ones again
    again = bench.cli("run", "bench.yaml", "-r", "out", "--rerun-failed")
    assert again.returncode == 1
    assert attempts_by_run(bench.results)["t1/b/s1"] == ["failed"] * 4
    assert attempts_by_run(bench.results)["t1/a/s1"] == ["completed"]


def test_missing_primary_metric_fails_the_run_with_the_reason(make_bench):
    bench = make_bench(BASIC_SPEC.replace("primary: {name: score, goal: max}", "primary: {name: accuracy}")
                       .replace("retries: 1", "retries: 0"))
    proc = bench.cli("run", "bench.yaml", "-r", "out")
    assert proc.returncode == 1
    assert "metric 'accuracy' was not reported" in proc.stdout


TREE_SCRIPT = '''
import os, subprocess, sys, time
run_dir = os.environ["BENCHLAB_RUN_DIR"]
child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"])
with open(os.path.join(run_dir, "child.pid"), "w") as f:
    f.write(str(child.pid))
print("waiting forever", flush=True)
time.sleep(300)
'''


@pytest.mark.slow
def test_timeout_kills_the_whole_process_tree_and_is_not_retried(make_bench):
    bench = make_bench("""
        name: hang
        tasks: [{name: t}]
        configs: [{name: c}]
        seeds: 1
        command: python run.py
        metrics: {primary: score}
        timeout: 1s
        retries: 2
    """, script=TREE_SCRIPT)
    t0 = time.monotonic()
    proc = bench.cli("run", "bench.yaml", "--no-report", "-r", "out")
    assert proc.returncode == 1
    assert "timed out after 1s" in proc.stdout
    assert time.monotonic() - t0 < 60
    child = int(next((bench.results / "runs").iterdir()).joinpath("child.pid").read_text())
    assert not psutil.pid_exists(child) or psutil.Process(child).status() == psutil.STATUS_ZOMBIE
    assert list(attempts_by_run(bench.results).values()) == [["failed"]]


SLOW_SPEC = """
name: slow
tasks: [{name: t}]
configs: [{name: a}, {name: b}]
seeds: 3
command: python run.py sleep_file=nap.txt
metrics: {primary: score}
"""


def _wait_for(predicate, timeout: float = 30.0) -> None:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if predicate():
            return
        time.sleep(0.1)
    raise AssertionError("condition not met in time")


def _running_pids(results: Path) -> list[int]:
    if not (results / "benchlab.db").exists():
        return []
    try:
        return [p for (p,) in ledger(results).execute(
            "SELECT pid FROM attempts WHERE status = 'running' AND pid IS NOT NULL")]
    except sqlite3.OperationalError:
        return []


def _start(bench, *args: str) -> tuple[subprocess.Popen[str], list[int]]:
    """Start a sweep whose runs sleep as long as nap.txt says (30 s now; 0 s once rewritten).

    Returns once its two slots are running: the sweep, and the pids of those two runs.
    """
    (bench.root / "nap.txt").write_text("30")
    log = open(bench.root / "sweep.log", "w")  # noqa: SIM115 - closed by the Popen's end
    try:
        sweep = subprocess.Popen([sys.executable, "-m", "benchlab", "run", "bench.yaml", "-r", "out", "-j", "2", *args],
                                 cwd=bench.root, stdout=log, stderr=subprocess.STDOUT, text=True)
    finally:
        log.close()
    _wait_for(lambda: len(_running_pids(bench.results)) == 2)
    return sweep, _running_pids(bench.results)


@pytest.mark.slow
def test_ctrl_c_stops_runs_records_them_and_a_rerun_finishes(make_bench):
    bench = make_bench(SLOW_SPEC)
    sweep, pids = _start(bench)
    # meanwhile, from another shell: status works, and a second run is refused
    status = bench.cli("status", "out", "--json")
    assert len(json.loads(status.stdout)["running"]) == 2
    second = bench.cli("run", "bench.yaml", "--no-report", "-r", "out")
    assert second.returncode == 2 and "in use by another benchlab run" in second.stderr
    sweep.send_signal(signal.SIGINT)
    sweep.wait(timeout=60)
    out = (bench.root / "sweep.log").read_text()
    assert sweep.returncode == 130, out
    assert "stopped" in out
    # The summary accounts for every run of the plan: two interrupted, the other four never began.
    assert "6 runs: 0 completed, 2 interrupted, 4 not started" in out
    for pid in pids:
        assert not psutil.pid_exists(pid)
    assert sorted(s for v in attempts_by_run(bench.results).values() for s in v) == ["interrupted"] * 2
    (bench.root / "nap.txt").write_text("0")
    done = bench.cli("run", "bench.yaml", "--no-report", "-r", "out", timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    tries = attempts_by_run(bench.results)
    assert sum(v.count("completed") for v in tries.values()) == 6
    assert sorted(v for v in tries.values() if "interrupted" in v) == [["interrupted", "completed"]] * 2


@pytest.mark.slow
def test_kill_9_of_benchlab_then_rerun_completes_each_run_exactly_once(make_bench):
    bench = make_bench(SLOW_SPEC)
    sweep, orphans = _start(bench)
    sweep.kill()
    sweep.wait()
    # its runs live on in their own sessions until the next benchlab finds them
    assert all(psutil.pid_exists(p) for p in orphans)
    (bench.root / "nap.txt").write_text("0")
    proc = bench.cli("run", "bench.yaml", "--no-report", "-r", "out", timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    for pid in orphans:
        assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    con = ledger(bench.results)
    assert con.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    completed = con.execute(
        "SELECT run_id, COUNT(*) FROM attempts WHERE status = 'completed' GROUP BY run_id").fetchall()
    assert len(completed) == 6 and all(n == 1 for _, n in completed)
    lost = con.execute("SELECT COUNT(*) FROM attempts WHERE failure_class = 'orchestrator-died'").fetchone()[0]
    assert lost == 2
    assert len(load(bench.results).query("metric == 'score' and step != step")) == 6


def test_a_process_whose_attempt_was_never_recorded_is_killed_by_the_next_run(make_bench):
    # A sweep killed between spawning a run and committing its attempt leaves a process that
    # no ledger row names; it still carries the ledger's key in its environment.
    bench = make_bench(BASIC_SPEC)
    assert bench.cli("run", "bench.yaml", "--no-report", "-r", "out").returncode == 0
    key = f"{(bench.results / 'benchlab.db').resolve()}#9999"
    orphan = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"],
                              env={"BENCHLAB_ATTEMPT_KEY": key}, start_new_session=True)
    bystander = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"],
                                 env={"BENCHLAB_ATTEMPT_KEY": key.replace("out", "other")},
                                 start_new_session=True)
    try:
        proc = bench.cli("run", "bench.yaml", "--no-report", "-r", "out")
        assert proc.returncode == 0, proc.stdout + proc.stderr
        assert orphan.wait(timeout=10) == -signal.SIGKILL
        assert bystander.poll() is None  # another folder's process is left alone
    finally:
        orphan.kill()
        bystander.kill()
        bystander.wait()


def test_dry_run_prints_commands_and_runs_nothing(make_bench):
    bench = make_bench(BASIC_SPEC)
    proc = bench.cli("run", "bench.yaml", "-r", "out", "--dry-run")
    assert proc.returncode == 0
    assert "t2/b/s1" in proc.stdout and "python run.py base=0.7 extra=2" in proc.stdout
    assert "8 runs would run" in proc.stdout
    assert not (bench.results / "runs").exists()


def test_override_reaches_the_command(make_bench):
    bench = make_bench(SLOW_SPEC)
    bench.spec.write_text(SLOW_SPEC.replace("sleep_file=nap.txt", "sleep={nap}") + "variables: {nap: 30}\n")
    proc = bench.cli("validate", "bench.yaml", "-s", "nap=0.5", "--json")
    plan = json.loads(proc.stdout)
    assert {r["command"] for r in plan["runs"]} == {"python run.py sleep=0.5"}
    assert len(plan["runs"]) == 6 and plan["runs"][0]["status"] == "pending"


def test_logs_prints_a_runs_log(make_bench):
    bench = make_bench(BASIC_SPEC)
    bench.cli("run", "bench.yaml", "--no-report", "-r", "out", check=True)
    proc = bench.cli("logs", "t2/a/s1", "-r", "out")
    assert proc.returncode == 0 and "done 0.71" in proc.stdout
    missing = bench.cli("logs", "t9/a/s1", "-r", "out")
    assert missing.returncode == 2 and "no run 't9/a/s1'" in missing.stderr


def test_collect_rebuild_recreates_the_same_table(make_bench):
    bench = make_bench(BASIC_SPEC)
    bench.cli("run", "bench.yaml", "--no-report", "-r", "out", check=True)
    before = load(bench.results).sort_values(["task", "config", "seed", "metric", "step"]).reset_index(drop=True)
    # a directory written ahead for a run that never started comes back as still to do
    import shutil

    spare = bench.results / "runs" / "0123456789ab"
    shutil.copytree(next((bench.results / "runs").iterdir()), spare)
    (spare / "provenance.json").unlink()
    cfg = yaml.safe_load((spare / "config.yaml").read_text())
    cfg.update(run_id="0123456789ab", seed=7, name=f"{cfg['task']}/{cfg['config']}/s7")
    (spare / "config.yaml").write_text(yaml.safe_dump(cfg))
    (bench.results / "benchlab.db").unlink()
    for side in ("benchlab.db-wal", "benchlab.db-shm"):
        (bench.results / side).unlink(missing_ok=True)
    proc = bench.cli("collect", "out", "--rebuild")
    assert proc.returncode == 0 and "8 completed, 0 failed, 1 still to run" in proc.stdout
    after = load(bench.results).sort_values(["task", "config", "seed", "metric", "step"]).reset_index(drop=True)
    assert before.equals(after)


def test_status_of_a_missing_folder_is_a_clear_error(tmp_path):
    from benchlab_testing import run_cli

    proc = run_cli("status", "nowhere", cwd=tmp_path)
    assert proc.returncode == 2 and "nowhere: no such results folder" in proc.stderr


def test_init_writes_a_starter_that_runs(tmp_path):
    from benchlab_testing import run_cli

    assert run_cli("init", "starter", cwd=tmp_path).returncode == 0
    proc = run_cli("run", "starter/benchlab.yaml", "-r", "res", "-s", "steps=5", cwd=tmp_path, timeout=180)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "20 completed" in proc.stdout
    assert (tmp_path / "res" / "BENCHMARK_REPORT.md").exists()
    again = run_cli("init", "starter", cwd=tmp_path)
    assert again.returncode == 2 and "exists" in again.stderr
