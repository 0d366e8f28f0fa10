"""The nvidia-smi path, the verdicts, the recorded double and the choice of inventory."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest
from gpu_trace import RECORDING

from benchlab.errors import UserError
from benchlab.execute.gpu_double import RecordedInventory, read_owners
from benchlab.execute.gpus import (
    SMI_APPS_ARGS,
    SMI_GPU_ARGS,
    DeviceReading,
    GpuProcess,
    Inventory,
    NoInventory,
    SmiInventory,
    SmiUnavailable,
    classify,
    open_inventory,
    parse_smi,
    process_owner,
    run_smi,
)

# Shaped like real output: padding after commas, units where `nounits` was forgotten,
# [N/A] where a MIG or vGPU board hides a figure, and a process whose memory is hidden.
GPU_CSV = """\
0, GPU-aaaaaaaa-1111-2222-3333-444444444444, NVIDIA H100 80GB HBM3, 81559 MiB, 1 MiB, 0 %
1, GPU-bbbbbbbb-1111-2222-3333-444444444444, NVIDIA H100 80GB HBM3, 81559, 40123, [N/A]
2, GPU-cccccccc-1111-2222-3333-444444444444, NVIDIA H100 80GB HBM3, 81559, [N/A], 12
"""
APPS_CSV = """\
GPU-bbbbbbbb-1111-2222-3333-444444444444, 7001, 40000 MiB
GPU-cccccccc-1111-2222-3333-444444444444, 7002, [N/A]
"""


def test_smi_parser_reads_units_and_not_available_cells():
    owners = {7001: "dana"}
    got = parse_smi(GPU_CSV, APPS_CSV, owners.get)
    assert [r.index for r in got] == [0, 1, 2]
    assert got[0] == DeviceReading(
        0, "GPU-aaaaaaaa-1111-2222-3333-444444444444", "NVIDIA H100 80GB HBM3", 81559, 1, 0, ()
    )
    assert got[1].memory_used_mib == 40123
    assert got[1].utilization_pct is None
    assert got[1].processes == (GpuProcess(7001, "dana", 40000),)
    assert got[2].memory_used_mib == 0  # [N/A] memory reads as nothing known held
    assert got[2].processes == (GpuProcess(7002, None, None),)


def test_smi_parser_ignores_no_processes_banner_and_blank_lines():
    got = parse_smi(
        GPU_CSV.splitlines()[0] + "\n\n", "No running processes found\n", lambda pid: None
    )
    assert len(got) == 1 and got[0].processes == ()


def test_smi_parser_rejects_a_row_of_another_query():
    with pytest.raises(ValueError, match="expected 6 fields"):
        parse_smi("0, GPU-x, NVIDIA A100, 81920\n", "", lambda pid: None)


def _reading(used: int, util: int | None, procs: tuple[GpuProcess, ...] = ()) -> DeviceReading:
    return DeviceReading(0, "GPU-x", "NVIDIA A100-SXM4-80GB", 81920, used, util, procs)


ZOMBIE = (GpuProcess(48213, "alice", 31232),)


@pytest.mark.parametrize(
    ("series", "verdict"),
    [
        ([_reading(4, 0), _reading(4, 0)], "free"),
        ([_reading(31240, 0, ZOMBIE)] * 3, "idle-held"),
        ([_reading(31240, 0, ZOMBIE), _reading(31240, 7, ZOMBIE)], "busy"),
        # Memory held by a process this container cannot see, at 0%: still a zombie suspect.
        ([_reading(20000, 0)] * 2, "idle-held"),
        # Utilisation not reported with memory held: cannot call it idle.
        ([_reading(20000, None)], "busy"),
        # A process listed but almost no memory yet (starting up) occupies the device.
        ([_reading(3, 0, (GpuProcess(9, "eve", 2),))], "idle-held"),
    ],
)
def test_verdict_follows_memory_and_utilisation_over_the_window(series, verdict):
    assert classify(series).verdict == verdict


def test_idle_held_device_offers_a_kill_hint_and_busy_does_not():
    assert classify([_reading(31240, 0, ZOMBIE)]).kill_hint == "kill 48213"
    assert classify([_reading(31240, 50, ZOMBIE)]).kill_hint is None


def test_sampler_reads_once_per_interval_over_the_window():
    now = [0.0]
    calls = []

    def runner(args):
        calls.append(args)
        util = "0" if now[0] < 1.0 else "60"
        if args == SMI_GPU_ARGS:
            return f"0, GPU-x, NVIDIA A100-SXM4-80GB, 81920, 30000, {util}\n"
        return "GPU-x, 42, 29990\n"

    inv = SmiInventory(
        runner,
        owner_of=lambda pid: "frank",
        clock=lambda: now[0],
        sleep=lambda s: now.__setitem__(0, now[0] + s),
    )
    [state] = inv.sample(1.0)
    # Readings at t = 0, 0.5, 1.0: two queries each.
    assert len(calls) == 6 and state.samples == 3
    assert state.verdict == "busy" and state.max_utilization_pct == 60
    [single] = inv.sample(0.0)
    assert single.samples == 1


def test_recorded_double_needs_a_window_to_see_a_bursty_job():
    states = RecordedInventory(RECORDING).sample(0.0)
    assert [s.verdict for s in states] == [
        "free",
        "busy",
        "free",
        "idle-held",
        "idle-held",
        "free",
        "busy",
        "free",
    ]
    states = RecordedInventory(RECORDING).sample(2.0)
    assert [s.verdict for s in states] == [
        "free",
        "busy",
        "free",
        "idle-held",
        "busy",
        "free",
        "busy",
        "free",
    ]
    zombie = states[3]
    assert zombie.processes == (GpuProcess(48213, "alice", 31232),)
    assert zombie.kill_hint == "kill 48213"
    assert states[4].max_utilization_pct == 43


def test_recorded_double_rejects_a_folder_without_readings(tmp_path):
    with pytest.raises(UserError, match="query-gpu.0.csv"):
        RecordedInventory(tmp_path)


def test_ps_owner_listing_is_parsed():
    assert read_owners("  48213 alice\n 7 root\nPID USER\n") == {48213: "alice", 7: "root"}


def test_no_gpu_reason_names_both_failures():
    def no_smi(args):
        raise SmiUnavailable("not found")

    class BrokenNvml:
        class NVMLError(Exception):
            pass

        def nvmlInit(self):
            raise self.NVMLError("NVML Shared Library Not Found")

    inv = open_inventory(env={}, nvml=BrokenNvml(), runner=no_smi)
    assert isinstance(inv, NoInventory)
    assert inv.reason == (
        "no NVIDIA GPU found (NVML: NVML Shared Library Not Found; nvidia-smi: not found)"
    )
    assert inv.sample(2.0) == []


def test_environment_variable_selects_the_double():
    inv = open_inventory(env={"BENCHLAB_GPU_DOUBLE": str(RECORDING)})
    assert isinstance(inv, RecordedInventory) and inv.samples == 3


def _fake_smi(folder: Path, body: str) -> dict[str, str]:
    """An `nvidia-smi` executable on PATH (the one thing that cannot exist here)."""
    exe = folder / "nvidia-smi"
    exe.write_text("#!/bin/sh\n" + body)
    exe.chmod(exe.stat().st_mode | stat.S_IXUSR)
    return {**os.environ, "PATH": f"{folder}{os.pathsep}{os.environ.get('PATH', '')}"}


def test_smi_inventory_runs_the_command_and_falls_back_to_it(tmp_path, monkeypatch):
    env = _fake_smi(
        tmp_path,
        'case "$1" in\n'
        f'  --query-gpu=*) cat "{RECORDING}/query-gpu.0.csv" ;;\n'
        f'  --query-compute-apps=*) cat "{RECORDING}/query-compute-apps.0.csv" ;;\n'
        "  *) exit 2 ;;\nesac\n",
    )
    monkeypatch.setenv("PATH", env["PATH"])
    assert run_smi(SMI_APPS_ARGS).startswith("GPU-0e9d4f27")

    class BrokenNvml:
        class NVMLError(Exception):
            pass

        def nvmlInit(self):
            raise self.NVMLError("Driver Not Loaded")

    inv = open_inventory(env={}, nvml=BrokenNvml())
    assert isinstance(inv, SmiInventory)
    got = inv.read()
    assert len(got) == 8 and got[3].processes[0].pid == 48213


def test_failing_smi_reports_its_first_line(tmp_path, monkeypatch):
    env = _fake_smi(
        tmp_path,
        'echo "NVIDIA-SMI has failed because it couldn\'t communicate with the NVIDIA driver."\n'
        "exit 9\n",
    )
    monkeypatch.setenv("PATH", env["PATH"])
    with pytest.raises(SmiUnavailable, match=r"exit 9: NVIDIA-SMI has failed"):
        run_smi(SMI_GPU_ARGS)


def test_missing_smi_is_reported_as_not_found(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(SmiUnavailable, match="^not found$"):
        run_smi(SMI_GPU_ARGS)


def test_process_owner_reads_the_real_process_table():
    import getpass

    assert process_owner(os.getpid()) == getpass.getuser()
    assert process_owner(2**22 + 12345) is None  # above Linux's pid_max: never a process


def test_every_inventory_answers_the_protocol():
    assert isinstance(RecordedInventory(RECORDING), Inventory)
    assert isinstance(SmiInventory(lambda args: ""), Inventory)
    assert isinstance(NoInventory("no NVIDIA GPU found"), Inventory)
