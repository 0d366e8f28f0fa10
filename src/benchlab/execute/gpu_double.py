"""GPU inventories that replay recorded driver answers: GPU work testable without a GPU.

Set ``BENCHLAB_GPU_DOUBLE=/path/to/recording`` and every part of benchlab that
asks for GPUs (`benchlab gpus`, the local executor, the utilisation sampler)
reads the recording instead of the driver. Two kinds of recording:

**NVML** (:class:`RecordedNvml`): a ``*.nvml.json`` file, or a folder of
``nvml.0.json``, ``nvml.1.json``, ... one second apart, each holding what
nvidia-ml-py answered on a real machine::

    {"driver": "580.159.04", "nvml_version": "13.580.159.04",
     "devices": [{"index": 0, "name": "NVIDIA H100 80GB HBM3", "uuid": "GPU-...",
                  "memory_v1": {"total": ..., "used": ..., "free": ...},      # bytes
                  "memory_v2": {"total": ..., "reserved": ..., "used": ..., "free": ...},
                  "utilization_samples": [{"gpu": 0, "memory": 0}, ...],     # 0.2 s apart
                  "compute_processes": [{"pid": 548, "usedGpuMemory": 10544480256}],
                  "mig_mode": [0, 0]}]}

It is replayed through the real :class:`benchlab.execute.gpus.NvmlInventory`
by an object shaped like the ``pynvml`` module; a device without ``memory_v2``
answers memory info v2 as a driver older than 510 does ("Function Not Found").
The file is read again at every reading, so a test may rewrite it while a
sweep runs (a run "allocating" on its device). Owners of the pids come from
``ps-owners.txt`` beside it when there is one, else from this machine's process table.

**nvidia-smi** (:class:`RecordedInventory`): a folder of files, exactly as the commands print them
(``SMI_GPU_ARGS`` and ``SMI_APPS_ARGS`` in :mod:`benchlab.execute.gpus`)::

    query-gpu.0.csv            nvidia-smi --query-gpu=index,uuid,name,memory.total,
                                 memory.used,utilization.gpu --format=csv,noheader,nounits
    query-compute-apps.0.csv   nvidia-smi --query-compute-apps=gpu_uuid,pid,used_memory
                                 --format=csv,noheader,nounits
    query-gpu.1.csv            the same, one second later
    query-compute-apps.1.csv
    ...
    ps-owners.txt              ps -o pid=,user= -p <the pids above>   (optional)

Samples are one second apart (:data:`RECORDED_INTERVAL_S`). Time is virtual: a
sampling window of W seconds reads samples 0..W at once without sleeping, and
stays on the last sample once the recording runs out.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchlab.errors import UserError
from benchlab.execute.gpus import (
    DOUBLE_ENV,
    DeviceReading,
    NvmlInventory,
    SmiInventory,
    parse_smi,
    process_owner,
)
from benchlab.json_types import JsonObject

RECORDED_INTERVAL_S = 1.0
#: How far apart a recording's ``utilization_samples`` were taken.
UTILIZATION_INTERVAL_S = 0.2


def read_owners(text: str) -> dict[int, str]:
    """Parse ``ps -o pid=,user=`` output into {pid: user}."""
    owners = {}
    for line in text.splitlines():
        parts = line.split()
        if len(parts) >= 2 and parts[0].isdigit():
            owners[int(parts[0])] = parts[1]
    return owners


class _VirtualClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += max(0.0, seconds)


class RecordedInventory(SmiInventory):
    """Replays a recording folder (see the module docstring) through the real nvidia-smi parser."""

    interval_s = RECORDED_INTERVAL_S

    def __init__(self, folder: str | Path) -> None:
        self.folder = Path(folder)
        self._n = 0
        while (self.folder / f"query-gpu.{self._n}.csv").is_file():
            self._n += 1
        if self._n == 0:
            raise UserError(
                f"{DOUBLE_ENV}={folder}: expected a folder with query-gpu.0.csv "
                "(recorded `nvidia-smi --query-gpu=... --format=csv,noheader,nounits`), found none"
            )
        owners_file = self.folder / "ps-owners.txt"
        owners = read_owners(owners_file.read_text()) if owners_file.is_file() else {}
        clock = _VirtualClock()
        super().__init__(owner_of=owners.get, clock=clock, sleep=clock.sleep)
        self.source = f"recorded:{self.folder}"
        self._virtual = clock

    @property
    def samples(self) -> int:
        """How many samples the recording holds."""
        return self._n

    def read_raw(self) -> list[DeviceReading]:
        k = min(self._n - 1, int(self._virtual.now / self.interval_s + 1e-9))
        apps = self.folder / f"query-compute-apps.{k}.csv"
        return parse_smi(
            (self.folder / f"query-gpu.{k}.csv").read_text(),
            apps.read_text() if apps.is_file() else "",
            self._owner_of,
        )


# ---------------------------------------------------------------------- NVML


class NVMLError(Exception):
    """As ``pynvml.NVMLError``: ``value`` is the NVML return code, ``str()`` the driver's text."""

    _text = {1: "Uninitialized", 2: "Invalid Argument", 3: "Not Supported",
             13: "Function Not Found"}

    def __init__(self, value: int):
        super().__init__(value)
        self.value = value

    def __str__(self) -> str:
        return self._text.get(self.value, f"NVML Error with code {self.value}")


@dataclass
class Memory:
    """``c_nvmlMemory_t``: bytes."""

    total: int
    free: int
    used: int


@dataclass
class MemoryV2:
    """``c_nvmlMemory_v2_t``: bytes; ``used`` excludes ``reserved``."""

    version: int
    total: int
    reserved: int
    free: int
    used: int


@dataclass
class Utilization:
    """``c_nvmlUtilization_t``: percent over the driver's last sample period."""

    gpu: int
    memory: int


@dataclass
class ProcessInfo:
    """What ``nvmlDeviceGetComputeRunningProcesses`` lists; ``usedGpuMemory`` None when hidden."""

    pid: int
    usedGpuMemory: int | None  # noqa: N815 - pynvml's name
    gpuInstanceId: int = 0xFFFFFFFF  # noqa: N815
    computeInstanceId: int = 0xFFFFFFFF  # noqa: N815


def _nvml_files(path: Path) -> list[Path]:
    if path.is_file():
        return [path]
    files: list[Path] = []
    while (path / f"nvml.{len(files)}.json").is_file():
        files.append(path / f"nvml.{len(files)}.json")
    return files


def is_nvml_recording(path: str | Path) -> bool:
    """Whether ``path`` is an NVML recording (a ``*.nvml.json`` file or a folder with ``nvml.0.json``)."""
    path = Path(path)
    return (path.is_file() and path.name.endswith(".json")) or (path / "nvml.0.json").is_file()


@dataclass(frozen=True)
class RecordedHandle:
    """A device handle of :class:`RecordedNvml`: where the real ``pynvml`` hands out an opaque
    handle, this one holds the device as recorded and the time into its file the handle was
    taken at (which utilisation sample it answers with)."""

    #: One entry of the recording's ``devices`` list, as nvidia-ml-py's answers were written down.
    device: JsonObject
    #: Seconds since the start of the recorded file the handle was taken from.
    within_s: float


class RecordedNvml:
    """Answers as the ``pynvml`` module does, from recorded ``*.nvml.json`` files.

    ``clock`` gives the virtual time in seconds: file ``k`` is the machine at
    second ``k`` (the last one stays), and within a file the utilisation is the
    sample taken closest before that time.
    """

    NVMLError = NVMLError
    nvmlMemory_v2 = 0x02000028  # noqa: N815 - pynvml's constant, same value
    NVML_ERROR_NOT_SUPPORTED = 3
    NVML_ERROR_FUNCTION_NOT_FOUND = 13

    def __init__(self, files: list[Path], clock: Any = lambda: 0.0):
        if not files:
            raise ValueError("RecordedNvml needs at least one file")
        self._files = files
        self._clock = clock
        self._initialised = 0

    def _check(self) -> None:
        if not self._initialised:
            raise NVMLError(1)

    def _now(self) -> tuple[JsonObject, float]:
        t = max(0.0, self._clock())
        k = min(len(self._files) - 1, int(t / RECORDED_INTERVAL_S + 1e-9))
        within = t - k * RECORDED_INTERVAL_S
        return json.loads(self._files[k].read_text()), within

    def nvmlInit(self) -> None:  # noqa: N802 - pynvml's names throughout
        self._initialised += 1

    def nvmlShutdown(self) -> None:  # noqa: N802
        self._check()
        self._initialised -= 1

    def nvmlSystemGetDriverVersion(self) -> str:  # noqa: N802
        self._check()
        return str(self._now()[0].get("driver", ""))

    def nvmlDeviceGetCount(self) -> int:  # noqa: N802
        self._check()
        return len(self._now()[0]["devices"])

    def nvmlDeviceGetHandleByIndex(self, index: int) -> RecordedHandle:  # noqa: N802
        self._check()
        data, within = self._now()
        devices = data["devices"]
        if not 0 <= index < len(devices):
            raise NVMLError(2)
        return RecordedHandle(devices[index], within)

    def nvmlDeviceGetMemoryInfo(self, handle: RecordedHandle,  # noqa: N802
                                version: int | None = None) -> Memory | MemoryV2:
        if not version:
            m = handle.device["memory_v1"]
            return Memory(total=int(m["total"]), free=int(m["free"]), used=int(m["used"]))
        if "memory_v2" not in handle.device:
            raise NVMLError(self.NVML_ERROR_FUNCTION_NOT_FOUND)
        m = handle.device["memory_v2"]
        return MemoryV2(version=version, total=int(m["total"]), reserved=int(m["reserved"]),
                        free=int(m["free"]), used=int(m["used"]))

    def nvmlDeviceGetUtilizationRates(self, handle: RecordedHandle) -> Utilization:  # noqa: N802
        samples = handle.device.get("utilization_samples") or []
        if not samples or handle.device.get("mig_mode", [0, 0])[0]:
            raise NVMLError(self.NVML_ERROR_NOT_SUPPORTED)
        k = min(len(samples) - 1, int(handle.within_s / UTILIZATION_INTERVAL_S + 1e-9))
        return Utilization(gpu=int(samples[k]["gpu"]), memory=int(samples[k]["memory"]))

    def nvmlDeviceGetComputeRunningProcesses(self, handle: RecordedHandle) -> list[ProcessInfo]:  # noqa: N802
        return [ProcessInfo(int(p["pid"]), None if p.get("usedGpuMemory") is None else int(p["usedGpuMemory"]))
                for p in handle.device.get("compute_processes", [])]

    def nvmlDeviceGetMigMode(self, device: RecordedHandle) -> list[int]:  # noqa: N802
        if "mig_mode" not in device.device:
            raise NVMLError(self.NVML_ERROR_NOT_SUPPORTED)
        return [int(v) for v in device.device["mig_mode"]]

    def nvmlDeviceGetUUID(self, handle: RecordedHandle) -> str:  # noqa: N802
        return str(handle.device["uuid"])

    def nvmlDeviceGetName(self, handle: RecordedHandle) -> str:  # noqa: N802
        return str(handle.device["name"])


class RecordedNvmlInventory(NvmlInventory):
    """Replays an NVML recording (see the module docstring) through the real NVML inventory."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        files = _nvml_files(self.path)
        if not files:
            raise UserError(f"{DOUBLE_ENV}={path}: expected a *.nvml.json file or a folder with "
                            "nvml.0.json (recorded NVML answers), found none")
        owners_file = (self.path if self.path.is_dir() else self.path.parent) / "ps-owners.txt"
        owners = read_owners(owners_file.read_text()) if owners_file.is_file() else None
        clock = _VirtualClock()
        super().__init__(RecordedNvml(files, clock), owner_of=owners.get if owners is not None else process_owner,
                         clock=clock, sleep=clock.sleep)
        self.source = f"recorded:{self.path}"


def open_recording(path: str | Path) -> SmiInventory | NvmlInventory:
    """The inventory replaying the recording at ``path`` (NVML or nvidia-smi, by its files)."""
    if is_nvml_recording(path):
        return RecordedNvmlInventory(path)
    return RecordedInventory(path)
