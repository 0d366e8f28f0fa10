"""GPU inventory: what devices this machine has, and who is using them.

Three implementations answer the same small :class:`Inventory` protocol:

- :class:`NvmlInventory` asks the driver through NVML (``pynvml``, from the
  ``gpu`` extra, package ``nvidia-ml-py``);
- :class:`SmiInventory` parses ``nvidia-smi --query-gpu=... --format=csv,noheader,nounits``
  when NVML cannot be loaded;
- :class:`benchlab.execute.gpu_double.RecordedInventory` replays recorded
  ``nvidia-smi`` output, for machines without a GPU (tests, CI, docs).

:func:`open_inventory` picks one. A single reading cannot tell a zombie from a
job between two bursts of work, so :meth:`Inventory.sample` reads several
times over a window and :func:`classify` gives each device a verdict:

- ``free``: no compute process and no more memory held than the driver reserves
  for itself (within :func:`empty_margin_mib`);
- ``busy``: memory held and the device did work at some point in the window;
- ``idle-held``: memory held but 0% utilisation in every reading: a likely
  zombie. benchlab reports its pids and owner; ``benchlab gpus --reclaim`` frees
  the caller's own, never anyone else's.

Memory is in MiB (as ``nvidia-smi`` prints it), utilisation in percent.
``memory_used_mib`` never counts the memory the driver reserves for itself:
NVML's memory info v2 reports that reserve apart (an idle H100 80GB HBM3 on
driver 580: reserved 480 MiB, used 0); where only v1 (or ``nvidia-smi``) is
there, the smallest reading a device gives with no compute process, when it lies
within the empty margin, is taken as its reserve and subtracted.
"""

from __future__ import annotations

import abc
import dataclasses
import math
import os
import shutil
import subprocess
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import asdict, dataclass
from typing import Any, Literal, Protocol, runtime_checkable

from benchlab.errors import BenchlabError
from benchlab.json_types import JsonObject

Verdict = Literal["free", "busy", "idle-held"]

#: A device with no compute process counts as empty while it holds, beyond the driver's reserve,
#: at most this share of its memory. It scales with the device (1631 MiB on an 80 GB H100, 204
#: MiB on a 10 GB MIG-sized board), where a fixed figure is too tight for one and too loose for
#: the other. The same margin is what a device must fall back to before the local backend hands
#: it out again (:func:`benchlab.execute.local.LocalBackend`), so the two can never disagree.
EMPTY_SHARE = 0.02


def empty_margin_mib(memory_total_mib: int) -> int:
    """Memory (MiB) a device may hold beyond its driver's reserve and still count as empty."""
    return max(1, math.ceil(memory_total_mib * EMPTY_SHARE))


GPU_QUERY = "index,uuid,name,memory.total,memory.used,utilization.gpu"
APPS_QUERY = "gpu_uuid,pid,used_memory"
SMI_GPU_ARGS = ("nvidia-smi", f"--query-gpu={GPU_QUERY}", "--format=csv,noheader,nounits")
SMI_APPS_ARGS = (
    "nvidia-smi",
    f"--query-compute-apps={APPS_QUERY}",
    "--format=csv,noheader,nounits",
)

#: Environment variable naming a recorded-readings folder that replaces the real inventory.
DOUBLE_ENV = "BENCHLAB_GPU_DOUBLE"


@dataclass(frozen=True)
class GpuProcess:
    """A compute process on a device. ``used_memory_mib`` is None where the driver hides it."""

    pid: int
    user: str | None
    used_memory_mib: int | None


@dataclass(frozen=True)
class DeviceReading:
    """One instant's view of one device. ``utilization_pct`` is None when not reported."""

    index: int
    uuid: str
    name: str
    memory_total_mib: int
    memory_used_mib: int
    utilization_pct: int | None
    processes: tuple[GpuProcess, ...] = ()
    #: Memory the driver keeps for itself, not counted in ``memory_used_mib`` (None: unknown).
    memory_reserved_mib: int | None = None
    #: MIG mode is on: the device is split into instances benchlab does not place runs on.
    mig: bool = False


@dataclass(frozen=True)
class DeviceState:
    """A device's verdict over a sampling window.

    ``memory_used_mib`` is the largest reading in the window (what a new run must
    leave room for); ``max_utilization_pct`` is None when no reading reported it;
    ``samples`` is how many readings the verdict rests on.
    """

    index: int
    uuid: str
    name: str
    memory_total_mib: int
    memory_used_mib: int
    max_utilization_pct: int | None
    processes: tuple[GpuProcess, ...]
    verdict: Verdict
    samples: int
    memory_reserved_mib: int | None = None
    mig: bool = False

    @property
    def memory_free_mib(self) -> int:
        return max(0, self.memory_total_mib - (self.memory_reserved_mib or 0) - self.memory_used_mib)

    @property
    def kill_hint(self) -> str | None:
        """The command the user may run to free an idle-held device; benchlab never runs it."""
        if self.verdict != "idle-held" or not self.processes:
            return None
        return "kill " + " ".join(str(p.pid) for p in self.processes)

    def to_json(self) -> JsonObject:
        """The reading as ``benchlab gpus --json`` prints it: its fields, the free memory and the
        kill hint (the printed layout is the command's contract with scripts)."""
        data = asdict(self)
        data["processes"] = [asdict(p) for p in self.processes]
        data["memory_free_mib"] = self.memory_free_mib
        data["hint"] = self.kill_hint
        return data


@runtime_checkable
class Inventory(Protocol):
    """What the executor and `benchlab gpus` need to know about the GPUs."""

    #: Where the readings come from: "nvml", "nvidia-smi", "recorded:<dir>" or "none".
    source: str

    def read(self) -> list[DeviceReading]:
        """One reading of every device, ordered by index."""
        ...

    def sample(self, window_s: float) -> list[DeviceState]:
        """Read every device repeatedly over ``window_s`` seconds and classify each."""
        ...


def classify(readings: list[DeviceReading]) -> DeviceState:
    """The verdict on one device from its readings over a window (oldest first).

    A device with any compute process, or more memory held beyond the driver's reserve
    than :func:`empty_margin_mib` allows, is occupied. Occupied and working (utilisation above 0 in some reading, or not
    reported at all, which we cannot call idle) is ``busy``; occupied with 0% in
    every reading is ``idle-held``. Memory held with no visible process is still
    occupied: in a container, other containers' processes are invisible.
    """
    if not readings:
        raise ValueError("classify needs at least one reading")
    last = readings[-1]
    used = max(r.memory_used_mib for r in readings)
    utils = [r.utilization_pct for r in readings]
    known = [u for u in utils if u is not None]
    max_util = max(known) if known else None
    # Keep every pid seen in the window; the latest reading's figures win.
    procs: dict[int, GpuProcess] = {}
    for r in readings:
        for p in r.processes:
            procs[p.pid] = p
    occupied = bool(procs) or used > empty_margin_mib(last.memory_total_mib)
    verdict: Verdict
    if not occupied:
        verdict = "free"
    elif None in utils or (max_util or 0) > 0:
        verdict = "busy"
    else:
        verdict = "idle-held"
    return DeviceState(
        index=last.index,
        uuid=last.uuid,
        name=last.name,
        memory_total_mib=last.memory_total_mib,
        memory_used_mib=used,
        max_utilization_pct=max_util,
        processes=tuple(sorted(procs.values(), key=lambda p: p.pid)),
        verdict=verdict,
        samples=len(readings),
        memory_reserved_mib=last.memory_reserved_mib,
        mig=any(r.mig for r in readings),
    )


def classify_all(series: Iterable[list[DeviceReading]]) -> list[DeviceState]:
    """Classify every device from a sequence of whole-machine readings (oldest first)."""
    by_uuid: dict[str, list[DeviceReading]] = {}
    for reading in series:
        for dev in reading:
            by_uuid.setdefault(dev.uuid, []).append(dev)
    return sorted((classify(rs) for rs in by_uuid.values()), key=lambda s: s.index)


def process_owner(pid: int) -> str | None:
    """The user name owning ``pid``, or None when the process is not visible from here."""
    import psutil

    try:
        return str(psutil.Process(pid).username())
    except (psutil.Error, KeyError, OSError):
        # KeyError: a uid with no passwd entry (common in containers).
        return None


class _Sampler(abc.ABC):
    """Shared sampling loop; ``clock`` and ``sleep`` are injected so tests never wait.

    It also learns each device's reserve where the source does not report it (see
    the module docstring): the baseline lives as long as the inventory.
    """

    interval_s: float = 0.5

    def __init__(
        self,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self._clock = clock
        self._sleep = sleep
        self._baseline: dict[str, int] = {}

    @abc.abstractmethod
    def read_raw(self) -> list[DeviceReading]:
        """One reading of every device as the source gives it (each inventory reads its own)."""

    def read(self) -> list[DeviceReading]:
        """One reading of every device, ``memory_used_mib`` net of the driver's reserve."""
        return [self._net_of_reserve(r) for r in self.read_raw()]

    def _net_of_reserve(self, r: DeviceReading) -> DeviceReading:
        if r.memory_reserved_mib is not None:
            return r  # the driver said (NVML memory info v2)
        if not r.processes and r.memory_used_mib <= empty_margin_mib(r.memory_total_mib):
            # Memory held with no compute process and within the margin: the driver's own.
            # Above the margin it may be another container's job, never a reserve.
            self._baseline[r.uuid] = min(self._baseline.get(r.uuid, r.memory_used_mib), r.memory_used_mib)
        base = self._baseline.get(r.uuid)
        if base is None:
            return r
        return dataclasses.replace(r, memory_used_mib=max(0, r.memory_used_mib - base),
                                   memory_reserved_mib=base)

    def sample(self, window_s: float) -> list[DeviceState]:
        """Read now, then every ``interval_s`` until ``window_s`` has passed (at least once)."""
        series = [self.read()]
        deadline = self._clock() + max(0.0, window_s)
        while self._clock() + 1e-9 < deadline:
            self._sleep(min(self.interval_s, deadline - self._clock()))
            series.append(self.read())
        return classify_all(series)


def visible_indices(states: Iterable[DeviceState | DeviceReading],
                    env: Mapping[str, str] | None = None) -> set[int] | None:
    """The indices of the devices ``CUDA_VISIBLE_DEVICES`` leaves visible; None when it is unset.

    NVML and ``nvidia-smi`` ignore the variable and list every device; CUDA programs
    see only these. Entries are read as CUDA reads them: a number is a device index
    (in PCI bus order, nvidia-smi's, which benchlab also sets for its runs), ``GPU-...``
    a UUID or a unique prefix of one; the first entry naming no device ends the list
    (so ``-1`` hides them all). A ``MIG-...`` entry raises :class:`UserError`: benchlab
    does not place runs on MIG instances.
    """
    from benchlab.errors import UserError

    env = os.environ if env is None else env
    raw = env.get("CUDA_VISIBLE_DEVICES")
    if raw is None:
        return None
    states = list(states)
    indices = {s.index for s in states}
    out: set[int] = set()
    for entry in (e.strip() for e in raw.split(",")):
        if entry.upper().startswith("MIG-"):
            raise UserError(f"CUDA_VISIBLE_DEVICES={raw}: {entry} is a MIG instance; benchlab places runs "
                            "on whole GPUs and GPU shares, not on MIG instances. Unset "
                            "CUDA_VISIBLE_DEVICES (and use --gpus), or run with --gpus none and "
                            "resources.gpus: 0 to leave the instance to your command")
        if entry.isdigit() and int(entry) in indices:
            out.add(int(entry))
            continue
        match = [s.index for s in states if entry and s.uuid.startswith(entry)]
        if len(match) != 1:
            break  # as CUDA: an entry naming no device (or several) hides the rest
        out.add(match[0])
    return out


# ---------------------------------------------------------------- nvidia-smi


def _cell(text: str) -> str | None:
    """A CSV cell without padding and units; None for nvidia-smi's "not available" forms."""
    value = text.strip()
    if not value or value.startswith("[") or value in ("N/A", "Not Supported"):
        return None  # "[N/A]", "[Not Supported]", "[Insufficient Permissions]", ...
    for unit in (" MiB", "MiB", " %", "%"):
        if value.endswith(unit):
            return value[: -len(unit)].strip()
    return value


def _int(text: str) -> int | None:
    value = _cell(text)
    return None if value is None else int(float(value))


def _rows(text: str) -> list[list[str]]:
    # Names never hold commas, so a plain split is what nvidia-smi's CSV needs.
    rows = []
    for line in text.splitlines():
        if not line.strip() or line.lstrip().startswith("No ") or "," not in line:
            continue  # blank, "No running processes found", "No devices were found"
        rows.append([c.strip() for c in line.split(",")])
    return rows


def _header(line: str) -> list[str] | None:
    """The column names of a ``--format=csv`` header line (units dropped), or None for a data row."""
    cells = [c.strip() for c in line.split(",")]
    if not cells or not cells[0] or cells[0][0].isdigit() or cells[0].startswith("GPU-"):
        return None
    return [c.split(" [")[0].strip() for c in cells]


def _named_rows(text: str) -> tuple[list[str] | None, list[list[str]]]:
    lines = [ln for ln in text.splitlines() if ln.strip()]
    names = _header(lines[0]) if lines else None
    return names, _rows("\n".join(lines[1:] if names else lines))


def _mig_on(value: str | None) -> bool:
    return (value or "").strip().lower() == "enabled"


def parse_smi(
    gpu_csv: str,
    apps_csv: str,
    owner_of: Callable[[int], str | None] = process_owner,
) -> list[DeviceReading]:
    """Readings from the output of the two queries :data:`SMI_GPU_ARGS` and :data:`SMI_APPS_ARGS`.

    Accepts ``--format=csv,noheader,nounits`` output, and also tolerates units
    (``81920 MiB``, ``35 %``) and ``[N/A]`` cells. Output with a header line
    (``--format=csv``) is read by column name, in any order and with more columns,
    and then ``memory.reserved`` and ``mig.mode.current`` are used where present.
    Raises ValueError on a row that is not shaped like the query.
    """
    procs: dict[str, list[GpuProcess]] = {}
    names, rows = _named_rows(apps_csv)
    for row in rows:
        if names:
            cells = dict(zip(names, row, strict=False))
            mem_key = "used_gpu_memory" if "used_gpu_memory" in cells else "used_memory"
            if not {"gpu_uuid", "pid", mem_key} <= cells.keys():
                raise ValueError(f"expected columns gpu_uuid, pid, used_memory; got {names!r}")
            row = [cells["gpu_uuid"], cells["pid"], cells[mem_key]]
        if len(row) != 3:
            raise ValueError(f"expected 3 fields ({APPS_QUERY}), got {len(row)}: {row!r}")
        uuid, pid_s, mem_s = row
        pid = _int(pid_s)
        if pid is None:
            continue
        procs.setdefault(uuid, []).append(GpuProcess(pid, owner_of(pid), _int(mem_s)))
    readings = []
    names, rows = _named_rows(gpu_csv)
    for row in rows:
        extra: dict[str, str] = {}
        if names:
            extra = dict(zip(names, row, strict=False))
            wanted = GPU_QUERY.split(",")
            if not set(wanted) <= extra.keys():
                raise ValueError(f"expected columns {GPU_QUERY}; got {names!r}")
            row = [extra[k] for k in wanted]
        if len(row) != 6:
            raise ValueError(f"expected 6 fields ({GPU_QUERY}), got {len(row)}: {row!r}")
        index, uuid, name, total, used, util = row
        reserved = _int(extra["memory.reserved"]) if "memory.reserved" in extra else None
        readings.append(
            DeviceReading(
                index=int(index),
                uuid=uuid,
                name=name,
                memory_total_mib=_int(total) or 0,
                memory_used_mib=_int(used) or 0,
                utilization_pct=_int(util),
                processes=tuple(procs.get(uuid, ())),
                memory_reserved_mib=reserved,
                mig=_mig_on(extra.get("mig.mode.current")),
            )
        )
    return sorted(readings, key=lambda r: r.index)


class SmiUnavailable(BenchlabError):
    """nvidia-smi is missing or failed; the message is the reason shown to the user."""


def run_smi(args: tuple[str, ...]) -> str:
    """Run one nvidia-smi query and return its stdout; raise SmiUnavailable with the reason."""
    exe = shutil.which(args[0])
    if exe is None:
        raise SmiUnavailable("not found")
    try:
        done = subprocess.run(
            [exe, *args[1:]], capture_output=True, text=True, timeout=30, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise SmiUnavailable(str(exc)) from exc
    if done.returncode != 0:
        first = (done.stdout + done.stderr).strip().splitlines()
        raise SmiUnavailable(f"exit {done.returncode}: {first[0] if first else 'no output'}")
    return done.stdout


class SmiInventory(_Sampler):
    """Readings from the ``nvidia-smi`` command. ``runner`` maps the query's argv to its stdout."""

    source = "nvidia-smi"

    def __init__(
        self,
        runner: Callable[[tuple[str, ...]], str] = run_smi,
        owner_of: Callable[[int], str | None] = process_owner,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        super().__init__(clock, sleep)
        self._runner = runner
        self._owner_of = owner_of

    def read_raw(self) -> list[DeviceReading]:
        gpu_csv = self._runner(SMI_GPU_ARGS)
        apps_csv = self._runner(SMI_APPS_ARGS)
        return parse_smi(gpu_csv, apps_csv, self._owner_of)


# ---------------------------------------------------------------------- NVML


class NvmlInventory(_Sampler):
    """Readings from NVML. ``nvml`` is the ``pynvml`` module (or an object shaped like it)."""

    source = "nvml"

    def __init__(
        self,
        nvml: Any = None,
        owner_of: Callable[[int], str | None] = process_owner,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        super().__init__(clock, sleep)
        if nvml is None:
            import pynvml

            nvml = pynvml
        self._nvml = nvml
        self._owner_of = owner_of
        self._has_v2: bool | None = None
        nvml.nvmlInit()  # raises nvml.NVMLError with the driver's reason

    def close(self) -> None:
        self._nvml.nvmlShutdown()

    def _memory(self, h: Any) -> tuple[int, int, int | None]:
        """(total, used, reserved) in bytes; reserved None where the driver has no memory info v2."""
        nv = self._nvml
        version = getattr(nv, "nvmlMemory_v2", None)  # nvidia-ml-py releases before 11.510 lack it
        if version is not None and self._has_v2 is not False:
            try:
                m = nv.nvmlDeviceGetMemoryInfo(h, version=version)
            except nv.NVMLError:
                self._has_v2 = False  # "Function Not Found": a driver older than 510
            else:
                self._has_v2 = True
                return int(m.total), int(m.used), int(m.reserved)
        m = nv.nvmlDeviceGetMemoryInfo(h)
        return int(m.total), int(m.used), None

    def _mig(self, h: Any) -> bool:
        nv = self._nvml
        try:
            current, _pending = nv.nvmlDeviceGetMigMode(h)
        except (nv.NVMLError, AttributeError):
            return False  # "Not Supported": a board without MIG
        return bool(current)

    def read_raw(self) -> list[DeviceReading]:
        nv = self._nvml
        readings = []
        for i in range(nv.nvmlDeviceGetCount()):
            h = nv.nvmlDeviceGetHandleByIndex(i)
            total, used, reserved = self._memory(h)
            try:
                util: int | None = int(nv.nvmlDeviceGetUtilizationRates(h).gpu)
            except nv.NVMLError:
                util = None  # "Not Supported" on MIG slices and some boards
            try:
                raw = nv.nvmlDeviceGetComputeRunningProcesses(h)
            except nv.NVMLError:
                raw = []
            procs = tuple(
                GpuProcess(
                    int(p.pid),
                    self._owner_of(int(p.pid)),
                    None if p.usedGpuMemory is None else _mib(int(p.usedGpuMemory)),
                )
                for p in raw
            )
            readings.append(
                DeviceReading(
                    index=i,
                    uuid=_text(nv.nvmlDeviceGetUUID(h)),
                    name=_text(nv.nvmlDeviceGetName(h)),
                    memory_total_mib=_mib(total),
                    memory_used_mib=_mib(used),
                    utilization_pct=util,
                    processes=procs,
                    memory_reserved_mib=None if reserved is None else _mib(reserved),
                    mig=self._mig(h),
                )
            )
        return readings


def _mib(n_bytes: int) -> int:
    # Rounded to the nearest MiB, as nvidia-smi prints it (10553720832 B: "10065 MiB", not 10064).
    return (n_bytes + 2**19) // 2**20


def _text(value: str | bytes) -> str:
    # Older nvidia-ml-py releases return bytes, newer ones str.
    return value.decode() if isinstance(value, bytes) else str(value)


# ------------------------------------------------------------------ choosing


@dataclass
class NoInventory:
    """No GPU could be found; ``reason`` says why, for the one line shown to the user."""

    reason: str
    source: str = "none"

    def read(self) -> list[DeviceReading]:
        return []

    def sample(self, window_s: float) -> list[DeviceState]:
        return []


def _nvml_reason(exc: BaseException) -> str:
    if isinstance(exc, ImportError):
        from benchlab.names.extras import install_hint

        return f"nvidia-ml-py is not installed ({install_hint('gpu')})"
    return str(exc) or type(exc).__name__


def open_inventory(
    env: Mapping[str, str] | None = None,
    nvml: Any = None,
    runner: Callable[[tuple[str, ...]], str] = run_smi,
) -> SmiInventory | NvmlInventory | NoInventory:
    """The best inventory available here: the recorded double if ``BENCHLAB_GPU_DOUBLE``
    names a folder, else NVML, else nvidia-smi, else a :class:`NoInventory` whose
    ``reason`` reads ``no NVIDIA GPU found (NVML: <why>; nvidia-smi: <why>)``.
    """
    env = os.environ if env is None else env
    recorded = env.get(DOUBLE_ENV, "")
    if recorded:
        from benchlab.execute.gpu_double import open_recording

        return open_recording(recorded)
    try:
        return NvmlInventory(nvml)
    except Exception as exc:  # ImportError, NVMLError_LibraryNotFound, DriverNotLoaded, ...
        nvml_reason = _nvml_reason(exc)
    try:
        runner(SMI_GPU_ARGS)
    except SmiUnavailable as exc:
        return NoInventory(f"no NVIDIA GPU found (NVML: {nvml_reason}; nvidia-smi: {exc})")
    return SmiInventory(runner)
