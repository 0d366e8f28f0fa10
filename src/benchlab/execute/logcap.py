"""A cap on the disk a run's log takes: its first and last halves kept, what lies between dropped
and counted (``log_cap_mb`` in the spec, 64 MiB unless it says otherwise; 0 for none).

A run writes its log itself (its stdout and stderr are the file, opened for appending): nothing
stands between the run and the file that could block it, slow it, or die with the sweep and take
the run with it (a pipe to a reader would). The cap is kept from outside: a thread
looks at each running log's size every few hundredths of a second and, once the log is past its
cap, frees the blocks between its head and its tail with ``fallocate(PUNCH_HOLE)`` (the run's next
write still lands at the end; the freed middle reads as zeros). So the disk a log takes is bounded
by the cap plus what the run writes between two looks, whatever it prints. When the attempt ends,
the log is rewritten as head, one line saying how many bytes were dropped, and tail.

On a file system that cannot punch holes (some network file systems) the log is cut only when the
attempt ends, and a warning says so once.
"""

from __future__ import annotations

import ctypes
import errno
import os
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

#: The cap when the spec names none, in MiB.
DEFAULT_LOG_CAP_MB: Final = 64.0
#: How often the running logs' sizes are looked at, in seconds.
LOOK_S: Final = 0.02
_FALLOC_FL_KEEP_SIZE: Final = 0x01
_FALLOC_FL_PUNCH_HOLE: Final = 0x02
#: Holes are punched in whole blocks, at least this much at a time.
_STEP: Final = 1 << 16


def cap_bytes(log_cap_mb: float | None) -> int | None:
    """The cap of a spec's ``log_cap_mb`` in bytes; None for no cap (0)."""
    mb = DEFAULT_LOG_CAP_MB if log_cap_mb is None else log_cap_mb
    return int(mb * 2**20) if mb > 0 else None


_FALLOCATE: list[Any] = []  # libc's fallocate, looked up once


def _punch(fd: int, offset: int, length: int) -> int:
    """Free ``length`` bytes of ``fd`` at ``offset``; 0, or the errno of the refusal."""
    if not _FALLOCATE:
        try:
            fallocate = ctypes.CDLL(None, use_errno=True).fallocate
            fallocate.argtypes = (ctypes.c_int, ctypes.c_int, ctypes.c_longlong, ctypes.c_longlong)
        except (OSError, AttributeError):  # no such call (not Linux)
            fallocate = None
        _FALLOCATE.append(fallocate)
    fallocate = _FALLOCATE[0]
    if fallocate is None:
        return errno.EOPNOTSUPP
    if fallocate(fd, _FALLOC_FL_PUNCH_HOLE | _FALLOC_FL_KEEP_SIZE, offset, length) == 0:
        return 0
    return ctypes.get_errno() or errno.EIO


@dataclass
class _Log:
    hole_start: int  # the first byte freed (the head's end, rounded up to a block)
    hole_end: int  # one past the last byte freed so far (== hole_start: none yet)
    can_punch: bool = True


class LogCap:
    """Keeps each tracked log within ``cap`` bytes on disk: :meth:`track` at an attempt's start,
    :meth:`finish` at its end (which writes the log's final form and returns the bytes dropped)."""

    def __init__(self, cap: int, look_s: float = LOOK_S):
        self.cap = cap
        self.head = cap // 2
        self.tail = cap - self.head
        self.look_s = look_s
        self._logs: dict[str, _Log] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.warnings: list[str] = []

    def track(self, path: Path | str) -> None:
        """Keep ``path`` (a running attempt's log) within the cap from now on."""
        try:
            block = os.statvfs(os.path.dirname(str(path)) or ".").f_bsize or 4096
        except OSError:
            block = 4096
        start = -(-self.head // block) * block
        with self._lock:
            self._logs[str(path)] = _Log(start, start)
            if self._thread is None:
                self._thread = threading.Thread(target=self._loop, daemon=True, name="log-cap")
                self._thread.start()

    def _loop(self) -> None:
        while not self._stop.wait(self.look_s):
            with self._lock:
                items = list(self._logs.items())
            for path, log in items:
                self._trim(path, log)

    def _trim(self, path: str, log: _Log) -> None:
        if not log.can_punch:
            return
        try:
            size = os.stat(path).st_size
        except OSError:
            return
        end = ((size - self.tail) // _STEP) * _STEP
        if end - log.hole_end < _STEP or end <= log.hole_start:
            return
        try:
            fd = os.open(path, os.O_WRONLY)
        except OSError:
            return
        try:
            failed = _punch(fd, log.hole_end, end - log.hole_end)
        finally:
            os.close(fd)
        if failed:
            log.can_punch = False
            self.warnings.append(f"the file system of {path} cannot free part of a file "
                                 f"({os.strerror(failed)}): a log is cut to its cap only when its run ends")
            return
        log.hole_end = end

    def finish(self, path: Path | str) -> int:
        """Stop tracking ``path``, its writer gone, and write it as head, a line saying how many
        bytes were dropped, and tail; the bytes dropped (0: the log was within its cap)."""
        with self._lock:
            log = self._logs.pop(str(path), None)
        return cut(path, self.cap, log.hole_end if log is not None else 0)

    def close(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=1.0)


def cut(path: Path | str, cap: int, freed_to: int = 0) -> int:
    """Write the log at ``path`` as its first ``cap // 2`` bytes, a line saying how many bytes were
    dropped, and its last ``cap - cap // 2`` bytes (none of them from before ``freed_to``, where the
    file was freed); the bytes dropped (0 and nothing written: the log was within ``cap``)."""
    path = str(path)
    try:
        size = os.stat(path).st_size
    except OSError:
        return 0
    if size <= cap:
        return 0
    head = cap // 2
    tail_start = max(size - (cap - head), freed_to, head)
    dropped = tail_start - head
    line = (f"\n[benchlab: {dropped} bytes of this log were dropped here: it grew past its cap of "
            f"{cap} bytes (log_cap_mb), so its first {head} and last {size - tail_start} bytes are kept]\n")
    tmp = path + ".cut.tmp"
    try:
        with open(path, "rb") as src, open(tmp, "wb") as out:
            out.write(src.read(head))
            out.write(line.encode())
            src.seek(tail_start)
            while chunk := src.read(1 << 20):
                out.write(chunk)
        os.replace(tmp, path)
    except OSError:
        # No room for a copy (a full disk): the tail is read into memory, the file cut to its head
        # (which frees the space) and the line and the tail appended.
        try:
            os.unlink(tmp)
        except OSError:
            pass
        with open(path, "r+b") as fh:
            fh.seek(tail_start)
            tail = fh.read()
            fh.truncate(head)
            fh.seek(head)
            fh.write(line.encode() + tail)
    return dropped


__all__ = ["DEFAULT_LOG_CAP_MB", "LogCap", "cap_bytes", "cut"]
