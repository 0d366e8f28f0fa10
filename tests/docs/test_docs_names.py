"""Every name of benchlab's that the docs, the README and the docstrings use exists.

A name that drifts (``benchlab.log_final`` written in two places after the function was called
``summary``) sends a reader to nothing; this reads every ``benchlab.something`` and
``benchlab.pkg.module.name`` written in prose or code and imports it.
"""

from __future__ import annotations

import importlib
import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
_NAME = re.compile(r"(?<![\w/.-])benchlab(?:\.[A-Za-z_][A-Za-z0-9_]*)+")
# Not Python names: the ledger's file and its siblings, and the entry-point groups of backends and
# extractors.
_NOT_NAMES = {"benchlab.yaml", "benchlab.backends", "benchlab.extractors"}


def _texts() -> list[Path]:
    files = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
    return files + sorted((REPO / "src" / "benchlab").rglob("*.py"))


def _resolve(dotted: str) -> bool:
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for attr in parts[cut:]:
            if not hasattr(obj, attr):
                return False
            obj = getattr(obj, attr)
        return True
    return False


def _names() -> dict[str, str]:
    found: dict[str, str] = {}
    for path in _texts():
        for lineno, line in enumerate(path.read_text().splitlines(), 1):
            for m in _NAME.finditer(line):
                name = m.group(0).rstrip(".")
                if (name in _NOT_NAMES or name.startswith("benchlab.db") or name.endswith("_")
                        or name.endswith((".py", ".md", ".yaml", ".json", ".jsonl"))):
                    continue
                found.setdefault(name, f"{path.relative_to(REPO)}:{lineno}")
    return found


def test_the_docs_name_some_of_benchlabs_api():
    names = _names()
    assert "benchlab.load" in names and "benchlab.log" in names


@pytest.mark.parametrize("name,where", sorted(_names().items()))
def test_every_name_the_docs_use_exists(name, where):
    assert _resolve(name), f"{where} names {name}, which does not exist"


def test_a_drifted_name_is_caught():
    assert not _resolve("benchlab.log_final")
    assert _resolve("benchlab.summary")
