"""Which GPUs a run gets: pure accounting, no processes, no clock.

A :class:`GpuPool` holds the devices a sweep may use and what benchlab's own
runs have reserved on them. A run asks with a :class:`GpuRequest`:

- ``gpus=0``: no GPU. CPU-only runs are accounted elsewhere and never wait here;
  :meth:`GpuPool.acquire` grants them an empty placement at once.
- ``0 < gpus < 1``: a share of one device; 0.25 lets four runs share it.
  Shares on a device never add up past 1.
- ``gpus=k`` (a whole number): k devices to itself.
- ``gpu_memory`` (GiB, optional): the run also needs that much free memory on
  each of its devices, where free = total - memory held when the sweep
  started (the baseline) - memory reserved by benchlab's runs on it.

Devices held by foreign processes (``foreign_busy``) are never handed out
unless the user named them in ``--gpus``.

Choice of device: a share goes to the *fullest* device it still fits on (best
fit), so partly used devices fill up first and whole devices stay whole for
runs that need them; a whole-device run takes the lowest-indexed empty devices.
:func:`longest_first` orders the queue (longest expected first, unknown
durations at the front) and :meth:`GpuPool.fill` starts, in that order, every
run that fits now, letting short runs use what a blocked long one cannot.

Memory here is in MiB (integers, as nvidia-smi reports it); requests arrive in GiB.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Iterable, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import TYPE_CHECKING, Literal

from benchlab.errors import UserError

if TYPE_CHECKING:
    from benchlab.execute.gpus import DeviceState

MIB_PER_GIB = 1024
_ONE = Fraction(1)


def _share(gpus: float) -> Fraction:
    # Exact arithmetic: three runs of 1/3 must fill a device exactly, not overflow it by 1e-16.
    # A share too small to register still takes the smallest unit, never nothing.
    return max(Fraction(gpus).limit_denominator(1000), Fraction(1, 1000))


@dataclass(frozen=True)
class GpuDevice:
    """A device the pool may use. ``baseline_used_mib`` is memory held by others at the start."""

    index: int
    memory_total_mib: int
    baseline_used_mib: int = 0
    foreign_busy: bool = False
    named: bool = False
    #: What the driver keeps for itself (NVML memory info v2's ``reserved``): never ours to give.
    reserved_mib: int = 0

    @property
    def usable(self) -> bool:
        return self.named or not self.foreign_busy

    @property
    def capacity_mib(self) -> int:
        """Memory benchlab's runs may reserve: total less the driver's reserve and the baseline."""
        return self.memory_total_mib - self.reserved_mib - self.baseline_used_mib


@dataclass(frozen=True)
class GpuRequest:
    """What one run needs: ``gpus`` (0, a fraction below 1, or a whole number) and
    ``gpu_memory`` (GiB per device, optional)."""

    gpus: float = 0.0
    gpu_memory: float | None = None

    def __post_init__(self) -> None:
        if self.gpus < 0 or (self.gpus > 1 and self.gpus != int(self.gpus)):
            raise ValueError(
                f"gpus: expected 0, a fraction up to 1 or a whole number, got {self.gpus}"
            )
        if self.gpu_memory is not None and self.gpu_memory <= 0:
            raise ValueError(
                f"gpu_memory: expected a positive number of GiB, got {self.gpu_memory}"
            )

    @classmethod
    def of(cls, resources: object) -> GpuRequest:
        """The request of a spec's ``resources`` (anything with ``gpus`` and ``gpu_memory``)."""
        return cls(
            gpus=float(getattr(resources, "gpus", 0.0) or 0.0),
            gpu_memory=getattr(resources, "gpu_memory", None),
        )

    @property
    def devices(self) -> int:
        """How many devices the run spans (0 for CPU-only)."""
        return 0 if self.gpus == 0 else max(1, math.ceil(self.gpus))

    @property
    def share(self) -> Fraction:
        """The share of each of its devices the run takes."""
        return _ONE if self.gpus >= 1 else _share(self.gpus)

    @property
    def memory_mib(self) -> int:
        """Memory needed on each device, MiB (0 when not asked)."""
        return 0 if self.gpu_memory is None else math.ceil(self.gpu_memory * MIB_PER_GIB)


@dataclass(frozen=True)
class Placement:
    """The devices given to one run and what it holds on each."""

    devices: tuple[int, ...]
    share: Fraction = _ONE
    memory_mib: int = 0

    @property
    def cuda_visible_devices(self) -> str:
        return ",".join(str(i) for i in self.devices)

    def env(self) -> dict[str, str]:
        """Environment for the run's process. PCI_BUS_ID order makes CUDA's indices match
        nvidia-smi's (CUDA's default order, fastest first, may differ)."""
        return {
            "CUDA_VISIBLE_DEVICES": self.cuda_visible_devices,
            "CUDA_DEVICE_ORDER": "PCI_BUS_ID",
        }


@dataclass
class _Usage:
    device: GpuDevice
    share: Fraction = Fraction(0)
    memory_mib: int = 0

    @property
    def free_share(self) -> Fraction:
        return _ONE - self.share

    @property
    def free_memory_mib(self) -> int:
        return self.device.capacity_mib - self.memory_mib


@dataclass
class GpuPool:
    """Benchlab's reservations on a set of devices. Not thread-safe: one scheduler owns it."""

    devices: Sequence[GpuDevice]
    _usage: dict[int, _Usage] = field(init=False, repr=False)
    _held: dict[Hashable, Placement] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        seen = [d.index for d in self.devices]
        if len(set(seen)) != len(seen):
            raise ValueError(f"duplicate device indices: {seen}")
        self._usage = {d.index: _Usage(d) for d in self.devices if d.usable}
        self._held = {}
        self._blocked: set[int] = set()
        self.retired: dict[int, str] = {}

    @property
    def usable(self) -> list[int]:
        """Indices of the devices this pool may hand out."""
        return sorted(self._usage)

    def reserved(self, index: int) -> tuple[Fraction, int]:
        """(share, memory MiB) reserved by benchlab's runs on device ``index``."""
        u = self._usage[index]
        return u.share, u.memory_mib

    def device(self, index: int) -> GpuDevice:
        return self._usage[index].device

    def block(self, index: int) -> None:
        """Hand out nothing more on device ``index`` until :meth:`unblock` (e.g. while the
        memory of a run that ended drains)."""
        self._blocked.add(index)

    def unblock(self, index: int) -> None:
        self._blocked.discard(index)

    def retire(self, index: int, reason: str) -> None:
        """Stop using device ``index`` for the rest of the sweep (it holds nothing of ours)."""
        u = self._usage.get(index)
        if u is None:
            return
        if u.share or u.memory_mib:
            raise ValueError(f"GPU {index} still has runs on it; retire it once they end")
        del self._usage[index]
        self._blocked.discard(index)
        self.retired[index] = reason

    def why_never(self, request: GpuRequest) -> str | None:
        """Why ``request`` could not fit even on an empty pool, or None if it could.

        The executor should fail such a run at once instead of waiting forever.
        """
        n = request.devices
        if n == 0:
            return None
        big = [u for u in self._usage.values() if u.device.capacity_mib >= request.memory_mib]
        if len(self._usage) < n:
            retired = "".join(f"; GPU {i} taken out: {why}" for i, why in self.retired.items())
            return f"needs {n} GPU(s), only {len(self._usage)} usable ({self._describe()}{retired})"
        if len(big) < n:
            return (
                f"needs {request.gpu_memory:g} GiB free on {n} GPU(s); "
                f"{len(big)} usable GPU(s) have that much ({self._describe()})"
            )
        return None

    def _describe(self) -> str:
        if not self._usage:
            return "none usable"
        return "usable: " + ", ".join(
            f"{u.device.index} ({u.device.capacity_mib / MIB_PER_GIB:.0f} GiB free)"
            for u in self._usage.values()
        )

    def place(self, request: GpuRequest) -> Placement | None:
        """Where ``request`` would go now, without reserving; None if it does not fit now."""
        n = request.devices
        if n == 0:
            return Placement(devices=(), share=Fraction(0))
        need_mem = request.memory_mib
        if n == 1 and request.share < 1:
            fits = [
                u
                for u in self._usage.values()
                if u.free_share >= request.share and u.free_memory_mib >= need_mem
                and u.device.index not in self._blocked
            ]
            if not fits:
                return None
            # Best fit: the least spare share, then the least spare memory, then the lowest index.
            best = min(fits, key=lambda u: (u.free_share, u.free_memory_mib, u.device.index))
            return Placement((best.device.index,), request.share, need_mem)
        empty = [
            u.device.index
            for u in sorted(self._usage.values(), key=lambda u: u.device.index)
            if u.share == 0 and u.free_memory_mib >= need_mem and u.device.index not in self._blocked
        ]
        if len(empty) < n:
            return None
        return Placement(tuple(empty[:n]), _ONE, need_mem)

    def acquire(self, key: Hashable, request: GpuRequest) -> Placement | None:
        """Reserve devices for run ``key`` if ``request`` fits now (else None, nothing held)."""
        if key in self._held:
            raise ValueError(f"run {key!r} already holds GPUs {self._held[key].devices}")
        placement = self.place(request)
        if placement is None:
            return None
        for i in placement.devices:
            u = self._usage[i]
            u.share += placement.share
            u.memory_mib += placement.memory_mib
        self._held[key] = placement
        return placement

    def release(self, key: Hashable) -> Placement:
        """Give back what run ``key`` held (call when it finishes, however it ends)."""
        placement = self._held.pop(key)
        for i in placement.devices:
            u = self._usage[i]
            u.share -= placement.share
            u.memory_mib -= placement.memory_mib
        return placement

    def fill(
        self, queue: Iterable[tuple[Hashable, GpuRequest]]
    ) -> list[tuple[Hashable, Placement]]:
        """Acquire, in queue order, every request that fits now; return what was started.

        Runs that do not fit are skipped, not waited on, so a blocked whole-device
        run does not idle devices that smaller runs could use.
        """
        started = []
        for key, request in queue:
            placement = self.acquire(key, request)
            if placement is not None:
                started.append((key, placement))
        return started

    @property
    def holders(self) -> dict[Hashable, Placement]:
        return dict(self._held)


def longest_first(
    expected_s: Sequence[float | None], widths: Sequence[float] | None = None
) -> list[int]:
    """Positions of runs in the order to start them: unknown durations first, then longest first.

    ``expected_s[i]`` is run i's expected duration in seconds (None when unknown,
    e.g. the first time a config runs). Unknown goes first because it is most
    likely long (it has never been measured) and a long run started late sets the
    makespan; a short run started early costs almost nothing. Unknown runs keep
    submission order among themselves: ordering them wide first, with nothing known
    of their lengths, packs worse than submission order (simulated: 1.26 vs 1.21
    x the lower bound on average). Ties among known durations go to the wider run
    (``widths[i]``: GPUs requested), then to submission order.
    """
    w = widths if widths is not None else [0.0] * len(expected_s)

    def key(i: int) -> tuple[int, float, float, int]:
        e = expected_s[i]
        if e is None:
            return (0, 0.0, 0.0, i)
        return (1, -e, -w[i], i)

    return sorted(range(len(expected_s)), key=key)


# ------------------------------------------------------------------ --gpus


@dataclass(frozen=True)
class GpuSelection:
    """The parsed ``--gpus`` flag: ``auto`` (every free device), ``none``, or explicit indices."""

    mode: Literal["auto", "none", "list"]
    indices: tuple[int, ...] = ()


def parse_gpus(value: str) -> GpuSelection:
    """Parse ``--gpus auto|none|0,3,5``; raise UserError naming the flag on anything else."""
    text = value.strip().lower()
    if text in ("auto", ""):
        return GpuSelection("auto")
    if text in ("none", "cpu"):
        return GpuSelection("none")
    indices = []
    for part in text.split(","):
        part = part.strip()
        if not part.isdigit():
            raise UserError(
                f"--gpus {value}: expected auto, none, or comma-separated device indices "
                f"like 0,3,5; got {part!r}"
            )
        indices.append(int(part))
    if len(set(indices)) != len(indices):
        raise UserError(f"--gpus {value}: device index listed twice")
    return GpuSelection("list", tuple(indices))


def select_devices(selection: GpuSelection, states: Sequence[DeviceState],
                   visible: set[int] | None = None) -> list[GpuDevice]:
    """The pool's devices for a ``--gpus`` selection, from the inventory's verdicts.

    ``auto`` keeps the devices whose verdict is ``free``, that are not split into MIG
    instances and that ``CUDA_VISIBLE_DEVICES`` leaves visible (``visible``: their
    indices, None when it is not set; see :func:`benchlab.execute.gpus.visible_indices`).
    A list keeps exactly the named ones, flagged ``named`` so they are used even when
    foreign processes hold them (the user asked). Raises UserError for an index the
    machine does not have, one hidden by ``CUDA_VISIBLE_DEVICES``, or one in MIG mode.
    """
    if selection.mode == "none":
        return []
    by_index = {s.index: s for s in states}
    if selection.mode == "auto":
        chosen = [s for s in states if s.verdict == "free" and not s.mig
                  and (visible is None or s.index in visible)]
        named = False
    else:
        missing = [i for i in selection.indices if i not in by_index]
        if missing:
            have = ", ".join(str(i) for i in sorted(by_index)) or "none"
            raise UserError(f"--gpus: no GPU with index {missing[0]}; this machine has: {have}")
        hidden = [i for i in selection.indices if visible is not None and i not in visible]
        if hidden:
            shown = ", ".join(str(i) for i in sorted(visible or ())) or "none"
            raise UserError(f"--gpus: GPU {hidden[0]} is hidden by CUDA_VISIBLE_DEVICES in this "
                            f"environment (visible: {shown}); unset it or name a visible GPU")
        mig = [i for i in selection.indices if by_index[i].mig]
        if mig:
            raise UserError(f"--gpus: GPU {mig[0]} has MIG enabled; benchlab places runs on whole GPUs "
                            "and GPU shares, not on MIG instances. Name another GPU, or disable MIG "
                            f"(nvidia-smi -i {mig[0]} -mig 0) as an administrator")
        chosen, named = [by_index[i] for i in selection.indices], True
    return [
        GpuDevice(
            index=s.index,
            memory_total_mib=s.memory_total_mib,
            baseline_used_mib=s.memory_used_mib,
            foreign_busy=s.verdict != "free",
            named=named,
            reserved_mib=s.memory_reserved_mib or 0,
        )
        for s in chosen
    ]


def pool_for(flag: str, states: Sequence[DeviceState]) -> GpuPool:
    """The pool a sweep packs onto: ``--gpus`` value ``flag`` applied to the inventory's
    verdicts (``Inventory.sample``), taken once before the sweep launches anything."""
    return GpuPool(select_devices(parse_gpus(flag), states))
