"""What a file to publish really holds, scanned for secrets (:func:`benchlab.secrets.scan_text`).

A file's name says nothing about its content: a text file may be called ``*.png``, a log may be
gzipped, a folder of logs may be a ``.zip`` or a ``.tar.xz``. So what is scanned is chosen by the
bytes themselves, at any depth:

- a gzip, bzip2 or xz stream is decompressed, a zip or tar archive opened, and what comes out is
  scanned the same way (named ``outer!inner``);
- text (no NUL byte, or a UTF-16 byte-order mark) is scanned line by line, after the
  ``data:...;base64,`` payloads embedded in it (report.html's plots) are taken out and decoded:
  each is scanned as what it decodes to, so a plot is an image, never base64 text whose flat
  areas read like an AWS key;
- anything else is binary: its printable runs of 8 characters or more are scanned (a pickled
  checkpoint that holds a token holds it as a printable run), one finding per value, at line 0.

Decompression is bounded (:class:`Limits`: bytes expanded in all, members, depth): a file that
would expand beyond the bounds is not published unread; it is a finding of its own, which only
``--allow-secret FILE:0`` lets through.
"""

from __future__ import annotations

import base64
import binascii
import bz2
import gzip
import io
import lzma
import re
import tarfile
import zipfile
import zlib
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from benchlab.secrets import Finding, Fingerprint, scan_text, short_hash

_DATA_URI = re.compile(r"data:([A-Za-z0-9.+/-]*)((?:;[A-Za-z0-9.=_-]+)*);base64,([A-Za-z0-9+/=\s]*)")
_PRINTABLE = re.compile(rb"[\x20-\x7e]{8,}")


@dataclass(frozen=True)
class Limits:
    """How far a file is unpacked: bytes expanded in all (per published file), members of
    archives, archives inside archives."""

    expanded_bytes: int = 512 * 1024 * 1024
    members: int = 100_000
    depth: int = 4


@dataclass
class _Budget:
    limits: Limits
    expanded: int = 0
    members: int = 0
    over: list[str] = field(default_factory=list)

    def take(self, n: int) -> bool:
        self.expanded += n
        return self.expanded <= self.limits.expanded_bytes

    @property
    def left(self) -> int:
        return max(0, self.limits.expanded_bytes - self.expanded)


def scan_bytes(name: str, data: bytes, known: Iterable[Fingerprint] = (), limits: Limits | None = None
               ) -> list[Finding]:
    """The secrets in the file ``name`` whose content is ``data``, unpacked and decoded as the
    module docstring says."""
    budget = _Budget(limits or Limits())
    found = _scan(name, data, list(known), budget, 0)
    return found + [Finding(path, 0, f"not scanned whole: it expands beyond {_mib(budget.limits.expanded_bytes)} "
                                     f"or {budget.limits.members} members or {budget.limits.depth} levels",
                            short_hash(path)) for path in dict.fromkeys(budget.over)]


def _mib(n: int) -> str:
    return f"{n / 2 ** 20:.0f} MiB"


def _read(stream: io.BufferedIOBase | io.RawIOBase | gzip.GzipFile | bz2.BZ2File | lzma.LZMAFile | None,
          budget: _Budget) -> bytes | None:
    """All of ``stream``, or None once more than the budget has come out (the caller stops there)."""
    if stream is None:
        return b""
    data = stream.read(budget.left + 1)
    if not budget.take(len(data)):
        return None
    return data


def _scan(name: str, data: bytes, known: list[Fingerprint], budget: _Budget, depth: int) -> list[Finding]:
    opener = _unpacker(data)
    if opener is not None:
        if depth >= budget.limits.depth:
            budget.over.append(name)
            return []
        try:
            return opener(name, data, known, budget, depth + 1)
        # NotImplementedError: zipfile's answer to a compression method it does not know.
        except (OSError, EOFError, ValueError, zlib.error, lzma.LZMAError, tarfile.TarError, zipfile.BadZipFile,
                NotImplementedError):
            pass  # not the archive its first bytes suggested (or damaged): scanned as what it is
    if _is_text(data):
        return _scan_text(name, _decode(data), known, budget, depth)
    return _scan_binary(name, data, known)


def _is_text(data: bytes) -> bool:
    return data[:2] in (b"\xff\xfe", b"\xfe\xff") or b"\x00" not in data


def _decode(data: bytes) -> str:
    if data[:2] in (b"\xff\xfe", b"\xfe\xff"):
        return data.decode("utf-16", errors="replace")
    return data.decode("utf-8", errors="replace")


def _scan_text(name: str, text: str, known: list[Fingerprint], budget: _Budget, depth: int) -> list[Finding]:
    found: list[Finding] = []
    if "base64," in text:
        payloads: list[tuple[int, str, bytes]] = []

        def take_out(m: re.Match[str]) -> str:
            line = text.count("\n", 0, m.start()) + 1
            try:
                payloads.append((line, m.group(1) or "data", base64.b64decode("".join(m.group(3).split()),
                                                                             validate=True)))
            except (binascii.Error, ValueError):
                return m.group(0)  # not base64 after all: scanned as the text it is
            # The payload's own newlines are kept, so that the lines after it keep their numbers.
            return f"data:{m.group(1)}{m.group(2)};base64," + "\n" * m.group(3).count("\n")

        text = _DATA_URI.sub(take_out, text)
        for line, media, payload in payloads:
            if not budget.take(len(payload)):
                budget.over.append(name)
                break
            found += _scan(f"{name}!{media}@{line}", payload, known, budget, depth + 1)
    return scan_text(text, name, known) + found


def _scan_binary(name: str, data: bytes, known: list[Fingerprint]) -> list[Finding]:
    runs = "\n".join(m.group().decode("ascii") for m in _PRINTABLE.finditer(data))
    seen: dict[tuple[str, str], Finding] = {}
    for f in scan_text(runs, name, known):
        seen.setdefault((f.kind, f.digest), Finding(name, 0, f.kind, f.digest))
    return list(seen.values())


# ---------------------------------------------------------------------------- unpacking

_Opener = Callable[[str, bytes, list[Fingerprint], "_Budget", int], list[Finding]]


def _unpacker(data: bytes) -> _Opener | None:
    if data[:2] == b"\x1f\x8b":
        return _gunzip
    if data[:3] == b"BZh":
        return _bunzip
    if data[:6] == b"\xfd7zXZ\x00":
        return _unxz
    if data[:4] in (b"PK\x03\x04", b"PK\x05\x06"):
        return _unzip
    if len(data) >= 262 and data[257:262] == b"ustar":
        return _untar
    return None


def _over(name: str, budget: _Budget) -> list[Finding]:
    """Note that ``name`` went beyond the bounds (a finding of its own, added at the end)."""
    budget.over.append(name)
    return []


def _inner(name: str, suffixes: tuple[str, ...]) -> str:
    base = name.rsplit("/", 1)[-1].rsplit("!", 1)[-1]
    for suffix in suffixes:
        if base.lower().endswith(suffix):
            return base[: -len(suffix)] or base
    return base


def _stream(open_: Any, suffixes: tuple[str, ...]) -> Any:
    """An unpacker of a one-file compressed stream (gzip, bzip2, xz), read within the budget."""

    def unpack(name: str, data: bytes, known: list[Fingerprint], budget: _Budget, depth: int) -> list[Finding]:
        with open_(io.BytesIO(data)) as fh:
            inner = _read(fh, budget)
        if inner is None:
            return _over(name, budget)
        return _scan(f"{name}!{_inner(name, suffixes)}", inner, known, budget, depth)

    return unpack


_gunzip = _stream(lambda f: gzip.GzipFile(fileobj=f), (".gz", ".tgz", ".gzip"))
_bunzip = _stream(bz2.BZ2File, (".bz2", ".tbz2"))
_unxz = _stream(lzma.LZMAFile, (".xz", ".txz"))


def _unzip(name: str, data: bytes, known: list[Fingerprint], budget: _Budget, depth: int) -> list[Finding]:
    found: list[Finding] = []
    with zipfile.ZipFile(io.BytesIO(data)) as zf:
        for info in zf.infolist():
            if info.is_dir():
                continue
            budget.members += 1
            if budget.members > budget.limits.members:
                return found + _over(name, budget)
            with zf.open(info) as fh:
                member = _read(fh, budget)  # type: ignore[arg-type]
            if member is None:
                return found + _over(name, budget)
            found += _scan(f"{name}!{info.filename}", member, known, budget, depth)
    return found


def _untar(name: str, data: bytes, known: list[Fingerprint], budget: _Budget, depth: int) -> list[Finding]:
    found: list[Finding] = []
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:") as tf:
        for info in tf:
            budget.members += 1
            if budget.members > budget.limits.members:
                return found + _over(name, budget)
            if not info.isfile():
                continue
            member = _read(tf.extractfile(info), budget)  # type: ignore[arg-type]
            if member is None:
                return found + _over(name, budget)
            found += _scan(f"{name}!{info.name}", member, known, budget, depth)
    return found


__all__ = ["Limits", "scan_bytes"]
