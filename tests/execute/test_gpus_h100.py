"""A real H100's NVML answers (tests/data/gpus/h100-80gb), fed through the NVML inventory.

The recordings are what nvidia-ml-py answered on one NVIDIA H100 80GB HBM3 (driver
580.159.04). The figures the tests expect come from the *other* recording of the same
moment, nvidia-smi's CSV (``*.query-gpu.csv``), so the NVML path is checked against what
nvidia-smi printed, not against itself.
"""

from __future__ import annotations

import csv
import dataclasses
import getpass
import inspect
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from gpu_trace import RECORDING, TRACE_SCRIPT, benchlab_cli, devices_of, read_trace, run_cli

from benchlab.errors import UserError
from benchlab.execute.gpu_double import RecordedHandle, RecordedNvml, RecordedNvmlInventory
from benchlab.execute.gpus import empty_margin_mib, open_inventory, visible_indices
from benchlab.execute.local import settle_margin_mib

H100 = Path(__file__).parents[1] / "data" / "gpus" / "h100-80gb"


def smi(state: str) -> dict[str, str]:
    """The nvidia-smi row recorded for ``state``, by column name, units stripped."""
    with open(H100 / f"{state}.query-gpu.csv") as fh:
        row = next(csv.DictReader(fh, skipinitialspace=True))
    return {k.split(" [")[0]: v.replace(" MiB", "").replace(" %", "") for k, v in row.items()}


def v1_only(tmp_path: Path, state: str, *, pid: int | None = None) -> Path:
    """The recording as a driver without memory info v2 gives it (only v1), optionally with its
    process's pid replaced by ``pid``."""
    data = json.loads((H100 / f"{state}.nvml.json").read_text())
    for dev in data["devices"]:
        dev.pop("memory_v2")
        for proc in dev["compute_processes"]:
            proc["pid"] = pid or proc["pid"]
    out = tmp_path / f"{state}.nvml.json"
    out.write_text(json.dumps(data))
    return out


def with_pid(tmp_path: Path, state: str, pid: int, mig: bool = False) -> Path:
    data = json.loads((H100 / f"{state}.nvml.json").read_text())
    for dev in data["devices"]:
        for proc in dev["compute_processes"]:
            proc["pid"] = pid
        if mig:
            dev["mig_mode"] = [1, 1]
    out = tmp_path / f"{state}.nvml.json"
    out.write_text(json.dumps(data))
    return out


@pytest.mark.parametrize("state", ["idle", "after"])
def test_an_idle_h100_read_through_memory_info_v2_is_free(state):
    [dev] = RecordedNvmlInventory(H100 / f"{state}.nvml.json").sample(2.0)
    row = smi(state)
    assert dev.verdict == "free"
    assert dev.name == row["name"] == "NVIDIA H100 80GB HBM3"
    assert dev.memory_total_mib == int(row["memory.total"])
    assert dev.memory_used_mib == int(row["memory.used"]) == 0
    assert dev.memory_reserved_mib == int(row["memory.reserved"]) == 480
    assert dev.memory_free_mib == int(row["memory.free"])


def test_an_idle_h100_read_through_memory_info_v1_only_is_free(tmp_path):
    # v1 says used = 480 MiB: the driver's reserve. With no compute process it is the baseline.
    [dev] = RecordedNvmlInventory(v1_only(tmp_path, "idle")).sample(2.0)
    row = smi("idle")
    assert dev.verdict == "free"
    assert dev.memory_used_mib == int(row["memory.used"])
    assert dev.memory_reserved_mib == int(row["memory.reserved"])
    assert dev.memory_free_mib == int(row["memory.free"])


def test_the_foreign_10gb_process_at_0pct_is_idle_held_with_its_pid():
    [dev] = RecordedNvmlInventory(H100 / "foreign-idle-10GB.nvml.json").sample(2.0)
    row = smi("foreign-idle-10GB")
    assert dev.verdict == "idle-held"
    assert dev.memory_used_mib == int(row["memory.used"])  # 10065 MiB, the reserve excluded
    assert dev.max_utilization_pct == 0 and dev.samples == 5
    [proc] = dev.processes
    with open(H100 / "foreign-idle-10GB.query-compute-apps.csv") as fh:
        app = next(csv.DictReader(fh, skipinitialspace=True))
    assert proc.pid == int(app["pid"]) == 548
    assert proc.used_memory_mib == int(app["used_gpu_memory [MiB]"].split()[0])
    assert dev.kill_hint == "kill 548"


def test_an_idle_held_process_names_its_owner_from_the_process_table(tmp_path):
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        rec = with_pid(tmp_path, "foreign-idle-10GB", sleeper.pid)
        [dev] = RecordedNvmlInventory(rec).sample(1.0)
        assert dev.verdict == "idle-held"
        assert [(p.pid, p.user) for p in dev.processes] == [(sleeper.pid, getpass.getuser())]
        # v1 only, with a process from the first reading: no baseline to learn, still idle-held.
        [dev1] = RecordedNvmlInventory(v1_only(tmp_path, "foreign-idle-10GB", pid=sleeper.pid)).sample(1.0)
        assert dev1.verdict == "idle-held" and dev1.memory_reserved_mib is None
    finally:
        sleeper.kill()
        sleeper.wait()


def test_the_busy_h100_is_busy_at_100pct():
    [dev] = RecordedNvmlInventory(H100 / "foreign-busy.nvml.json").sample(2.0)
    assert dev.verdict == "busy"
    assert dev.max_utilization_pct == int(smi("foreign-busy")["utilization.gpu"]) == 100
    assert dev.memory_used_mib == int(smi("foreign-busy")["memory.used"])


def test_the_double_has_the_call_shapes_of_nvidia_ml_py():
    pynvml = pytest.importorskip("pynvml")
    assert RecordedNvml.nvmlMemory_v2 == pynvml.nvmlMemory_v2
    for name in ("nvmlDeviceGetMemoryInfo", "nvmlDeviceGetUtilizationRates", "nvmlDeviceGetMigMode",
                 "nvmlDeviceGetComputeRunningProcesses", "nvmlDeviceGetHandleByIndex",
                 "nvmlDeviceGetName", "nvmlDeviceGetUUID", "nvmlDeviceGetCount", "nvmlInit"):
        real = list(inspect.signature(getattr(pynvml, name)).parameters)
        ours = list(inspect.signature(getattr(RecordedNvml, name)).parameters)[1:]  # less self
        assert ours == real, name
    # The fields of the structures it returns.
    assert [f[0] for f in pynvml.c_nvmlMemory_v2_t._fields_] == ["version", "total", "reserved", "free", "used"]
    nv = RecordedNvml([H100 / "idle.nvml.json"])
    nv.nvmlInit()
    m2 = nv.nvmlDeviceGetMemoryInfo(nv.nvmlDeviceGetHandleByIndex(0), version=pynvml.nvmlMemory_v2)
    assert {f[0] for f in pynvml.c_nvmlMemory_v2_t._fields_} == set(vars(m2))
    m1 = nv.nvmlDeviceGetMemoryInfo(nv.nvmlDeviceGetHandleByIndex(0))
    assert {f[0] for f in pynvml.c_nvmlMemory_t._fields_} == set(vars(m1))


def test_one_margin_serves_the_inventory_and_the_slot_reuse_wait():
    for total in (81559, 81920, 40960, 10240):
        assert settle_margin_mib(total) == empty_margin_mib(total)
    # It scales with the device: an 80 GB board may hold more bookkeeping than a MIG-sized one.
    assert empty_margin_mib(81559) > 1024 > empty_margin_mib(10240) > 0


def test_resuming_after_a_crash_does_not_wait_on_an_idle_h100(tmp_path):
    from benchlab.execute.local import wait_for_memory

    inv = RecordedNvmlInventory(v1_only(tmp_path, "idle"))
    reads = []
    real_read = inv.read
    inv.read = lambda: reads.append(1) or real_read()  # type: ignore[method-assign]
    wait_for_memory(inv, [0], limit_s=30, poll_s=0.01)
    assert len(reads) == 1  # one look: 480 MiB of reserve is not a run's leftover


def test_gpus_cli_on_the_recorded_h100(tmp_path):
    env = {**os.environ, "BENCHLAB_GPU_DOUBLE": str(H100 / "idle.nvml.json")}
    done = benchlab_cli("gpus", "--json", env=env)
    assert done.returncode == 0, done.stderr
    [dev] = json.loads(done.stdout)
    assert (dev["verdict"], dev["memory_used_mib"], dev["memory_reserved_mib"]) == ("free", 0, 480)
    done = benchlab_cli("gpus", env=env)
    assert "free: 0 (what `--gpus auto` would use)" in done.stdout
    assert "NVIDIA H100 80GB HBM3" in done.stdout


def _bench(root: Path, gpus: float, seeds: int = 4) -> Path:
    (root / "run.py").write_text(TRACE_SCRIPT)
    (root / "trace").mkdir(exist_ok=True)
    spec = root / "bench.yaml"
    spec.write_text(f"name: h100\ntasks: [{{name: t}}]\nconfigs: [{{name: a}}]\nseeds: {seeds}\n"
                    f"resources: {{gpus: {gpus}}}\nmetrics: {{primary: {{name: score, goal: max}}}}\n"
                    f"command: python run.py trace={root / 'trace'} sleep=0.2\n")
    return spec


@pytest.mark.parametrize("v2", [True, False], ids=["memory-v2", "memory-v1"])
def test_gpus_auto_runs_quarter_gpu_runs_on_an_idle_h100(tmp_path, v2):
    spec = _bench(tmp_path, 0.25)
    rec = H100 / "idle.nvml.json" if v2 else v1_only(tmp_path, "idle")
    done = run_cli("run", str(spec), "-r", "out", "-j", "4", "--gpus", "auto", "--no-report", cwd=tmp_path,
                   env={"BENCHLAB_GPU_DOUBLE": str(rec)})
    assert done.returncode == 0, done.stdout + done.stderr
    trace = read_trace(tmp_path / "trace")
    assert len(trace) == 4 and all(devices_of(r) == [0] for r in trace)


def test_a_mig_h100_is_skipped_by_auto_and_refused_by_name(tmp_path):
    rec = with_pid(tmp_path, "idle", 0, mig=True)
    env = {"BENCHLAB_GPU_DOUBLE": str(rec)}
    done = benchlab_cli("gpus", env={**os.environ, **env})
    assert done.returncode == 0, done.stderr
    assert "MIG" in done.stdout and "free: none" in done.stdout
    spec = _bench(tmp_path, 0.25, seeds=1)
    named = run_cli("run", str(spec), "-r", "out", "--gpus", "0", "--no-report", cwd=tmp_path, env=env)
    assert named.returncode == 2
    assert "GPU 0 has MIG enabled" in named.stderr and "Traceback" not in named.stderr
    auto = run_cli("run", str(spec), "-r", "out", "--gpus", "auto", "--no-report", cwd=tmp_path, env=env)
    assert auto.returncode == 2 and "0 free (MIG on)" in auto.stderr


def test_cuda_visible_devices_is_read_as_cuda_reads_it():
    from benchlab.execute.gpu_double import RecordedInventory

    states = RecordedInventory(RECORDING).sample(0.0)
    assert visible_indices(states, {}) is None
    assert visible_indices(states, {"CUDA_VISIBLE_DEVICES": "2,5"}) == {2, 5}
    assert visible_indices(states, {"CUDA_VISIBLE_DEVICES": ""}) == set()
    # The first entry naming no device ends the list, as in CUDA.
    assert visible_indices(states, {"CUDA_VISIBLE_DEVICES": "0,-1,2"}) == {0}
    assert visible_indices(states, {"CUDA_VISIBLE_DEVICES": states[7].uuid[:12]}) == {7}
    with pytest.raises(UserError, match="MIG instance"):
        visible_indices(states, {"CUDA_VISIBLE_DEVICES": "MIG-0e2b4a3c-aaaa-bbbb-cccc-1234567890ab"})


def test_devices_hidden_by_cuda_visible_devices_are_not_used(tmp_path):
    spec = _bench(tmp_path, 1, seeds=4)
    env = {"BENCHLAB_GPU_DOUBLE": str(RECORDING), "CUDA_VISIBLE_DEVICES": "5,7"}
    done = run_cli("run", str(spec), "-r", "out", "-j", "4", "--no-report", cwd=tmp_path, env=env)
    assert done.returncode == 0, done.stdout + done.stderr
    assert {d for r in read_trace(tmp_path / "trace") for d in devices_of(r)} == {5, 7}
    hidden = run_cli("run", str(spec), "-r", "out2", "--gpus", "0", "--no-report", cwd=tmp_path, env=env)
    assert hidden.returncode == 2
    assert "GPU 0 is hidden by CUDA_VISIBLE_DEVICES" in hidden.stderr
    listing = benchlab_cli("gpus", env={**os.environ, **env})
    assert "free: 5, 7" in listing.stdout and "hidden" in listing.stdout


def test_open_inventory_picks_the_nvml_double_for_an_nvml_recording():
    inv = open_inventory(env={"BENCHLAB_GPU_DOUBLE": str(H100 / "idle.nvml.json")})
    assert isinstance(inv, RecordedNvmlInventory) and inv.source.startswith("recorded:")


def test_gpu_smoke_gives_one_line_for_a_user_error():
    script = Path(__file__).parents[2] / "bench" / "gpu_smoke.py"
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parents[2] / "src")}
    done = subprocess.run([sys.executable, str(script), "--gpus", "0,0"], capture_output=True, text=True,
                          env=env, timeout=60, check=False)
    assert done.returncode == 2
    assert done.stderr.strip() == "gpu_smoke: --gpus 0,0: device index listed twice"
    assert "Traceback" not in done.stdout + done.stderr


@pytest.mark.parametrize(("state", "verdict"), [("idle", "free"), ("after", "free"),
                                                ("foreign-idle-10GB", "idle-held"), ("foreign-busy", "busy")])
def test_the_recorded_nvidia_smi_csv_gives_the_same_verdicts_as_nvml(state, verdict):
    from benchlab.execute.gpus import classify, parse_smi

    readings = parse_smi((H100 / f"{state}.query-gpu.csv").read_text(),
                         (H100 / f"{state}.query-compute-apps.csv").read_text(), lambda pid: None)
    [reading] = readings
    assert reading.memory_reserved_mib == 480 and not reading.mig
    state_smi = classify(readings)
    [state_nvml] = RecordedNvmlInventory(H100 / f"{state}.nvml.json").sample(0.0)
    assert state_smi.verdict == state_nvml.verdict == verdict
    assert state_smi.memory_used_mib == state_nvml.memory_used_mib
    assert state_smi.memory_free_mib == state_nvml.memory_free_mib
    # total - reserved - used, each rounded to the MiB on its own: within 1 MiB of nvidia-smi's free.
    assert abs(state_smi.memory_free_mib - int(smi(state)["memory.free"])) <= 1
    assert [(p.pid, p.used_memory_mib) for p in state_smi.processes] == \
        [(p.pid, p.used_memory_mib) for p in state_nvml.processes]


def test_a_recorded_handle_holds_its_device_and_the_moment_it_was_taken():
    now = [2.5]
    nv = RecordedNvml([H100 / "foreign-busy.nvml.json"], clock=lambda: now[0])
    nv.nvmlInit()
    handle = nv.nvmlDeviceGetHandleByIndex(0)
    assert isinstance(handle, RecordedHandle)
    # One file: it stays the machine's state, and the handle was taken 2.5 s into it.
    assert handle.within_s == pytest.approx(2.5)
    assert nv.nvmlDeviceGetUUID(handle) == smi("foreign-busy")["uuid"]
    assert nv.nvmlDeviceGetName(handle) == smi("foreign-busy")["name"]
    # Like pynvml's opaque handle, it cannot be changed by whoever holds it.
    with pytest.raises(dataclasses.FrozenInstanceError):
        handle.within_s = 0.0  # type: ignore[misc]


def test_the_local_backends_gpu_setup_reads_the_recorded_h100(tmp_path, monkeypatch):
    from benchlab.execute.base import SweepContext
    from benchlab.execute.gpus import DOUBLE_ENV
    from benchlab.execute.local import GpuSetup, gpu_setup

    context = SweepContext(spec=None, results_dir=tmp_path, jobs=1, runs=[])  # type: ignore[arg-type]
    # No run asks for a GPU and --gpus was not given: nothing is read.
    assert gpu_setup(context) == GpuSetup()
    assert gpu_setup(dataclasses.replace(context, gpus="none")) == GpuSetup(hide_gpus=True)
    monkeypatch.setenv(DOUBLE_ENV, str(H100 / "idle.nvml.json"))
    setup = gpu_setup(dataclasses.replace(context, gpus="auto"))
    assert setup.hide_gpus is True
    assert setup.gpu_models == {0: smi("idle")["name"]}
    assert setup.gpu_pool is not None and list(setup.gpu_pool.usable) == [0]
