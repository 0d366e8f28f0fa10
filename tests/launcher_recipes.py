"""The launcher recipes of docs/launchers.md, as the tests run them: each recipe's spec block,
found by its name, with the test's own benchmark around its ``backend``, ``variables`` and
``launcher`` sections."""

from __future__ import annotations

import re
import textwrap
from pathlib import Path
from typing import Any

import yaml

DOC = Path(__file__).resolve().parents[1] / "docs" / "launchers.md"


def recipe(name: str) -> dict[str, Any]:
    """The spec of the recipe block whose ``name:`` is ``name`` in docs/launchers.md."""
    for body in re.findall(r"```yaml\n(.*?)```", DOC.read_text(), flags=re.S):
        data = yaml.safe_load(body)
        if isinstance(data, dict) and data.get("name") == name:
            return data
    raise LookupError(f"no recipe named {name} in {DOC}")


def write_spec(root: Path, recipe_name: str, body: str, variables: dict[str, Any] | None = None,
               **launcher: Any) -> Path:
    """A spec in ``root``: ``body`` (tasks, configs, command...) with the recipe's launcher section,
    its keys replaced or added by ``launcher``, and its variables updated by ``variables``."""
    data = yaml.safe_load(textwrap.dedent(body))
    found = recipe(recipe_name)
    data["backend"] = "launcher"
    data["launcher"] = {**found["launcher"], **launcher}
    if "variables" in found or variables:
        data["variables"] = {**found.get("variables", {}), **(variables or {}), **data.get("variables", {})}
    root.mkdir(parents=True, exist_ok=True)
    spec = root / "bench.yaml"
    spec.write_text(yaml.safe_dump(data, sort_keys=False, width=1000))
    return spec
