"""What runs do with their GPUs: one sampler per sweep, reading the inventory about once a second.

While at least one run holds a GPU, a thread reads every device (NVML, or what
stands in for it) each ``interval_s`` and credits each running attempt with

- the utilisation of its devices (mean over its devices at each reading; the
  attempt's mean and max over its readings), and
- the memory its *own* processes hold on them: those the driver lists whose
  process group is the attempt's (the local backend starts each attempt in a
  group of its own), so a neighbour sharing the device is not counted.

It reads nothing while no run holds a GPU, and keeps its own CPU time
(``cpu_s``), which ``bench/gpu_sampler.py`` reports: the goal is at most 1% of
one core. The sweep also asks it for the devices' mean utilisation while runs
held them (:attr:`GpuSampler.mean_utilization`), for its closing line.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass

from benchlab.execute.gpus import DeviceReading, Inventory
from benchlab.ledger import GpuUse

INTERVAL_S = 1.0


def _pgid(pid: int) -> int | None:
    # /proc/<pid>/stat field 5; one small read, cheaper than psutil per process per second.
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            return int(fh.read().rsplit(b")", 1)[1].split()[2])
    except (OSError, IndexError, ValueError):
        return None


@dataclass
class _Tally:
    devices: tuple[int, ...]
    pgid: int
    util_sum: float = 0.0
    util_n: int = 0
    util_max: float | None = None
    peak_mib: int | None = None


class GpuSampler:
    """Samples ``inventory`` every ``interval_s`` seconds on a thread of its own while attempts
    are tracked. ``track`` an attempt when it starts, ``finish`` it when it ends."""

    def __init__(self, inventory: Inventory, interval_s: float = INTERVAL_S):
        self.inventory = inventory
        self.interval_s = interval_s
        self.readings = 0  # how many times it read the devices
        self.cpu_s = 0.0  # CPU time its thread spent
        self._lock = threading.Lock()
        self._tallies: dict[int, _Tally] = {}
        self._device_util_sum = 0.0
        self._device_util_n = 0
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> GpuSampler:
        self._thread = threading.Thread(target=self._loop, daemon=True, name="benchlab-gpu-sampler")
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout=5 * self.interval_s + 5)

    def track(self, key: int, devices: list[int], pgid: int) -> None:
        """Start crediting attempt ``key`` (its devices, its process group)."""
        with self._lock:
            self._tallies[key] = _Tally(tuple(devices), pgid)
        self._wake.set()

    def finish(self, key: int) -> GpuUse | None:
        """Stop tracking ``key``; what it did with its GPUs (None: never sampled, or untracked)."""
        with self._lock:
            tally = self._tallies.pop(key, None)
        if tally is None or (not tally.util_n and tally.peak_mib is None):
            return None
        mean = round(tally.util_sum / tally.util_n, 1) if tally.util_n else None
        return GpuUse(util_mean=mean, util_max=tally.util_max, mem_peak_mib=tally.peak_mib)

    @property
    def mean_utilization(self) -> float | None:
        """Mean utilisation (percent) of the devices that runs held, over the readings; None if none."""
        with self._lock:
            return self._device_util_sum / self._device_util_n if self._device_util_n else None

    def _loop(self) -> None:
        while not self._stop.is_set():
            with self._lock:
                idle = not self._tallies
            if idle:
                # Nothing to sample: sleep until an attempt is tracked (or the sweep ends), then
                # give it an interval to start before the first reading.
                self._wake.wait()
                self._wake.clear()
                self._stop.wait(self.interval_s)
                continue
            t0 = time.thread_time()
            try:
                self.sample_once()
            except Exception:  # noqa: BLE001 - a failed reading is skipped, the next one may work
                pass
            self.cpu_s += time.thread_time() - t0
            self._stop.wait(self.interval_s)

    def sample_once(self) -> None:
        """One reading, credited to every tracked attempt (the thread calls it; so may tests)."""
        readings = {r.index: r for r in self.inventory.read()}
        self.readings += 1
        groups: dict[int, int | None] = {}
        with self._lock:
            tallies = list(self._tallies.values())
        held: set[int] = set()
        for tally in tallies:
            devs = [readings[i] for i in tally.devices if i in readings]
            utils = [r.utilization_pct for r in devs if r.utilization_pct is not None]
            if utils:
                now = sum(utils) / len(utils)
                tally.util_sum += now
                tally.util_n += 1
                tally.util_max = now if tally.util_max is None else max(tally.util_max, now)
            own = _own_memory(devs, tally.pgid, groups)
            if own is not None:
                tally.peak_mib = max(own, tally.peak_mib or 0)
            held.update(r.index for r in devs)
        utils_now = [float(u) for u in (readings[i].utilization_pct for i in held) if u is not None]
        with self._lock:
            self._device_util_sum += sum(utils_now)
            self._device_util_n += len(utils_now)


def _own_memory(devices: list[DeviceReading], pgid: int, groups: dict[int, int | None]) -> int | None:
    """MiB the processes of group ``pgid`` hold on ``devices``; None when the driver lists none of them
    (or hides their memory)."""
    total: int | None = None
    for r in devices:
        for p in r.processes:
            if p.pid not in groups:
                groups[p.pid] = _pgid(p.pid)
            if groups[p.pid] == pgid and p.used_memory_mib is not None:
                total = (total or 0) + p.used_memory_mib
    return total
