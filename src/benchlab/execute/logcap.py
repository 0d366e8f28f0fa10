"""A cap on the disk a run's log takes: its first and last halves kept, what lies between dropped
and counted (``log_cap_mb`` in the spec, 64 MiB unless it says otherwise; 0 for none).

One policy for every backend. The sweep keeps one :class:`LogCap` for all its attempts: it tracks
each attempt's ``train.log`` in the results folder from the attempt's start, whichever backend runs
it (a local process, a Slurm job writing on the shared file system, a launcher's log follower, a Ray
task writing there), and :func:`benchlab.execute.record.record_attempt` cuts it with :func:`cut` when
the attempt ends, before its metrics are read. A backend whose run writes its log where the results
folder is not (a Ray worker's scratch folder) keeps it with a :class:`LogCap` of its own there and
sends home what :func:`cut` made of it: the same head, line and tail, which the sweep's cut then
leaves as it is.

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

This module uses the standard library only: the Ray backend ships it by value to workers that may
not have benchlab installed.
"""

from __future__ import annotations

import ctypes
import errno
import os
import re
import threading
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
#: The line a cut log holds between its head and its tail, and the most bytes it can take.
_MARK: Final = re.compile(rb"\n\[benchlab: \d+ bytes of this log were dropped here: [^\n]*\]\n")
_MARK_MAX: Final = 400


def cap_bytes(log_cap_mb: float | None) -> int | None:
    """The cap of a spec's ``log_cap_mb`` in bytes; None for no cap (0)."""
    mb = DEFAULT_LOG_CAP_MB if log_cap_mb is None else log_cap_mb
    return int(mb * 2**20) if mb > 0 else None


def _fallocate() -> Any:
    """libc's fallocate, or None (not Linux)."""
    try:
        fallocate = ctypes.CDLL(None, use_errno=True).fallocate
        fallocate.argtypes = (ctypes.c_int, ctypes.c_int, ctypes.c_longlong, ctypes.c_longlong)
    except (OSError, AttributeError):
        return None
    return fallocate


class _Log:
    """A tracked log: where its hole starts (the head's end, rounded up to a block) and how far
    it has been freed (``hole_end == hole_start``: not yet)."""

    __slots__ = ("can_punch", "hole_end", "hole_start")

    def __init__(self, start: int):
        self.hole_start = self.hole_end = start
        self.can_punch = True


class LogCap:
    """Keeps each tracked log within ``cap`` bytes on disk: :meth:`track` at an attempt's start,
    :meth:`finish` at its end (which writes the log's final form and returns the bytes dropped)."""

    def __init__(self, cap: int, look_s: float = LOOK_S):
        self.cap = cap
        self.head = cap // 2
        self.tail = cap - self.head
        self.look_s = look_s
        self._logs: dict[str, _Log] = {}
        # Held while a log is looked at and punched: once untracked, a log is never punched again
        # (its cut may already be replacing it).
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        # Looked up in the thread, once: never a module global, which would travel with the
        # module to a Ray worker and cannot be pickled.
        self._punch_call: Any = None
        self.warnings: list[str] = []
        self._warned = False

    def track(self, path: Path | str) -> None:
        """Keep ``path`` (a running attempt's log) within the cap from now on."""
        try:
            block = os.statvfs(os.path.dirname(str(path)) or ".").f_bsize or 4096
        except OSError:
            block = 4096
        start = -(-self.head // block) * block
        with self._lock:
            self._logs[str(path)] = _Log(start)
            if self._thread is None:
                self._thread = threading.Thread(target=self._loop, daemon=True, name="log-cap")
                self._thread.start()

    def untrack(self, path: Path | str) -> None:
        """Stop keeping ``path``: after this no byte of it is freed by this keeper."""
        with self._lock:
            self._logs.pop(str(path), None)

    def _loop(self) -> None:
        self._punch_call = _fallocate()
        while not self._stop.wait(self.look_s):
            with self._lock:
                paths = list(self._logs)
            for path in paths:
                with self._lock:
                    log = self._logs.get(path)
                    if log is not None:
                        self._trim(path, log)

    def _punch(self, fd: int, offset: int, length: int) -> int:
        """Free ``length`` bytes of ``fd`` at ``offset``; 0, or the errno of the refusal."""
        if self._punch_call is None:
            return errno.EOPNOTSUPP
        if self._punch_call(fd, _FALLOC_FL_PUNCH_HOLE | _FALLOC_FL_KEEP_SIZE, offset, length) == 0:
            return 0
        return ctypes.get_errno() or errno.EIO

    def _trim(self, path: str, log: _Log) -> None:
        if not log.can_punch:
            return
        try:
            fd = os.open(path, os.O_WRONLY)
        except OSError:
            return  # not there yet (a launcher writes it at the job's end)
        try:
            # The size of the file opened, not of the path: the two differ once a cut replaced it.
            size = os.fstat(fd).st_size
            end = ((size - self.tail) // _STEP) * _STEP
            if end - log.hole_end < _STEP or end <= log.hole_start:
                return
            failed = self._punch(fd, log.hole_end, end - log.hole_end)
        finally:
            os.close(fd)
        if failed:
            log.can_punch = False
            if not self._warned:
                self._warned = True
                self.warnings.append(f"the file system of {path} cannot free part of a file "
                                     f"({os.strerror(failed)}): a log is cut to its cap only when its run ends")
            return
        log.hole_end = end

    def take_warnings(self) -> list[str]:
        """The warnings since the last call (at most one: every log of a sweep is on one file system)."""
        out, self.warnings = self.warnings, []
        return out

    def finish(self, path: Path | str) -> int:
        """Stop tracking ``path``, its writer gone, and write it as head, a line saying how many
        bytes were dropped, and tail; the bytes dropped (0: the log was within its cap)."""
        self.untrack(path)
        return cut(path, self.cap)

    def close(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=1.0)


def data_at(fd: int, pos: int, most: int) -> tuple[int, int]:
    """Where a reader of a log at ``pos`` should read next, and how many bytes (at most ``most``):
    past the middle a cap freed while the run writes, which reads as zeros, to the bytes after it.
    Where the file system says nothing of holes: ``pos`` and ``most``."""
    try:
        start = os.lseek(fd, pos, os.SEEK_DATA)
    except OSError:  # nothing but a hole or the end past pos, or no such query here
        return pos, most
    try:
        hole = os.lseek(fd, start, os.SEEK_HOLE)
    except OSError:
        return start, most
    return start, max(0, min(most, hole - start))


def cut(path: Path | str, cap: int) -> int:
    """Write the log at ``path`` as its first ``cap // 2`` bytes, a line saying how many bytes were
    dropped, and its last ``cap - cap // 2`` bytes; the bytes dropped now (0 and nothing written:
    the log was within ``cap``, or is already what a cut to ``cap`` made of it).

    The bytes between head and tail may have been freed while the run wrote (they read as zeros):
    they are the ones dropped, whatever was freed, since holes never reach into the last
    ``cap - cap // 2`` bytes of a log nor its first ``cap // 2``."""
    path = str(path)
    try:
        size = os.stat(path).st_size
    except OSError:
        return 0
    if size <= cap:
        return 0
    head = cap // 2
    tail_start = size - (cap - head)
    if size <= cap + _MARK_MAX and _is_cut(path, head):
        return 0
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


def _is_cut(path: str, head: int) -> bool:
    """Whether the log at ``path`` holds a cut's line right after its first ``head`` bytes."""
    try:
        with open(path, "rb") as fh:
            fh.seek(head)
            return _MARK.match(fh.read(_MARK_MAX)) is not None
    except OSError:
        return False


__all__ = ["DEFAULT_LOG_CAP_MB", "LogCap", "cap_bytes", "cut", "data_at"]
