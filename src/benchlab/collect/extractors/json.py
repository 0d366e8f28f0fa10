"""``from: {json: FILE, key: a.b.0}``: the value at a dotted key path of a JSON file (list items by
index); a list there is read as a series (``series: true`` keeps it)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pydantic import Field, model_validator

from benchlab.collect.extractors import ExtractFailed, Extractor, Series, SharedOptions, run_file, to_float
from benchlab.collect.files import json_error


class JsonOptions(SharedOptions):
    """A ``json`` source: the file, and ``key``, the dotted path of the value."""

    json_file: str = Field(alias="json")
    described = "a JSON file"

    @model_validator(mode="after")
    def _needs_key(self) -> JsonOptions:
        if not self.key:
            raise ValueError("a 'json' source needs 'key', the dotted path of the value")
        return self


def _dig(data: Any, key: str, where: str) -> Any:
    node = data
    for part in key.split("."):
        if isinstance(node, dict) and part in node:
            node = node[part]
        elif isinstance(node, list) and part.lstrip("-").isdigit() and -len(node) <= int(part) < len(node):
            node = node[int(part)]
        else:
            keys = ", ".join(map(str, node.keys())) if isinstance(node, dict) else type(node).__name__
            raise ExtractFailed(f"{where}: no key {part!r} on the path {key!r} (found: {keys})")
    return node


def extract_json(run_dir: Path, source: JsonOptions) -> tuple[float, Series | None]:
    """A value at a dotted key path of a JSON file; a list there is read as a series."""
    import numpy as np
    assert source.key is not None
    path = run_file(run_dir, source.json_file)
    try:
        data = json.loads(path.read_text(encoding="utf-8", errors="replace"))
    except ValueError as exc:
        raise ExtractFailed(json_error(source.json_file, exc)) from None
    node = _dig(data, source.key, source.json_file)
    if isinstance(node, list):
        vals = [to_float(v, f"{source.json_file} {source.key}[{i}]") for i, v in enumerate(node)]
        if not vals:
            raise ExtractFailed(f"{source.json_file} {source.key}: empty list")
        steps = np.arange(len(vals), dtype=float)
        return vals[-1], (steps, np.asarray(vals)) if source.series else None
    return to_float(node, f"{source.json_file} {source.key}"), None


EXTRACTOR = Extractor("json", JsonOptions, extract_json)
