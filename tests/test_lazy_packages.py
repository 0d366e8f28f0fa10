"""The packages that export their public names lazily (``benchlab.names.exports``): importing one
runs none of its modules, each public name is its module's own object, and the modules import
each other without a cycle, which is what makes two threads' first imports of two of them safe
(the dashboard imports the report's and the statistics' modules on several threads)."""

from __future__ import annotations

import ast
import graphlib
import importlib
import subprocess
import sys
from pathlib import Path

import pytest

import benchlab

LAZY = ("benchlab.collect", "benchlab.report", "benchlab.spec", "benchlab.stats", "benchlab.ui")
SRC = Path(benchlab.__file__).parent


def _module_graph(package: str) -> dict[str, set[str]]:
    """``package``'s modules (its subpackages' too) and those of them each imports when it is
    imported (module level, outside ``if TYPE_CHECKING``), read from the source."""
    folder = SRC.joinpath(*package.split(".")[1:])

    def name_of(path: Path) -> str:
        parts = path.relative_to(SRC.parent).with_suffix("").parts
        return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)

    paths = {name_of(p): p for p in folder.rglob("*.py")}
    graph: dict[str, set[str]] = {}
    for name, path in paths.items():
        found: set[str] = set()
        for node in ast.parse(path.read_text()).body:
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                found.add(node.module)
                found |= {f"{node.module}.{a.name}" for a in node.names}
            elif isinstance(node, ast.Import):
                found |= {a.name for a in node.names}
        # Importing a.b.c imports a.b first: a module's import reaches its packages' __init__s.
        graph[name] = {m for f in found for m in _with_packages(f) if m in paths and m != name}
    return graph


def _with_packages(module: str) -> list[str]:
    parts = module.split(".")
    return [".".join(parts[:i]) for i in range(2, len(parts) + 1)]


@pytest.mark.parametrize("package", LAZY)
def test_the_package_imports_none_of_its_modules_and_they_import_each_other_without_a_cycle(package: str):
    graph = _module_graph(package)
    assert graph[package] == set(), f"{package}'s __init__ imports {sorted(graph[package])}"
    list(graphlib.TopologicalSorter(graph).static_order())  # raises CycleError on a cycle


def test_importing_a_lazy_package_loads_none_of_its_modules():
    code = ("import sys, importlib\n"
            f"for p in {LAZY!r}:\n"
            "    importlib.import_module(p)\n"
            f"print(sorted(m for m in sys.modules if m.startswith(tuple(p + '.' for p in {LAZY!r}))))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


@pytest.mark.parametrize("package", LAZY)
def test_each_public_name_is_its_modules_own_object_whatever_was_imported_first(package: str):
    # In a fresh interpreter every module of the package is imported first, binding each module
    # on its package (benchlab.report.leaderboard the module, benchlab.stats.aggregate the
    # module): the public names must still be the functions and classes of their modules.
    code = f"""
import importlib, pkgutil, sys
pkg = importlib.import_module({package!r})
for m in pkgutil.walk_packages(pkg.__path__, {package!r} + "."):
    if m.name.endswith("__main__") or ".templates" in m.name:
        continue
    try:
        importlib.import_module(m.name)
    except ModuleNotFoundError as exc:  # a module of an optional extra not installed here
        if (exc.name or "benchlab").startswith("benchlab"):
            raise
wrong = [n for n in pkg.__all__ if n in pkg._WHERE
         and getattr(pkg, n) is not getattr(importlib.import_module(pkg._WHERE[n]), n)]
print(wrong, sorted(set(pkg.__all__) - set(pkg._WHERE) - set(vars(pkg))))
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip() == "[] []"


def test_a_name_the_package_does_not_export_is_an_attribute_error():
    stats = importlib.import_module("benchlab.stats")
    with pytest.raises(AttributeError, match="has no attribute 'no_such_name'"):
        stats.no_such_name  # noqa: B018
    assert "describe" in dir(stats) and "aggregate" in dir(stats)
