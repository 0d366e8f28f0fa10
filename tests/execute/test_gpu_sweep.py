"""GPU packing end to end without a GPU: real runs, the recorded double as the machine.

The runs record the ``CUDA_VISIBLE_DEVICES`` they were given and their own start and
end times (``gpu_trace.TRACE_SCRIPT``); the tests judge the packing from those records.
The double (tests/data/gpus/dgx-a100) has 8 A100-80GB: 0, 2, 5, 7 free; 1, 4, 6 busy
with other people's work; 3 held by an idle zombie.
"""

from __future__ import annotations

import json
import os
import sqlite3
from pathlib import Path

import pytest
from gpu_trace import RECORDING, TRACE_SCRIPT, devices_of, double_env, peak_use, read_trace, run_cli

from benchlab.execute.events import EventKind
from benchlab.execute.local import LocalOptions
from benchlab.execute.sweep import Sweep
from benchlab.spec import load_spec

A100_GIB = 81920 / 1024


def write_bench(root: Path, body: str) -> Path:
    (root / "run.py").write_text(TRACE_SCRIPT)
    (root / "trace").mkdir(exist_ok=True)
    spec = root / "bench.yaml"
    spec.write_text(f"name: gpu\nvariables: {{trace: {root / 'trace'}}}\n"
                    "metrics: {primary: {name: score, goal: max}}\n" + body)
    return spec


def write_one_config(root: Path, *, seeds: int, gpus: float, args: str = "",
                     retries: int | None = None) -> Path:
    """One task, one config: ``seeds`` runs of the trace script, each asking for ``gpus`` GPUs.

    ``args`` follow ``trace=`` on the script's command line (sleep, share to record, faults).
    """
    body = f"tasks: [{{name: t}}]\nconfigs: [{{name: a}}]\nseeds: {seeds}\nresources: {{gpus: {gpus}}}\n"
    if retries is not None:
        body += f"retries: {retries}\n"
    return write_bench(root, body + f"command: python run.py trace={{trace}} {args}".rstrip() + "\n")


MIXED = """
tasks: [{name: t}]
seeds: 4
command: python run.py trace={trace} sleep=0.3 gpus={gpus} mem={mem}
configs:
  - {name: quarter, params: {gpus: 0.25, mem: 25}, resources: {gpus: 0.25, gpu_memory: 25}}
  - {name: half, params: {gpus: 0.5, mem: 0}, resources: {gpus: 0.5}}
  - {name: whole, params: {gpus: 1, mem: 0}, resources: {gpus: 1}}
  - {name: pair, params: {gpus: 2, mem: 0}, resources: {gpus: 2}}
  - {name: cpu, params: {gpus: 0, mem: 0}}
"""


@pytest.mark.slow
def test_mixed_requests_never_overfill_a_device_and_avoid_foreign_ones(tmp_path):
    spec = write_bench(tmp_path, MIXED)
    done = run_cli("run", str(spec), "-r", "out", "-j", "8", "--no-report", cwd=tmp_path,
                   env=double_env())
    assert done.returncode == 0, done.stdout + done.stderr
    trace = read_trace(tmp_path / "trace")
    assert len(trace) == 20
    used = {d for r in trace for d in devices_of(r)}
    assert used <= {0, 2, 5, 7}  # never 1, 4, 6 (busy) nor 3 (the zombie)
    for dev, (share, mem) in peak_use(trace).items():
        assert share <= 1.0 + 1e-9, (dev, share)
        assert mem <= A100_GIB, (dev, mem)  # 3 x 25 GiB fit in 80 GiB, a 4th quarter does not
    for r in trace:
        want = {"cpu": 0, "quarter": 1, "half": 1, "whole": 1, "pair": 2}[r["config"]]
        assert len(devices_of(r)) == want
        if want:
            assert r["order"] == "PCI_BUS_ID"
        else:
            assert r["cvd"] == ""  # a CPU run cannot grab a GPU that GPU runs were promised
    db = sqlite3.connect(tmp_path / "out" / "benchlab.db")
    ledger = dict(db.execute("SELECT run_id, gpus FROM attempts"))
    for r in trace:
        assert (ledger[r["run_id"]] or "") == (r["cvd"] or "")
        if r["cvd"]:
            prov = json.loads((tmp_path / "out" / "runs" / r["run_id"] / "provenance.json").read_text())
            assert prov["gpu_models"] == ["NVIDIA A100-SXM4-80GB"] * len(devices_of(r))
    assert "GPUs 0,2,5,7: busy" in done.stdout


def test_naming_the_zombies_device_uses_it(tmp_path):
    spec = write_one_config(tmp_path, seeds=2, gpus=0.5, args="sleep=0.05 gpus=0.5")
    done = run_cli("run", str(spec), "-r", "out", "--gpus", "3", "--no-report", cwd=tmp_path,
                   env=double_env())
    assert done.returncode == 0, done.stdout + done.stderr
    assert [r["cvd"] for r in read_trace(tmp_path / "trace")] == ["3", "3"]


def test_gpu_runs_without_gpus_are_a_clear_usage_error(tmp_path):
    spec = write_one_config(tmp_path, seeds=1, gpus=1)
    none = run_cli("run", str(spec), "-r", "out", "--gpus", "none", cwd=tmp_path, env=double_env())
    assert none.returncode == 2
    assert "--gpus none, but 1 run(s) ask for GPUs" in none.stderr
    bad = run_cli("run", str(spec), "-r", "out", "--gpus", "0,x", cwd=tmp_path, env=double_env())
    assert bad.returncode == 2 and "--gpus 0,x: expected auto, none" in bad.stderr
    missing = run_cli("run", str(spec), "-r", "out", "--gpus", "9", cwd=tmp_path, env=double_env())
    assert missing.returncode == 2 and "no GPU with index 9" in missing.stderr
    too_big = write_one_config(tmp_path, seeds=1, gpus=8)
    never = run_cli("run", str(too_big), "-r", "out2", "--no-report", cwd=tmp_path, env=double_env())
    assert never.returncode == 1
    assert "cannot be placed: needs 8 GPU(s), only 4 usable" in never.stdout
    held = tmp_path / "held"
    held.mkdir()
    (held / "query-gpu.0.csv").write_text(
        "0, GPU-5b7a3c1e-8d2f-4e61-9a0b-7c3d2e1f4a90, NVIDIA A100-SXM4-80GB, 81920, 66021, 97\n")
    busy = run_cli("run", str(spec), "-r", "out3", cwd=tmp_path, env=double_env(held))
    assert busy.returncode == 2
    assert "no free GPU for the 1 run(s) that ask for one (GPUs: 0 busy)" in busy.stderr


def one_free_device(tmp_path: Path, n: int = 1) -> Path:
    """A writable one-sample recording: the dgx-a100's first ``n`` free devices, all free."""
    folder = tmp_path / "smi"
    folder.mkdir()
    rows = (RECORDING / "query-gpu.0.csv").read_text().splitlines()
    free = [r for r in rows if r.split(", ")[4] in ("0", "4")][:n]
    lines = [", ".join([str(i), *r.split(", ")[1:4], "4", "0"]) for i, r in enumerate(free)]
    (folder / "query-gpu.0.csv").write_text("\n".join(lines) + "\n")
    return folder


def test_a_freed_slot_is_refilled_at_once(tmp_path):
    smi = one_free_device(tmp_path)
    spec = write_one_config(tmp_path, seeds=6, gpus=1, args="sleep=0.1 gpus=1")
    done = run_cli("run", str(spec), "-r", "out", "-j", "4", "--no-report", cwd=tmp_path,
                   env=double_env(smi))
    assert done.returncode == 0, done.stdout + done.stderr
    trace = read_trace(tmp_path / "trace")
    assert len(trace) == 6
    gaps = [b["start"] - a["end"] for a, b in zip(trace, trace[1:], strict=False)]
    assert min(gaps) >= 0  # one device: never two at once
    # The gap holds benchlab's bookkeeping plus the next interpreter's start; 50 ms is typical
    # (bench/packing.py measures it), 0.5 s is generous for a loaded CI machine.
    assert max(gaps) < 0.5, gaps


def test_a_device_is_reused_only_once_its_memory_is_back(tmp_path):
    smi = one_free_device(tmp_path, n=2)
    spec = write_one_config(tmp_path, seeds=3, gpus=1,
                            args=f"sleep=0.2 gpus=1 smi={smi / 'query-gpu.0.csv'} leak_seed=0")
    events = []
    sweep = Sweep(load_spec(spec), tmp_path / "out", jobs=2, on_event=events.append,
                  backend_options=LocalOptions(settle_s=0.6, settle_poll_s=0.05), gpus="auto")
    os.environ["BENCHLAB_GPU_DOUBLE"] = str(smi)
    try:
        result = sweep.run()
    finally:
        del os.environ["BENCHLAB_GPU_DOUBLE"]
    assert result.completed == 3 and result.failed == 0
    trace = {r["seed"]: r for r in read_trace(tmp_path / "trace")}
    leaked = devices_of(trace[0])[0]  # seed 0 leaves 30000 MiB on its device
    assert devices_of(trace[2]) != [leaked]
    assert len(result.warnings) == 1 and result.warnings[0].startswith(f"GPU {leaked}: memory still held")
    assert [e.error for e in events if e.kind is EventKind.WARNING] == result.warnings
    # Seed 2 waited for a device whose memory had come back, not merely for a free slot.
    assert trace[2]["start"] >= min(trace[0]["end"], trace[1]["end"])
    assert result.gpu_busy_share is not None and 0 < result.gpu_busy_share <= 1


def test_out_of_memory_retry_gets_a_device_to_itself(tmp_path):
    smi = one_free_device(tmp_path)
    spec = write_one_config(tmp_path, seeds=4, gpus=0.5, retries=0, args="sleep=0.8 gpus=0.5 oom_seed=1")
    done = run_cli("run", str(spec), "-r", "out", "-j", "4", "--no-report", cwd=tmp_path,
                   env=double_env(smi))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "retrying t/a/s1" in done.stdout and "CUDA out of memory" in done.stdout
    trace = read_trace(tmp_path / "trace")
    retried = next(r for r in trace if r["seed"] == 1)
    assert retried["attempt"] == 2
    others = [r for r in trace if r is not retried]
    # Alone on the device: no other run overlaps its attempt (it asked for 0.5 of it).
    assert not [r for r in others if r["start"] < retried["end"] and retried["start"] < r["end"]]
    # The others did share (runs are long enough to overlap even on a loaded machine).
    assert max(s for s, _ in peak_use(others).values()) == 1.0


def test_retry_budget_per_failure_class(make_bench):
    bench = make_bench("""
name: budget
tasks: [{name: t}]
configs:
  - {name: slow, params: {sleep: 5}}
  - {name: broken, params: {sleep: 0}}
seeds: [0]
command: python run.py sleep={sleep} fail_seed={fail}
variables: {fail: 0}
metrics: {primary: {name: score, goal: max}}
timeout: 0.5s
retries: 3
retry_on: {timeout: 1, exception: 0}
""")
    done = bench.cli("run", "bench.yaml", "-r", "out", "-j", "2", "--no-report")
    assert done.returncode == 1
    db = sqlite3.connect(bench.results / "benchlab.db")
    classes = {}
    for config, cls in db.execute("SELECT r.config, a.failure_class FROM attempts a "
                                  "JOIN runs r USING (run_id) ORDER BY attempt_id"):
        classes.setdefault(config, []).append(cls)
    # timeout: its own budget of 1 (retries: 3 does not apply); exception: 0, not retried.
    assert classes == {"slow": ["timeout", "timeout"], "broken": ["exception"]}


def test_retry_on_rejects_an_unknown_class(make_bench):
    bench = make_bench("""
name: budget
tasks: [{name: t}]
configs: [{name: a}]
command: python run.py
metrics: {primary: {name: score, goal: max}}
retry_on: {oom: 1}
""")
    done = bench.cli("validate", "bench.yaml")
    assert done.returncode == 2
    assert "retry_on" in done.stderr and "out-of-memory" in done.stderr


def test_max_failures_stops_launching(make_bench):
    bench = make_bench("""
name: stopper
tasks: [{name: t}]
configs: [{name: a}]
seeds: 6
command: python run.py fail_seed={seed}
metrics: {primary: {name: score, goal: max}}
retries: 0
""")
    done = bench.cli("run", "bench.yaml", "-r", "out", "-j", "1", "--max-failures", "2", "--no-report")
    assert done.returncode == 1
    db = sqlite3.connect(bench.results / "benchlab.db")
    assert db.execute("SELECT COUNT(*) FROM attempts").fetchone() == (2,)
    assert dict(db.execute("SELECT status, COUNT(*) FROM runs GROUP BY status")) == {
        "failed": 2, "pending": 4}


def test_a_config_failing_on_every_seed_is_flagged(make_bench):
    bench = make_bench("""
name: flags
tasks: [{name: t1}, {name: t2}]
configs:
  - {name: good, params: {fail: -1}}
  - {name: bad, params: {fail: 0}}
seeds: [0]
command: python run.py fail_seed={fail}
metrics: {primary: {name: score, goal: max}}
retries: 0
""")
    done = bench.cli("run", "bench.yaml", "-r", "out", "-j", "2", "--no-report")
    assert done.returncode == 1
    # one problem, one line: both configs failed on every seed the same way
    assert "flagged: t1/bad, t2/bad failed on every seed (2 runs: 2 exception)" in done.stdout
    status = bench.cli("status", "out", "--json")
    flagged = json.loads(status.stdout)["flagged"]
    assert sorted((f["task"], f["config"], f["failures"]) for f in flagged) == [
        ("t1", "bad", 1), ("t2", "bad", 1)]
    text = bench.cli("status", "out")
    assert "flagged: every seed of t1/bad, t2/bad failed this way" in text.stdout


@pytest.mark.slow
def test_kill_9_during_a_gpu_sweep_then_resume_runs_each_once_on_free_devices(tmp_path):
    import signal
    import subprocess
    import sys
    import time

    import psutil

    smi = one_free_device(tmp_path, n=2)
    (tmp_path / "nap.txt").write_text("60")
    spec = write_one_config(tmp_path, seeds=3, gpus=1, args=f"sleep=0 gpus=1 nap={tmp_path / 'nap.txt'}")
    env = {**os.environ, **double_env(smi)}
    sweep = subprocess.Popen([sys.executable, "-m", "benchlab", "run", str(spec), "-r", "out",
                              "--no-report"], cwd=tmp_path, env=env,
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    db = tmp_path / "out" / "benchlab.db"
    deadline = time.monotonic() + 60
    running: list[tuple[int, str]] = []
    while time.monotonic() < deadline and len(running) < 2:
        time.sleep(0.1)
        if db.exists():
            con = sqlite3.connect(db)
            try:
                running = con.execute("SELECT pid, gpus FROM attempts WHERE status = 'running' "
                                      "AND pid IS NOT NULL AND gpus IS NOT NULL").fetchall()
            except sqlite3.OperationalError:
                pass  # the file exists, its tables not yet (the sweep is creating them)
            finally:
                con.close()
    assert sorted(g for _, g in running) == ["0", "1"]
    sweep.send_signal(signal.SIGKILL)
    sweep.wait()
    assert all(psutil.pid_exists(pid) for pid, _ in running)  # its runs outlive it, for now
    (tmp_path / "nap.txt").write_text("0")
    done = run_cli("run", str(spec), "-r", "out", "--no-report", cwd=tmp_path, env=double_env(smi))
    assert done.returncode == 0, done.stdout + done.stderr
    for pid, _ in running:
        assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    con = sqlite3.connect(db)
    assert con.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    assert dict(con.execute("SELECT failure_class, COUNT(*) FROM attempts WHERE status = "
                            "'interrupted' GROUP BY failure_class")) == {"orchestrator-died": 2}
    completed = con.execute("SELECT run_id, COUNT(*), MAX(gpus) FROM attempts "
                            "WHERE status = 'completed' GROUP BY run_id").fetchall()
    assert len(completed) == 3 and all(n == 1 and g in ("0", "1") for _, n, g in completed)
    assert con.execute("SELECT COUNT(*) FROM metrics").fetchone() == (3,)
