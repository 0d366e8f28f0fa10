"""The NVML path, against an object shaped like the `pynvml` module (no GPU here)."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from benchlab.execute.gpus import GpuProcess, NvmlInventory, open_inventory

GIB = 2**30
MIB = 2**20


class NVMLError(Exception):
    """Like pynvml.NVMLError: carries the numeric code, prints the driver's text."""

    _text = {1: "Uninitialized", 3: "Not Supported", 12: "NVML Shared Library Not Found"}

    def __init__(self, value: int):
        super().__init__(value)
        self.value = value

    def __str__(self) -> str:
        return self._text.get(self.value, f"NVML Error with code {self.value}")


@dataclass
class _Memory:  # c_nvmlMemory_t: bytes
    total: int
    free: int
    used: int


@dataclass
class _Utilization:  # c_nvmlUtilization_t: percent
    gpu: int
    memory: int


@dataclass
class _Proc:  # nvmlFriendlyObject from c_nvmlProcessInfo_t; usedGpuMemory None when hidden
    pid: int
    usedGpuMemory: int | None
    gpuInstanceId: int = 0xFFFFFFFF
    computeInstanceId: int = 0xFFFFFFFF


@dataclass
class _Dev:
    name: bytes
    uuid: bytes
    total: int
    used: int
    util: int | None
    procs: list[_Proc] = field(default_factory=list)


class FakeNvml:
    """Behaves like pynvml over a list of devices; calls before nvmlInit fail as in the real one."""

    NVMLError = NVMLError

    def __init__(self, devices: list[_Dev], init_error: int | None = None):
        self._devices = devices
        self._init_error = init_error
        self.initialised = 0

    def _check(self) -> None:
        if not self.initialised:
            raise NVMLError(1)

    def nvmlInit(self) -> None:
        if self._init_error is not None:
            raise NVMLError(self._init_error)
        self.initialised += 1

    def nvmlShutdown(self) -> None:
        self._check()
        self.initialised -= 1

    def nvmlDeviceGetCount(self) -> int:
        self._check()
        return len(self._devices)

    def nvmlDeviceGetHandleByIndex(self, i: int) -> _Dev:
        self._check()
        return self._devices[i]

    def nvmlDeviceGetMemoryInfo(self, h: _Dev) -> _Memory:
        return _Memory(h.total, h.total - h.used, h.used)

    def nvmlDeviceGetUtilizationRates(self, h: _Dev) -> _Utilization:
        if h.util is None:
            raise NVMLError(3)
        return _Utilization(h.util, 0)

    def nvmlDeviceGetComputeRunningProcesses(self, h: _Dev) -> list[_Proc]:
        return list(h.procs)

    # Older nvidia-ml-py returns bytes here, newer str; the fake returns bytes.
    def nvmlDeviceGetUUID(self, h: _Dev) -> bytes:
        return h.uuid

    def nvmlDeviceGetName(self, h: _Dev) -> bytes:
        return h.name


def _machine() -> FakeNvml:
    return FakeNvml(
        [
            _Dev(
                b"NVIDIA A100-SXM4-80GB",
                b"GPU-00000000-aaaa-bbbb-cccc-000000000000",
                80 * GIB,
                4 * MIB,
                0,
            ),
            _Dev(
                b"NVIDIA A100-SXM4-80GB",
                b"GPU-11111111-aaaa-bbbb-cccc-111111111111",
                80 * GIB,
                30 * GIB + 8 * MIB,
                0,
                [_Proc(48213, 30 * GIB)],
            ),
            # A MIG-enabled board: utilisation "Not Supported", process memory hidden.
            _Dev(
                b"NVIDIA A100-SXM4-80GB",
                b"GPU-22222222-aaaa-bbbb-cccc-222222222222",
                80 * GIB,
                10 * GIB,
                None,
                [_Proc(777, None)],
            ),
        ]
    )


def test_nvml_readings_are_converted_to_mib_and_text():
    owners = {48213: "alice"}
    inv = NvmlInventory(_machine(), owner_of=owners.get)
    got = inv.read()
    assert [r.index for r in got] == [0, 1, 2]
    assert got[0].uuid == "GPU-00000000-aaaa-bbbb-cccc-000000000000"
    assert got[0].name == "NVIDIA A100-SXM4-80GB"
    # Memory info v1 only (this fake has no v2): 4 MiB with no process is taken as the reserve.
    assert (got[0].memory_total_mib, got[0].memory_used_mib, got[0].memory_reserved_mib) == (81920, 0, 4)
    assert got[1].memory_used_mib == 30 * 1024 + 8
    assert got[1].processes == (GpuProcess(48213, "alice", 30 * 1024),)
    assert got[2].utilization_pct is None
    assert got[2].processes == (GpuProcess(777, None, None),)


def test_nvml_verdicts_over_a_window():
    now = [0.0]
    inv = NvmlInventory(
        _machine(),
        owner_of=lambda pid: None,
        clock=lambda: now[0],
        sleep=lambda s: now.__setitem__(0, now[0] + s),
    )
    states = inv.sample(1.0)
    assert [s.verdict for s in states] == ["free", "idle-held", "busy"]
    assert states[1].kill_hint == "kill 48213"


def test_nvml_inventory_answers_the_protocol():
    from benchlab.execute.gpus import Inventory

    assert isinstance(NvmlInventory(_machine()), Inventory)


def test_close_shuts_nvml_down():
    nvml = _machine()
    inv = NvmlInventory(nvml)
    assert nvml.initialised == 1
    inv.close()
    assert nvml.initialised == 0


def test_nvml_is_preferred_when_it_loads():
    def no_smi(args):  # pragma: no cover - must not be reached
        raise AssertionError("nvidia-smi consulted although NVML works")

    inv = open_inventory(env={}, nvml=_machine(), runner=no_smi)
    assert isinstance(inv, NvmlInventory)


def test_real_pynvml_without_a_driver_gives_its_reason():
    pynvml = pytest.importorskip("pynvml")
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError as exc:
        reason = str(exc)
    else:  # pragma: no cover - a machine with a driver
        pynvml.nvmlShutdown()
        pytest.skip("NVML works on this machine")

    from benchlab.execute.gpus import SmiUnavailable

    def no_smi(args):
        raise SmiUnavailable("not found")

    inv = open_inventory(env={}, runner=no_smi)
    assert inv.reason == f"no NVIDIA GPU found (NVML: {reason}; nvidia-smi: not found)"
