"""W&B runs written offline (``WANDB_MODE=offline``): the ``run-<id>.wandb`` file of each
``wandb/offline-run-*`` folder.

The file is the run's whole record as wandb keeps it before a sync: the run (id, project, name,
config, tags, start), every ``log`` call (history), summary updates and the exit. Each record is
decoded with wandb's own protobuf schema (``wandb.proto.wandb_internal_pb2.Record``), so every
field means what wandb says it means. The framing around the records is LevelDB's log format
(a 7-byte W&B header, then 32 KiB blocks of checksummed chunks), which recent wandb releases read
only in their Go core, with no Python reader: it is read here, each chunk's CRC-32 checked, and
a file that ends part-way (a run still writing, or killed) ends at its last whole record.

A run's final values are its summary as the file leaves it (the last logged value of each metric,
or what the script set in ``run.summary``); each metric logged at more than one step is also a
curve over ``_step``. A run with no exit record, or a non-zero exit code, did not finish.
"""

from __future__ import annotations

import json
import math
import struct
import zlib
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

from benchlab.collect.importers import SourceRun
from benchlab.errors import DataError
from benchlab.names.extras import require

_HEADER = b":W&B"
_HEADER_LEN = 7  # ":W&B", a 2-byte magic and a version byte
_BLOCK = 32768
_CHUNK_HEADER = 7  # CRC-32 of type and payload (4), length (2), type (1)
_FULL, _FIRST, _MIDDLE, _LAST = 1, 2, 3, 4
#: wandb's own keys in history and summary (``_step``, ``_runtime``, ``_timestamp``, ``_wandb``).
_INTERNAL = "_"


def wandb_files(sources: list[Path]) -> list[Path]:
    """The ``.wandb`` files that ``sources`` name: files as they are, a run folder's own, and
    every run folder's under a ``wandb`` folder (offline and synced runs alike)."""
    found: list[Path] = []
    for source in sources:
        if source.is_file():
            found.append(source)
        elif source.is_dir():
            own = sorted(source.glob("run-*.wandb"))
            found += own or sorted(source.glob("*run-*/run-*.wandb"))
        else:
            raise DataError(f"{source}: no such file or folder; name a wandb folder, an offline-run-* folder "
                            "or a .wandb file")
    if not found:
        raise DataError(f"no .wandb file under {', '.join(map(str, sources))} (a run written offline keeps one in "
                        "wandb/offline-run-*/)")
    return list(dict.fromkeys(p.resolve() for p in found))


def _records(path: Path) -> Iterator[bytes]:
    """The records of a .wandb file, in order; a torn or corrupt tail ends the iteration."""
    data = path.read_bytes()
    if data[:4] != _HEADER:
        raise DataError(f"{path}: not a W&B run file (it does not start with {_HEADER!r})")
    pos, pending = _HEADER_LEN, b""
    while pos + _CHUNK_HEADER <= len(data):
        left = _BLOCK - pos % _BLOCK
        if left < _CHUNK_HEADER:
            pos += left  # a block's trailer, too short for a chunk: zeros
            continue
        crc, length, kind = struct.unpack("<IHB", data[pos:pos + _CHUNK_HEADER])
        payload = data[pos + _CHUNK_HEADER:pos + _CHUNK_HEADER + length]
        if kind == 0 or len(payload) < length or zlib.crc32(bytes([kind]) + payload) != crc:
            return
        pos += _CHUNK_HEADER + length
        if kind == _FULL:
            yield payload
        elif kind == _FIRST:
            pending = payload
        elif kind == _MIDDLE:
            pending += payload
        elif kind == _LAST:
            yield pending + payload
            pending = b""


def _key(item: Any) -> str:
    return item.key or ".".join(item.nested_key)


def _number(text: str) -> float | None:
    try:
        value = json.loads(text)
    except ValueError:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)


def _config_value(text: str) -> Any:
    try:
        value = json.loads(text)
    except ValueError:
        return text
    # wandb.init(config=...) keeps {"value": v, "desc": ...} in synced files; offline files hold v.
    return value["value"] if isinstance(value, dict) and set(value) <= {"value", "desc"} and "value" in value \
        else value


def _flat(prefix: str, value: Any, out: dict[str, Any]) -> None:
    if isinstance(value, dict) and value:
        for k, v in value.items():
            _flat(f"{prefix}.{k}" if prefix else str(k), v, out)
    else:
        out[prefix] = value


def read_runs(sources: list[Path]) -> Iterator[SourceRun]:
    """The runs of the .wandb files under ``sources`` (see :func:`wandb_files`)."""
    require("import", "benchlab import wandb", ("wandb",))
    for path in wandb_files(sources):
        yield _read_file(path)


def _read_file(path: Path) -> SourceRun:  # long: one pass over the records, each kind a few lines
    import numpy as np
    from google.protobuf.message import DecodeError
    from wandb.proto import wandb_internal_pb2 as pb

    config: dict[str, Any] = {}
    summary: dict[str, float] = {}
    points: dict[str, list[tuple[float, float]]] = {}
    run_id, project, name, host = path.stem.removeprefix("run-"), "", "", ""
    tags: dict[str, str] = {}
    started: float | None = None
    exit_code: int | None = None
    runtime: float | None = None
    for raw in _records(path):
        record = pb.Record()  # type: ignore[attr-defined]  # generated protobuf module
        try:
            record.ParseFromString(raw)
        except DecodeError:
            break
        kind = record.WhichOneof("record_type")
        if kind == "run":
            run = record.run
            run_id, project, name, host = run.run_id or run_id, run.project, run.display_name, run.host
            tags = {t: "true" for t in run.tags}
            started = run.start_time.seconds + run.start_time.nanos / 1e9 if run.start_time.seconds else None
            for item in run.config.update:
                config[_key(item)] = _config_value(item.value_json)
        elif kind == "config":
            for item in record.config.update:
                config[_key(item)] = _config_value(item.value_json)
            for item in record.config.remove:
                config.pop(_key(item), None)
        elif kind == "history":
            items = {_key(i): i.value_json for i in record.history.item}
            step = _number(items.get("_step", "")) if "_step" in items else float(record.history.step.num)
            for key, text in items.items():
                value = _number(text)
                if value is not None and not key.startswith(_INTERNAL) and step is not None:
                    points.setdefault(key, []).append((step, value))
        elif kind == "summary":
            for item in record.summary.update:
                key, value = _key(item), _number(item.value_json)
                if value is not None and not key.startswith(_INTERNAL):
                    summary[key] = value
            for item in record.summary.remove:
                summary.pop(_key(item), None)
        elif kind == "exit":
            exit_code, runtime = record.exit.exit_code, float(record.exit.runtime)
    params: dict[str, Any] = {}
    for key, value in config.items():
        if not key.startswith(_INTERNAL):
            _flat(key, value, params)
    origin = {"file": str(path), "project": project, "host": host, "exit_code": exit_code}
    base = SourceRun("wandb", run_id, name, params, tags, origin=origin, default_task=project or "wandb")
    if exit_code is None:
        return replace(base, unfinished="it has no exit record (still running, or killed)")
    if exit_code != 0:
        return replace(base, unfinished=f"it exited with code {exit_code}")
    finals = dict(summary)
    for key, pts in points.items():
        finals.setdefault(key, pts[-1][1])
    series = {k: (np.array([p[0] for p in pts]), np.array([p[1] for p in pts]))
              for k, pts in points.items() if len(pts) > 1}
    ended = started + runtime if started is not None and runtime is not None and math.isfinite(runtime) else None
    return replace(base, finals=finals, series=series, started=started, ended=ended)
