"""Hydra-style overrides of any field of a spec on the command line: ``-s configs.mlp.params.lr=1e-3``.

A ``-s`` key that is no variable of the spec and names a place in it (a dotted path, or a
top-level field such as ``seeds``) sets that place in the document before it is validated, so
the value is checked as if it had been written in the file. Under ``configs`` and ``tasks`` the
second part is an item's ``name`` (``configs.mlp``). As in a Hydra multirun, a comma list given
to a config's param (``configs.mlp.params.lr=1e-3,1e-4``) sweeps it: it becomes the config's
grid over those values (docs/spec.md, Grids), one config per value; a list in brackets
(``[1e-3,1e-4]``) stays one list value. A leading ``+`` (Hydra's "add a key") is accepted.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from typing import Any

from benchlab.errors import OverrideError
from benchlab.json_types import JsonObject

_NAMED = ("configs", "tasks")


def is_path(key: str, variables: Collection[str], fields: Collection[str]) -> bool:
    """Whether the override key ``key`` names a place of the spec rather than one of its variables."""
    key = key.lstrip("+")
    if key in variables:
        return False
    return "." in key or key in fields


def _item(data: dict[str, Any], section: str, name: str, written: str, file: str) -> dict[str, Any]:
    items = data.get(section)
    if not isinstance(items, list):
        raise OverrideError(written, f"{file} has no {section} list to set")
    for i, item in enumerate(items):
        if item == name:  # a bare name: the item written short
            items[i] = item = {"name": name}
        if isinstance(item, dict) and item.get("name") == name:
            return item
    known = ", ".join(str(i.get("name") if isinstance(i, dict) else i) for i in items) or "none"
    raise OverrideError(written, f"names no {section[:-1]} of {file}; {section}: {known}")


def _place(node: dict[str, Any], parts: list[str], written: str) -> dict[str, Any]:
    """The mapping that holds ``parts[-1]`` under ``node``, made where missing."""
    for depth, part in enumerate(parts[:-1]):
        child = node.setdefault(part, {})
        if child is None:
            child = node[part] = {}
        if not isinstance(child, dict):
            raise OverrideError(written, f"{'.'.join(parts[:depth + 1])} is {child!r}, not a mapping")
        node = child
    return node


def apply_path(data: JsonObject, key: str, value: Any, raw: str, file: str,
               scalar: Callable[[str], Any]) -> None:
    """Set the place ``key`` names in the spec document ``data`` to ``value`` (``raw`` as typed;
    ``scalar`` reads one value of a comma list as a ``-s`` value is read)."""
    written = f"{key}={raw}"
    parts = key.lstrip("+").split(".")
    if any(not p for p in parts):
        raise OverrideError(written, "expected a dotted path such as configs.mlp.params.lr")
    node: dict[str, Any] = data
    if parts[0] in _NAMED:
        if len(parts) < 3:
            raise OverrideError(written, f"name a field of one of the {parts[0]}: {parts[0]}.NAME.params.KEY=VALUE")
        node, parts = _item(data, parts[0], parts[1], written, file), parts[2:]
        sweep = isinstance(value, str) and "," in raw and not raw.strip().startswith(("[", "{", "'", '"'))
        if len(parts) == 2 and parts[0] == "params" and sweep:
            # Hydra's multirun spelling: one config per value, as a grid makes them.
            params = node.get("params")
            if isinstance(params, dict):
                params.pop(parts[1], None)
            _place(node, ["grid", parts[1]], written)[parts[1]] = [scalar(v.strip()) for v in raw.split(",")]
            return
        if len(parts) == 2 and parts[0] == "params" and isinstance(node.get("grid"), dict):
            node["grid"].pop(parts[1], None)  # one value now: the param is no longer swept
            if not node["grid"]:
                del node["grid"]
    _place(node, parts, written)[parts[-1]] = value
