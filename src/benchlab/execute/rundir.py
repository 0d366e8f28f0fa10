"""Run directories: what one holds before its attempt starts, and writing them ahead.

A run directory gets ``config.yaml`` (the exact resolved config) and an empty
``train.log`` before its command starts. A retry first moves what the earlier
attempt left to ``attempts/<n>/``, so nothing it wrote can be read as the new
attempt's metrics.
"""

from __future__ import annotations

import itertools
import json
import math
import os
import re
import shutil
import time
from collections import OrderedDict
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import yaml

from benchlab.json_types import ConfigValues
from benchlab.names.run_files import CONFIG_FILE, LOG_FILE, run_dir_of
from benchlab.plan import Run

_DUMPER = getattr(yaml, "CSafeDumper", yaml.SafeDumper)


def write_run_dir(run_dir: Path, run: Run, number: int, log: bool = True) -> None:
    """Everything a run directory holds before attempt ``number`` starts. ``log=False`` leaves
    ``train.log`` to the caller, which creates it as it starts the command (the local backend)."""
    prepare_run_dir(run_dir, number)
    # Plain system calls, not a text file object (its isatty check and seeks): this is on the
    # path from one run's end to the next one's start.
    data = config_yaml(run.resolved_config()).encode()
    fd = os.open(run_dir / CONFIG_FILE, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o644)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
    finally:
        os.close(fd)
    if log:
        os.close(os.open(run_dir / LOG_FILE, os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC, 0o644))


def config_yaml(config: ConfigValues) -> str:
    """``config`` as block YAML that ``yaml.safe_load`` reads back equal.

    Configs are mostly nested mappings of strings and numbers; those are written
    here directly, at a tenth of PyYAML's cost (it is paid once per run). Anything
    else (a list of mappings, a key that is not a string, text beyond printable
    ASCII) goes through PyYAML.
    """
    lines: list[str] = []
    if _emit(config, "", lines):
        return "\n".join(lines) + "\n" if lines else "{}\n"
    return yaml.dump(config, Dumper=_DUMPER, sort_keys=False)


# A plain scalar that YAML 1.1 (PyYAML) reads as this very string: it starts with a letter,
# '_' or '/', holds no indicator characters, and is not a boolean or null word.
_PLAIN = re.compile(r"[A-Za-z_/][A-Za-z0-9_./-]*\Z")
_WORDS = {"true", "false", "yes", "no", "on", "off", "null", "y", "n"}


def _scalar(value: Any) -> str | None:
    if value is None:
        return "null"
    if value is True or value is False:
        return "true" if value else "false"
    kind = type(value)
    if kind is int:
        return str(value)
    if kind is float:
        if math.isnan(value):
            return ".nan"
        if math.isinf(value):
            return ".inf" if value > 0 else "-.inf"
        text = repr(value)
        if "." not in text and "e" in text:  # PyYAML's float needs a dot: 1e-05 -> 1.0e-05
            mantissa, exponent = text.split("e")
            text = f"{mantissa}.0e{exponent}"
        return text
    if kind is str:
        if _PLAIN.match(value) and value.lower() not in _WORDS:
            return str(value)
        if value.isascii() and value.isprintable():
            return json.dumps(value)  # a JSON string is a YAML double-quoted scalar
    return None


def _emit(mapping: dict[Any, Any], pad: str, lines: list[str]) -> bool:
    for key, value in mapping.items():
        name = _scalar(key) if type(key) is str else None
        if name is None:
            return False
        if isinstance(value, dict):
            if not value:
                lines.append(f"{pad}{name}: {{}}")
                continue
            lines.append(f"{pad}{name}:")
            if not _emit(value, pad + "  ", lines):
                return False
        elif isinstance(value, (list, tuple)):
            items = [_scalar(v) for v in value]
            if any(i is None for i in items):
                return False
            lines.append(f"{pad}{name}: [{', '.join(items)}]")  # type: ignore[arg-type]
        else:
            text = _scalar(value)
            if text is None:
                return False
            lines.append(f"{pad}{name}: {text}")
    return True


def prepare_run_dir(run_dir: Path, number: int) -> None:
    """Make the run directory; an earlier attempt's files move to ``attempts/<n>/``."""
    try:
        run_dir.mkdir(parents=True)
        return  # new: nothing to move aside
    except FileExistsError:
        pass
    leftovers = [p for p in run_dir.iterdir() if p.name != "attempts"]
    if not leftovers:
        return
    keep = _new_folder(run_dir / "attempts", str(max(1, number - 1)))
    for path in leftovers:
        shutil.move(str(path), keep / path.name)


def _new_folder(parent: Path, name: str) -> Path:
    """A new, empty folder ``parent/name``, else ``name-<time>``, else ``name-<time>-<k>``: an
    attempt's number is not always new (the ledger it came from may have been replaced or
    emptied, and numbering starts over), and what an earlier attempt left is never overwritten.
    ``mkdir`` is the test, so two writers cannot take the same name either."""
    parent.mkdir(parents=True, exist_ok=True)
    stamp = time.strftime("%Y%m%dT%H%M%S")
    for candidate in itertools.chain([name, f"{name}-{stamp}"], (f"{name}-{stamp}-{k}" for k in itertools.count(2))):
        try:
            (parent / candidate).mkdir()
            return parent / candidate
        except FileExistsError:
            continue
    raise AssertionError("unreachable")  # itertools.count never ends


class Preparer:
    """Writes the directories of upcoming first attempts while the sweep would otherwise wait.

    Creating files costs from tens of microseconds to a millisecond each, depending
    on the disk; done while runs are in flight, it no longer delays the next
    launch. It works in the sweep's own thread, one directory per :meth:`step`
    (a thread of its own would contend with the sweep for the interpreter and
    cost more than it saves). Retries are never prepared ahead: their
    predecessor's files must be moved aside first.
    """

    def __init__(self, results_dir: Path):
        self.results_dir = results_dir
        self._queued: OrderedDict[str, Run] = OrderedDict()
        self._ready: set[str] = set()

    def ahead(self, runs: Iterable[Run]) -> None:
        """Queue these runs' directories (those not queued or written before)."""
        for run in runs:
            if run.run_id not in self._ready and run.run_id not in self._queued:
                self._queued[run.run_id] = run

    def pending(self) -> bool:
        return bool(self._queued)

    def step(self) -> None:
        """Write the next queued directory; a failure is left for the launch to meet and report."""
        if not self._queued:
            return
        run_id, run = self._queued.popitem(last=False)
        try:
            write_run_dir(run_dir_of(self.results_dir, run_id), run, 1)
        except OSError:
            return
        self._ready.add(run_id)

    def claim(self, run_id: str) -> bool:
        """Whether the run's directory is written; False means: write it yourself."""
        self._queued.pop(run_id, None)
        if run_id in self._ready:
            self._ready.discard(run_id)
            return True
        return False
