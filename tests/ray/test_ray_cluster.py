"""The ray backend on a real three-node Ray cluster on this machine: placement, files, faults.

One cluster per module (starting one takes ~25 s on two cores); a test that needs a node
to remove adds its own.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil
import pytest

from benchlab.execute.sweep import Sweep, SweepResult
from benchlab.spec import load_spec
from benchlab_testing import CHATTY_RUN, CHATTY_SPEC, capped_chatty_log, doc_blocks, run_cli, start_ray_cluster

pytestmark = pytest.mark.slow

MB = 2**20


@dataclass
class LocalCluster:
    """Three Ray nodes: a 1-CPU head, node A with 2 (declared) GPUs and 2 'fake_gpu', node B."""

    cluster: Any
    gpu_node: str  # node id (hex) of the node that has the 'fake_gpu' resource
    cpu_node: str

    @property
    def address(self) -> str:
        return self.cluster.address

    def add_node(self, **resources: Any) -> Any:
        node = self.cluster.add_node(object_store_memory=80 * MB, **resources)
        self.cluster.wait_for_nodes()
        return node


@pytest.fixture(scope="module")
def ray_cluster() -> Iterator[LocalCluster]:
    ray = pytest.importorskip("ray")
    # Ray takes a declared GPU count at its word: node A has 2 GPU slots with no hardware.
    cluster, (gpu, cpu) = start_ray_cluster(
        {"num_cpus": 1, "object_store_memory": 80 * MB, "include_dashboard": False},
        {"num_cpus": 2, "num_gpus": 2, "resources": {"fake_gpu": 2}, "object_store_memory": 80 * MB},
        {"num_cpus": 2, "object_store_memory": 80 * MB})
    ray.init(address=cluster.address, logging_level=logging.WARNING, log_to_driver=False)
    try:
        yield LocalCluster(cluster, gpu.node_id, cpu.node_id)
    finally:
        ray.shutdown()
        cluster.shutdown()


# Writes what it saw on the worker, a nested file, metrics; sleeps when asked.
SCRIPT = '''
import json, os, sys, time
args = dict(a.split("=", 1) for a in sys.argv[1:])
run_dir = os.environ["BENCHLAB_RUN_DIR"]
seed = int(os.environ["BENCHLAB_SEED"])
config = open(os.path.join(run_dir, "config.yaml")).read()
os.makedirs(os.path.join(run_dir, "extra"), exist_ok=True)
with open(os.path.join(run_dir, "extra", "seen.json"), "w") as f:
    json.dump({"run_dir": run_dir, "config_has_id": os.environ["BENCHLAB_RUN_ID"] in config,
               "flavour": os.environ.get("FLAVOUR"),
               "cuda": os.environ.get("CUDA_VISIBLE_DEVICES")}, f)
print("start", seed, flush=True)
time.sleep(float(args.get("sleep", 0)))
while args.get("hold", "none") != "none" and not os.path.exists(args["hold"]):
    time.sleep(0.05)  # held until the test lets it finish
with open(os.path.join(run_dir, "metrics.json"), "w") as f:
    json.dump({"score": 0.5 + seed / 100}, f)
with open(os.path.join(run_dir, "metrics.jsonl"), "w") as f:
    for step in range(3):
        f.write(json.dumps({"step": step, "score": step / 10}) + "\\n")
print("done", seed)
'''

SPEC = """
name: onray
tasks: [{{name: t}}]
configs: [{{name: a}}, {{name: b}}]
seeds: {seeds}
variables: {{sleep: 0, token: none, hold: none}}
command: python run.py sleep={{sleep}} token={{token}} hold={{hold}}
env: {{FLAVOUR: "{{config}}-x"}}
metrics: {{primary: {{name: score, goal: max}}}}
resources: {resources}
retries: {retries}
{extra}
"""


def write_bench(root: Path, *, seeds: int = 2, resources: str = "{cpus: 1}", retries: int = 1,
                extra: str = "", sleep: float = 0, hold: Path | None = None) -> tuple[Path, str]:
    """A spec and its run script in ``root``; returns the spec path and the runs' unique token."""
    token = uuid.uuid4().hex[:10]
    (root / "run.py").write_text(SCRIPT)
    spec = root / "bench.yaml"
    spec.write_text(textwrap.dedent(SPEC.format(seeds=seeds, resources=resources, retries=retries,
                                                extra=extra)).lstrip())
    text = spec.read_text().replace("sleep: 0, token: none", f"sleep: {sleep}, token: {token}")
    text = text.replace("hold: none", f"hold: {hold or 'none'}")
    spec.write_text(text)
    return spec, token


def run_sweep(spec: Path, results: Path, address: str, **options: object) -> SweepResult:
    from benchlab.execute.ray import RayOptions

    return Sweep(load_spec(spec), results, backend="ray",
                 backend_options=RayOptions(address=address, **options)).run()


def attempts(results: Path) -> list[sqlite3.Row]:
    conn = sqlite3.connect(results / "benchlab.db")
    conn.row_factory = sqlite3.Row
    return conn.execute("SELECT r.name, r.run_id, a.* FROM attempts a JOIN runs r USING (run_id)"
                        " ORDER BY attempt_id").fetchall()


def completed_once(results: Path, runs: int) -> list[sqlite3.Row]:
    """Every run has exactly one completed attempt; returns those attempts."""
    rows = attempts(results)
    done = [r for r in rows if r["status"] == "completed"]
    assert len(done) == runs and len({r["run_id"] for r in done}) == runs, [tuple(r) for r in rows]
    return done


def node_id(node: str) -> str:
    """The Ray node id prefix of an attempt's node ('ip/idprefix')."""
    return node.split("/")[1]


def alive(token: str) -> list[psutil.Process]:
    """Processes of this test's runs still alive on this machine (all the cluster's nodes)."""
    found = []
    for proc in psutil.process_iter(["cmdline"]):
        cmdline = proc.info["cmdline"] or []
        if any(f"token={token}" in part for part in cmdline):
            found.append(proc)
    return found


def running_runs(token: str) -> int:
    """How many runs of this test are running: one process group each (a shell may front it)."""
    groups = set()
    for proc in alive(token):
        try:
            groups.add(os.getpgid(proc.pid))
        except OSError:
            continue
    return len(groups)


def wait_for(predicate, timeout: float, what: str, detail=None) -> None:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if predicate():
            return
        time.sleep(0.1)
    shown = detail() if detail else ""
    raise AssertionError(f"timed out after {timeout}s waiting for {what}: {shown}")


def test_runs_spread_over_nodes_and_their_files_come_home(ray_cluster, tmp_path):
    spec, _ = write_bench(tmp_path, seeds=4, sleep=0.5)
    result = run_sweep(spec, tmp_path / "out", ray_cluster.address)
    assert (result.completed, result.failed) == (8, 0)
    done = completed_once(tmp_path / "out", 8)
    # 8 runs of 1 CPU at once on 1 + 2 + 2 CPUs cannot all fit on one node.
    assert len({node_id(r["node"]) for r in done}) > 1
    for row in done:
        run_dir = tmp_path / "out" / "runs" / row["run_id"]
        seen = json.loads((run_dir / "extra" / "seen.json").read_text())
        # The run wrote into a scratch folder on its node, never the driver's run directory.
        assert seen["run_dir"] != str(run_dir) and seen["config_has_id"]
        assert seen["flavour"] == row["name"].split("/")[1] + "-x"
        log = (run_dir / "train.log").read_text()
        assert log.startswith("start") and "done" in log
        prov = json.loads((run_dir / "provenance.json").read_text())
        assert prov["node"] == row["node"] and prov["exit_code"] == 0
    conn = sqlite3.connect(tmp_path / "out" / "benchlab.db")
    scores = dict(conn.execute("SELECT r.name, m.value FROM metrics m JOIN runs r USING (run_id)"
                               " WHERE m.metric = 'score'"))
    assert scores["t/a/s3"] == pytest.approx(0.53) and scores["t/b/s0"] == pytest.approx(0.5)
    (n_steps,) = conn.execute("SELECT COUNT(*) FROM series").fetchone()
    assert n_steps == 8


def test_runs_needing_a_custom_resource_run_only_where_it_is(ray_cluster, tmp_path):
    spec, _ = write_bench(tmp_path, seeds=3, resources="{cpus: 0.5, custom: {fake_gpu: 0.5}}")
    result = run_sweep(spec, tmp_path / "out", ray_cluster.address)
    assert result.completed == 6
    done = completed_once(tmp_path / "out", 6)
    assert {node_id(r["node"]) for r in done} == {ray_cluster.gpu_node[:12]}


def test_gpu_runs_see_the_devices_ray_gave_them(ray_cluster, tmp_path):
    spec, _ = write_bench(tmp_path, seeds=2, resources="{cpus: 0.5, gpus: 0.5}")
    result = run_sweep(spec, tmp_path / "out", ray_cluster.address)
    assert result.completed == 4
    for row in completed_once(tmp_path / "out", 4):
        assert node_id(row["node"]) == ray_cluster.gpu_node[:12]
        run_dir = tmp_path / "out" / "runs" / row["run_id"]
        seen = json.loads((run_dir / "extra" / "seen.json").read_text())
        assert seen["cuda"] in ("0", "1")
        assert json.loads((run_dir / "provenance.json").read_text())["gpus"] == [int(seen["cuda"])]


def test_a_running_attempts_log_is_streamed_home(ray_cluster, tmp_path):
    release = tmp_path / "release"
    spec, _ = write_bench(tmp_path, seeds=1, hold=release)
    box: dict[str, SweepResult] = {}
    thread = threading.Thread(target=lambda: box.setdefault("result", run_sweep(
        spec, tmp_path / "out", ray_cluster.address, flush_s=0.2)))
    thread.start()
    try:
        def streamed() -> bool:
            logs = list((tmp_path / "out" / "runs").glob("*/train.log"))
            return len(logs) == 2 and all(p.read_text().startswith("start") for p in logs)

        wait_for(streamed, 60, "both runs' first lines on the driver while they run")
        shown = run_cli("logs", "t/a/s0", "-r", "out", cwd=tmp_path, timeout=60)
        assert shown.stdout.startswith("start 0") and "done" not in shown.stdout
    finally:
        release.touch()
        thread.join(timeout=60)
    assert box["result"].completed == 2
    for log in (tmp_path / "out" / "runs").glob("*/train.log"):
        text = log.read_text()
        assert text.count("start") == 1 and text.count("done") == 1


def test_shared_filesystem_runs_write_in_place(ray_cluster, tmp_path):
    spec, _ = write_bench(tmp_path, seeds=1)
    result = run_sweep(spec, tmp_path / "out", ray_cluster.address, shared_fs=True)
    assert result.completed == 2
    for row in completed_once(tmp_path / "out", 2):
        run_dir = tmp_path / "out" / "runs" / row["run_id"]
        seen = json.loads((run_dir / "extra" / "seen.json").read_text())
        assert seen["run_dir"] == str(run_dir)


def test_hung_run_is_killed_on_its_worker_at_its_timeout(ray_cluster, tmp_path):
    spec, token = write_bench(tmp_path, seeds=1, retries=0, sleep=120, extra="timeout: 2")
    started = time.monotonic()
    result = run_sweep(spec, tmp_path / "out", ray_cluster.address)
    assert result.failed == 2 and time.monotonic() - started < 60
    rows = attempts(tmp_path / "out")
    assert [r["failure_class"] for r in rows] == ["timeout", "timeout"]
    assert all(r["error"] == "timed out after 2s" for r in rows)
    assert alive(token) == []


def test_node_removed_mid_sweep_its_runs_retried_elsewhere(ray_cluster, tmp_path):
    doomed = ray_cluster.add_node(num_cpus=2)
    raylet = psutil.Process(doomed.all_processes["raylet"][0].process.pid)
    release = tmp_path / "release"
    spec, token = write_bench(tmp_path, seeds=4, retries=2, hold=release)
    box: dict[str, SweepResult] = {}
    thread = threading.Thread(target=lambda: box.setdefault(
        "result", run_sweep(spec, tmp_path / "out", ray_cluster.address)))
    thread.start()
    # Runs on the doomed node are descendants of its raylet.
    wait_for(lambda: any(raylet in p.parents() for p in alive(token)), 60,
             "a run to start on the doomed node")
    ray_cluster.cluster.remove_node(doomed)
    release.touch()
    thread.join(timeout=120)
    assert not thread.is_alive()
    assert box["result"].completed == 8
    done = completed_once(tmp_path / "out", 8)
    assert doomed.node_id[:12] not in {node_id(r["node"]) for r in done}
    died = [r for r in attempts(tmp_path / "out") if r["failure_class"] == "node-died"]
    assert len(died) >= 1
    assert all(r["error"].startswith("worker node died (ray.exceptions.") for r in died)
    assert alive(token) == []


def test_cli_on_a_cluster_address_and_a_killed_driver_resumed(ray_cluster, tmp_path):
    release = tmp_path / "release"
    spec, token = write_bench(tmp_path, seeds=3, hold=release)
    env = {**os.environ, "COLUMNS": "200", "NO_COLOR": "1"}
    driver = subprocess.Popen(
        [sys.executable, "-m", "benchlab", "run", "bench.yaml", "-r", "out", "--backend", "ray",
         "--ray-address", ray_cluster.address], cwd=tmp_path, env=env,
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_for(lambda: running_runs(token) >= 2, 120, "runs to start")
    finally:  # killed whether or not its runs started: a failed wait leaves no driver to the next test
        driver.kill()
        driver.wait()
    # Ray ends the dead driver's tasks; each worker's reaper kills the runs' process groups.
    wait_for(lambda: not alive(token), 30, "the orphaned runs to be killed",
             lambda: [(p.pid, p.ppid(), p.cmdline()) for p in alive(token)])
    release.touch()
    again = run_cli("run", "bench.yaml", "-r", "out", "--backend", "ray", "--ray-address",
                    ray_cluster.address, "--no-report", cwd=tmp_path, timeout=120)
    assert again.returncode == 0, again.stdout + again.stderr
    completed_once(tmp_path / "out", 6)
    lost = [r for r in attempts(tmp_path / "out") if r["failure_class"] == "orchestrator-died"]
    assert len(lost) >= 2
    status = run_cli("status", "out", "--json", cwd=tmp_path, timeout=60)
    assert status.returncode == 0 and json.loads(status.stdout)["counts"]["completed"] == 6


def test_ctrl_c_cancels_the_tasks_and_leaves_nothing_running(ray_cluster, tmp_path):
    spec, token = write_bench(tmp_path, seeds=3, sleep=60)
    env = {**os.environ, "COLUMNS": "200", "NO_COLOR": "1"}
    log = tmp_path / "driver.out"
    with log.open("w") as sink:
        driver = subprocess.Popen(
            [sys.executable, "-m", "benchlab", "run", "bench.yaml", "-r", "out", "--backend", "ray",
             "--ray-address", ray_cluster.address], cwd=tmp_path, env=env, text=True,
            stdout=sink, stderr=subprocess.STDOUT)
    try:
        # Three Ray workers started on two busy cores: most of a minute at worst in CI.
        wait_for(lambda: running_runs(token) >= 3, 120, "runs to start", log.read_text)
        driver.send_signal(signal.SIGINT)
        driver.wait(timeout=60)
    finally:
        if driver.poll() is None:  # a failed wait: the driver is not left to the next test
            driver.kill()
            driver.wait()
    out = log.read_text()
    assert driver.returncode == 130, out
    wait_for(lambda: not alive(token), 15, "the cancelled runs to be killed",
             lambda: [(p.pid, p.ppid(), p.cmdline()) for p in alive(token)])
    rows = attempts(tmp_path / "out")
    assert rows and all(r["status"] == "interrupted" for r in rows)


def test_the_docs_spec_example_runs_on_the_cluster(ray_cluster, tmp_path):
    doc = Path(__file__).parents[2] / "docs" / "cluster.md"
    (example,) = [b for b in doc_blocks(doc, "yaml") if "name:" in b]
    assert "resources: {cpus: 1, gpus: 0.5}" in example  # run on node A's declared GPUs
    run_cli("init", ".", cwd=tmp_path, check=True)  # the doc's train.py
    (tmp_path / "starter-on-ray.yaml").write_text(example)
    proc = run_cli("run", "starter-on-ray.yaml", "-r", "out", "--ray-address", ray_cluster.address,
                   cwd=tmp_path, timeout=180)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    done = completed_once(tmp_path / "out", 12)
    assert {node_id(r["node"]) for r in done} == {ray_cluster.gpu_node[:12]}
    assert (tmp_path / "out" / "BENCHMARK_REPORT.md").exists()


@pytest.mark.parametrize("shared_fs", [False, True])
def test_a_chatty_run_on_ray_leaves_the_capped_log_a_local_run_leaves(ray_cluster, tmp_path, shared_fs):
    # Without a shared file system the worker keeps the log within log_cap_mb in its scratch folder
    # and sends home logcap.cut's form of it; with one, the sweep keeps and cuts it in place.
    (tmp_path / "chatty.py").write_text(CHATTY_RUN)
    (tmp_path / "bench.yaml").write_text(CHATTY_SPEC.format(name="loud-ray"))
    result = run_sweep(tmp_path / "bench.yaml", tmp_path / "out", ray_cluster.address, shared_fs=shared_fs)
    assert result.completed == 1
    (log,) = (tmp_path / "out" / "runs").glob("*/train.log")
    assert log.read_bytes() == capped_chatty_log(tmp_path)
    conn = sqlite3.connect(tmp_path / "out" / "benchlab.db")
    assert conn.execute("SELECT value FROM metrics WHERE metric = 'score'").fetchall() == [(0.75,)]
    conn.close()
