"""A GPU inventory that replays recorded ``nvidia-smi`` output: GPU work testable without a GPU.

Set ``BENCHLAB_GPU_DOUBLE=/path/to/recording`` and every part of benchlab that
asks for GPUs (`benchlab gpus`, the local executor) reads the recording instead
of NVML. A recording is a folder of files, exactly as the commands print them
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

from pathlib import Path

from benchlab.errors import UserError
from benchlab.execute.gpus import DOUBLE_ENV, DeviceReading, SmiInventory, parse_smi

RECORDED_INTERVAL_S = 1.0


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

    def read(self) -> list[DeviceReading]:
        k = min(self._n - 1, int(self._virtual.now / self.interval_s + 1e-9))
        apps = self.folder / f"query-compute-apps.{k}.csv"
        return parse_smi(
            (self.folder / f"query-gpu.{k}.csv").read_text(),
            apps.read_text() if apps.is_file() else "",
            self._owner_of,
        )
