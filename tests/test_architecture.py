"""The import rules of docs/architecture.md, read from the source (nothing is imported), and at
the end what the report does at run time: which ledgers it opens and which modules it loads.

A "unit" is a subpackage (``benchlab.collect``, ``benchlab.execute``, ...) or a module at the
package's top level (``benchlab.spec``, ``benchlab.ledger``, ...). An import at module level
runs when the module is imported; one inside a function runs only when it is called, and one
under ``if TYPE_CHECKING:`` never runs.
"""

from __future__ import annotations

import ast
import functools
import re
from dataclasses import dataclass
from pathlib import Path

import pytest

import benchlab

#: The tests that read every module's imports run on one worker, so that the source tree is
#: parsed once (_all_imports), not once a worker.
ON_THE_IMPORTS = pytest.mark.xdist_group("architecture-imports")

SRC = Path(benchlab.__file__).resolve().parent


@functools.cache
def _parse(source: str) -> ast.Module:
    """The tree of ``source``, parsed once a process: two dozen tests scan every module, and parsing
    the source tree takes about 2.5 s. (The scans only read the trees.)"""
    return ast.parse(source)


@dataclass(frozen=True)
class Import:
    importer: str  # the importing module, dotted
    imported: str  # the benchlab module it imports, dotted
    module_level: bool
    line: int


def _module_name(path: Path) -> str:
    parts = path.relative_to(SRC.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {_module_name(p): p for p in sorted(SRC.rglob("*.py"))}


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _targets(node: ast.Import | ast.ImportFrom, importer: str) -> list[str]:
    if isinstance(node, ast.Import):
        return [a.name for a in node.names]
    base = node.module or ""
    if node.level:  # relative: resolved against the importing module's package
        package = importer.split(".")
        is_package = MODULES[importer].name == "__init__.py"
        package = package[: len(package) - node.level + (1 if is_package else 0)]
        base = ".".join([*package, base] if base else package)
    # `from benchlab.execute import triage` imports the module benchlab.execute.triage
    return [f"{base}.{a.name}" if f"{base}.{a.name}" in MODULES else base for a in node.names]


def _imports_of(name: str, source: str | None = None) -> list[Import]:
    """The benchlab modules ``name`` imports (its file, or ``source`` read as its text)."""
    found: list[Import] = []

    def visit(nodes: list[ast.stmt], module_level: bool) -> None:
        for node in nodes:
            if isinstance(node, ast.Import | ast.ImportFrom):
                for target in _targets(node, name):
                    if target == "benchlab" or target.startswith("benchlab."):
                        found.append(Import(name, target, module_level, node.lineno))
            elif isinstance(node, ast.If) and _is_type_checking(node.test):
                visit(node.orelse, module_level)
            elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                visit(node.body, False)
            else:
                for field in ("body", "orelse", "finalbody", "handlers"):
                    children = getattr(node, field, None)
                    if isinstance(children, list):
                        visit([c for c in children if isinstance(c, ast.stmt | ast.excepthandler)], module_level)
                if isinstance(node, ast.ExceptHandler):
                    continue

    tree = _parse(MODULES[name].read_text() if source is None else source)
    visit(tree.body, True)
    # `importlib.import_module("benchlab.ledger")` imports as surely as an import statement does.
    in_functions = {id(n) for f in ast.walk(tree) if isinstance(f, ast.FunctionDef | ast.AsyncFunctionDef)
                    for n in ast.walk(f)}
    for node, target in _imports_by_call(tree):
        if target is not None and (target == "benchlab" or target.startswith("benchlab.")):
            found.append(Import(name, target, id(node) not in in_functions, node.lineno))
    return found


#: The calls that import a module named by their first argument.
_IMPORTING_CALLS = ("import_module", "__import__", "extras.load")


def _imports_by_call(tree: ast.AST) -> list[tuple[ast.Call, str | None]]:
    """Each call of ``importlib.import_module``, ``__import__`` or ``benchlab.names.extras.load`` in
    ``tree``, with the module it names (None when its name is computed at run time)."""
    found: list[tuple[ast.Call, str | None]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and node.args and (
                ast.unparse(node.func) in _IMPORTING_CALLS or ast.unparse(node.func).endswith(".import_module")):
            first = node.args[0]
            named = isinstance(first, ast.Constant) and isinstance(first.value, str)
            found.append((node, first.value if named else None))
    return found


@functools.cache
def _all_imports() -> tuple[Import, ...]:
    """Every import of every module: parsed when a test first asks, not when the file is
    collected (each test worker collects it; the parse costs seconds)."""
    return tuple(imp for name in MODULES for imp in _imports_of(name))


def _unit(module: str) -> str:
    parts = module.split(".")
    return ".".join(parts[:2])


def _cycle(edges: dict[str, set[str]]) -> list[str] | None:
    """One cycle of the directed graph ``edges``, as the list of its nodes, or None."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def dfs(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for nxt in sorted(edges.get(node, ())):
            if state.get(nxt) == 1:
                return [*path[path.index(nxt):], nxt]
            if nxt not in state and (found := dfs(nxt)):
                return found
        path.pop()
        state[node] = 2
        return None

    for start in sorted(edges):
        if start not in state and (found := dfs(start)):
            return found
    return None


@ON_THE_IMPORTS
def test_the_walk_sees_module_level_and_function_level_imports():
    rebuild = {(i.imported, i.module_level) for i in _all_imports() if i.importer == "benchlab.collect.rebuild"}
    assert ("benchlab.ledger", True) in rebuild
    assert any(not level for _, level in rebuild)  # it imports the spec loader where it needs it


@ON_THE_IMPORTS
def test_no_import_cycle_between_modules_at_module_level():
    edges: dict[str, set[str]] = {}
    for imp in _all_imports():
        if imp.module_level and imp.imported != imp.importer:
            edges.setdefault(imp.importer, set()).add(imp.imported)
    assert _cycle(edges) is None


@ON_THE_IMPORTS
def test_no_import_cycle_between_subpackages_at_module_level():
    edges: dict[str, set[str]] = {}
    for imp in _all_imports():
        a, b = _unit(imp.importer), _unit(imp.imported)
        if imp.module_level and a != b and b != "benchlab":
            edges.setdefault(a, set()).add(b)
    assert _cycle(edges) is None


def _crossing(source: str, targets: tuple[str, ...]) -> list[str]:
    return sorted(f"{MODULES[i.importer].relative_to(SRC.parent)}:{i.line} imports {i.imported}"
                  for i in _all_imports()
                  if _unit(i.importer) == source and _unit(i.imported) in targets)


@ON_THE_IMPORTS
def test_collect_does_not_import_execute():
    # Reading a run directory back (collect) must work without the machinery that ran it.
    assert _crossing("benchlab.collect", ("benchlab.execute",)) == []


@ON_THE_IMPORTS
def test_report_imports_neither_ledger_nor_execute():
    # The report takes the results table (benchlab.results) and what benchlab.stats computes.
    assert _crossing("benchlab.report", ("benchlab.ledger", "benchlab.execute")) == []
    # A module named at run time could be either: the report names each module it imports.
    computed = sorted(f"{MODULES[name].relative_to(SRC.parent)}:{call.lineno}" for name in MODULES
                      if _unit(name) == "benchlab.report"
                      for call, target in _imports_by_call(_parse(MODULES[name].read_text())) if target is None)
    assert computed == []


def test_the_import_walk_sees_imports_made_by_calls():
    tree = _parse("import importlib\nfrom benchlab.names import extras\n"
                     "def f(name):\n    importlib.import_module('benchlab.ledger')\n"
                     "    __import__('benchlab.execute.sweep')\n    extras.load('optuna', 'a search')\n"
                     "    importlib.import_module(name)\n")
    assert [(call.lineno, target) for call, target in _imports_by_call(tree)] == [
        (4, "benchlab.ledger"), (5, "benchlab.execute.sweep"), (6, "optuna"), (7, None)]


def _ledger_openers() -> set[str]:
    """What ``benchlab.ledger`` exports that reads a ledger: ``Store`` and its functions (not its
    records, states and constants, which a caller may build and compare without a ledger)."""
    import inspect

    import benchlab.ledger

    return {n for n in benchlab.ledger.__all__ if inspect.isfunction(getattr(benchlab.ledger, n))
            or hasattr(getattr(benchlab.ledger, n), "open")}


def _ledger_names(tree: ast.Module, openers: set[str] | None = None) -> set[str]:
    """The names a module binds to the ledger package or to what of it reads a ledger, at any level."""
    openers = _ledger_openers() if openers is None else openers
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[:2] == LEDGER_PACKAGE.split("."):
            names |= {a.asname or a.name for a in node.names if a.name in openers or node.module != LEDGER_PACKAGE}
        elif isinstance(node, ast.ImportFrom) and node.module == "benchlab":
            names |= {a.asname or a.name for a in node.names if a.name == "ledger"}
        elif isinstance(node, ast.Import):
            names |= {a.asname or a.name.split(".")[0] for a in node.names if a.name.startswith(LEDGER_PACKAGE)}
    return names


def _code_names(node: ast.AST) -> set[str]:
    """The names ``node``'s code uses, its annotations left out (a type named opens nothing)."""
    skipped: set[int] = set()
    for n in ast.walk(node):
        if isinstance(n, ast.arg | ast.AnnAssign) and n.annotation is not None:
            skipped |= {id(x) for x in ast.walk(n.annotation)}
        elif isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef) and n.returns is not None:
            skipped |= {id(x) for x in ast.walk(n.returns)}
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name) and id(n) not in skipped}


def _reaching_the_ledger(source: str) -> set[str]:
    """The functions of a module (``name``, or ``Class.name`` for a method) whose code uses the
    ledger, or calls a function of the module that does."""
    tree = _parse(source)
    ledger = _ledger_names(tree)
    functions: dict[str, ast.AST] = {}
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            functions[node.name] = node
        elif isinstance(node, ast.ClassDef):
            functions |= {f"{node.name}.{f.name}": f for f in node.body
                          if isinstance(f, ast.FunctionDef | ast.AsyncFunctionDef)}
    uses = {name: _code_names(node) for name, node in functions.items()}
    reaching = {name for name, used in uses.items() if used & ledger}
    while grown := {name for name, used in uses.items() if name not in reaching and used & reaching}:
        reaching |= grown
    return reaching


def _helpers_used(source: str, module: str, helpers: set[str]) -> list[tuple[int, str]]:
    """Where ``source`` uses one of ``helpers`` of ``module``: imported by name (a class's
    method then called on it), or reached as an attribute of the module imported whole."""
    tree = _parse(source)
    package, _, leaf = module.rpartition(".")
    by_name: dict[str, str] = {}  # local name -> the helper's name in `module`
    aliases = set()  # local names of `module` itself
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module == module:
            by_name |= {a.asname or a.name: a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module == package:
            aliases |= {a.asname or a.name for a in node.names if a.name == leaf}
        elif isinstance(node, ast.Import):
            aliases |= {a.asname or a.name for a in node.names if a.name == module}
    found = [(node.lineno, by_name[node.id]) for node in ast.walk(tree)
             if isinstance(node, ast.Name) and node.id in by_name and by_name[node.id] in helpers]
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute):
            owner = ast.unparse(node.value)
            if owner in aliases and node.attr in helpers:
                found.append((node.lineno, node.attr))
            elif owner in by_name and f"{by_name[owner]}.{node.attr}" in helpers:
                found.append((node.lineno, f"{by_name[owner]}.{node.attr}"))
    found += [(node.lineno, a.name) for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)
              and node.module == module for a in node.names if a.name in helpers]
    return sorted(set(found))


#: Functions of other modules that open a ledger and that the report calls, each with its reason.
REPORT_OPENS_A_FOLDER = {
    ("benchlab.report.writer", "read"):
        "write_report(folder) reads the folder once into the Results it renders (results.read), "
        "before any section is written: the rendering itself opens nothing",
    ("benchlab.report.comparison", "load"): "benchlab.compare takes a results folder (or a CSV), not a Results",
    ("benchlab.report.comparison", "info"): "benchlab.compare takes a results folder (or a CSV), not a Results",
    ("benchlab.report.comparison", "ledger_seeds"):
        "benchlab.compare takes a results folder (or a CSV), not a Results",
    ("benchlab.report.comparison", "outside_spec_runs"):
        "benchlab.compare takes a results folder (or a CSV), not a Results",
    ("benchlab.report.comparison", "holds_question_records"):
        "benchlab.compare takes a results folder (or a CSV), not a Results",
    ("benchlab.report.comparison", "read_samples"):
        "benchlab.compare takes a results folder (or a CSV), not a Results",
    ("benchlab.report.writer", "find_results"):
        "write_report resolves the folder it is given (find_results looks for its benchlab.db, opening "
        "nothing) to know whether its tables are kept there and read needs the ledger's digest",
    ("benchlab.report.questions", "read_samples"):
        "question_analysis given a folder alone reads its completed runs from the ledger; write_report "
        "passes the Results' run_ids (test_the_reports_question_level_section_reads_the_runs_records_"
        "without_the_ledger)",
}


def test_the_helper_scan_sees_each_way_to_a_helper_that_opens_the_ledger():
    helpers = _reaching_the_ledger(
        "from benchlab.ledger import Store\n"
        "def opens(folder):\n    with Store.open(folder) as s:\n        return s.runs()\n"
        "def through(folder):\n    return opens(folder)\n"
        "def typed(store: Store) -> int:\n    return 1\n"
        "class Table:\n    @classmethod\n    def of(cls, folder):\n        return through(folder)\n"
        "def late(folder):\n    from benchlab import ledger\n    return ledger.find_db(folder)\n")
    assert helpers == {"opens", "through", "Table.of", "late"}
    used = _helpers_used(
        "from benchlab.results import opens as o, typed, Table\nfrom benchlab import results as r\n"
        "import benchlab.results\n"
        "def f(x):\n    o(x); typed(x); r.through(x); Table.of(x); benchlab.results.late(x); r.typed(x)\n",
        "benchlab.results", helpers)
    assert used == [(1, "opens"), (5, "Table.of"), (5, "late"), (5, "opens"), (5, "through")]


@ON_THE_IMPORTS
def test_the_report_reaches_the_ledger_through_no_helper():
    # A report that called results.ledger_seeds (or any function that opens the folder's ledger)
    # would render a second, later state of the folder than the Results it was given.
    found, used = [], set()
    for name in MODULES:
        if _unit(name) != "benchlab.report":
            continue
        for module in sorted({i.imported for i in _all_imports() if i.importer == name and _unit(i.imported) not in (
                "benchlab.report", "benchlab.ledger")}):
            helpers = _reaching_the_ledger(MODULES[module].read_text()) if module in MODULES else set()
            for line, helper in _helpers_used(MODULES[name].read_text(), module, helpers):
                if (name, helper) in REPORT_OPENS_A_FOLDER:
                    used.add((name, helper))
                else:
                    found.append(f"{MODULES[name].relative_to(SRC.parent)}:{line} {module}.{helper}")
    assert found == []
    assert used == set(REPORT_OPENS_A_FOLDER)  # an allowance nothing needs any more goes


# The top level of the package: what a user or a run script imports, and three modules several
# steps share where no step's package may hold them. A module that belongs to one step lives in
# that step's package; a name every step spells the same lives in names/ (docs/architecture.md).
TOP_LEVEL_MODULES = {
    "__init__",  # the public API: benchlab.log, load, run, compare, expand, ...
    "__main__",  # python -m benchlab
    "runlog",  # benchlab.log / benchlab.summary, inside a run
    "errors",  # the exception tree a caller catches
    "results",  # benchlab.load and read(): the results table a user analyses
    "plan",  # benchlab.expand: a spec's runs and their ids
    "json_types",  # the names of the mappings whose shape benchlab does not own, used by every step
    # Why an attempt failed: the sweep records its verdicts, `collect --rebuild` classifies again and
    # `status` groups them; collect/ may not import execute/, and `status` may not load collect/.
    "triage",
    # The field's evaluation rules: the sweep checks them, the report's Settings line shows them; the
    # report may import neither execute/ nor the spec's models (pydantic), evaluate/ imports ui/.
    "evalrules",
    "secrets",  # what is secret: the ledger records its fingerprints, so it sits beneath the ledger
}
MOST_TOP_LEVEL_MODULES = 10  # issue 40's bound; a module past it goes into a package
TOP_LEVEL_PACKAGES = {"cli", "collect", "evaluate", "execute", "history", "ledger", "report", "search", "spec",
                      "stats", "ui",
                      "names",  # the names every step shares, spelt once and light (docs/architecture.md)
                      "skills"}  # agent skill files (SKILL.md per workflow): data beside its installer


def test_the_top_level_holds_only_the_listed_modules_and_packages():
    modules = {p.stem for p in SRC.glob("*.py")}
    packages = {p.name for p in SRC.iterdir() if p.is_dir() and any(p.glob("*.py"))}  # execute/ has no __init__
    assert modules == TOP_LEVEL_MODULES, "add a module to a step's package, or list it here with its reason"
    assert len(TOP_LEVEL_MODULES) <= MOST_TOP_LEVEL_MODULES
    assert packages == TOP_LEVEL_PACKAGES


def test_the_spec_is_one_package_and_its_parts_are_not_at_the_top():
    # spec.py, spec_yaml.py, spec_checks.py, spec_search.py and quoting.py were flat top-level
    # modules; they are benchlab.spec's now, and `from benchlab.spec import ...` keeps working.
    assert not [p.name for p in SRC.glob("*.py") if p.stem.startswith("spec") or p.stem == "quoting"]
    assert {p.stem for p in (SRC / "spec").glob("*.py")} == {
        "__init__", "models", "load", "yaml_reader", "checks", "search", "quoting", "paths"}
    import benchlab.spec as spec

    assert spec.load_spec is spec.load.load_spec and spec.Spec is spec.models.Spec


#: What the shared names may import at module level: every step imports them, so they import no
#: step (failures.failed_runs reads the ledger's FAILED inside the function, when it is called).
NAMES_MAY_IMPORT = {"benchlab.errors", "benchlab.json_types"}


@ON_THE_IMPORTS
def test_the_shared_names_import_no_step_and_nothing_at_the_packages_top():
    assert {p.stem for p in (SRC / "names").glob("*.py")} == {
        "__init__", "run_files", "results_files", "benchmark_info", "long_format", "failures", "choices", "extras",
        "report_tables",  # the record of report-tables.json, which the report writes and the dashboard reads
        # A package's public names loaded from their modules when asked for: every package whose
        # modules run on several threads at once exports through it (no step's, so here).
        "exports"}
    names = {name for name in MODULES if _unit(name) == "benchlab.names"}
    reached = sorted(f"{i.importer} imports {i.imported}" for i in _all_imports()
                     if i.importer in names and i.module_level and _unit(i.imported) != "benchlab.names"
                     and i.imported not in NAMES_MAY_IMPORT)
    assert reached == []
    # `from benchlab import log` goes through the package's __init__ to run_files.
    assert [i.imported for i in _all_imports() if i.importer == "benchlab.names"] == []


def test_the_report_loads_no_spec_models():
    # The report and analyze read the spec as the ledger keeps it (stats.ranges bounds the
    # intervals from it); loading the spec's models would add pydantic to every report's start.
    import subprocess
    import sys

    code = ("import sys, benchlab.report.writer, benchlab.report.numbers; "
            "print([m for m in sys.modules if m.startswith('benchlab.spec')])")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip().splitlines()[-1] == "[]"


def test_a_sweep_registers_its_analysis_plan_without_loading_the_statistics():
    # The sweep's opening registers the plan through history.preregistration; the history
    # package's diff (and the statistics it computes with) loads only when a diff is asked for.
    import subprocess
    import sys

    code = ("import sys, benchlab.history.preregistration, benchlab.execute.sweep; "
            "print([m for m in ('numpy', 'scipy', 'benchlab.stats', 'benchlab.history.diff') if m in sys.modules])")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip().splitlines()[-1] == "[]"


RUN_FILES = ("config.yaml", "train.log", "metrics.json", "metrics.jsonl", "provenance.json")


def _string_constants(path: Path) -> list[tuple[int, str]]:
    """The string literals of a module's code, docstrings left out."""
    tree = _parse(path.read_text())
    docstrings = {id(node.value) for node in ast.walk(tree)
                  if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)}
    return [(node.lineno, node.value) for node in ast.walk(tree)
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings]


def test_run_directory_file_names_are_spelt_only_in_run_files():
    spelt = sorted(f"{path.relative_to(SRC.parent)}:{line} {value!r}"
                   for name, path in MODULES.items() if name != "benchlab.names.run_files"
                   for line, value in _string_constants(path)
                   if any(value == f or value.endswith("/" + f) for f in RUN_FILES))
    assert spelt == []


def test_long_format_columns_are_listed_only_in_long_format():
    spelt = sorted(f"{path.relative_to(SRC.parent)}:{line}"
                   for name, path in MODULES.items() if name != "benchlab.names.long_format"
                   for node in ast.walk(_parse(path.read_text()))
                   if isinstance(node, ast.List | ast.Tuple)
                   and [c.value for c in node.elts if isinstance(c, ast.Constant)][:4] in (
                       ["benchmark", "task", "config", "seed"], ["task", "config", "seed", "value"])
                   for line in [node.lineno])
    assert spelt == []


def _backend_modules() -> list[str]:
    """The modules that define a backend: a class deriving from ``Backend``."""
    found = []
    for name, path in MODULES.items():
        for node in ast.walk(_parse(path.read_text())):
            if isinstance(node, ast.ClassDef) and any(
                    (isinstance(b, ast.Name) and b.id == "Backend")
                    or (isinstance(b, ast.Attribute) and b.attr == "Backend") for b in node.bases):
                found.append(name)
                break
    return found


def test_the_backend_walk_finds_the_shipped_backends():
    assert {"benchlab.execute.local", "benchlab.execute.ray"} <= set(_backend_modules())


@ON_THE_IMPORTS
def test_the_sweep_imports_no_backend():
    # The sweep knows backends by the protocol in execute/base.py only: a new backend is added
    # without touching it, and the sweep never loads a backend it does not use.
    backends = set(_backend_modules())
    assert sorted(f"{i.line}: {i.imported}" for i in _all_imports()
                  if i.importer == "benchlab.execute.sweep" and i.imported in backends) == []


@ON_THE_IMPORTS
def test_the_sequential_design_is_beneath_the_sweep_and_its_driver_above():
    # The sweep's opening keeps the seeds --until-decided added (sequential.kept_runs), and the
    # driver runs one sweep per look: in one module, that was a cycle through the sweep.
    beneath = sorted(f"{i.line}: {i.imported}" for i in _all_imports() if i.importer == "benchlab.execute.sequential"
                     and i.imported in ("benchlab.execute.sweep", "benchlab.execute.until_decided"))
    assert beneath == []
    assert not [i for i in _all_imports() if i.importer == "benchlab.execute.sweep" and i.imported ==
                "benchlab.execute.until_decided"]
    assert any(i.importer == "benchlab.execute.until_decided" and i.imported == "benchlab.execute.sweep"
               for i in _all_imports())


def test_the_sweep_names_no_backend():
    from benchlab.execute.base import BUILTIN_BACKENDS

    spelt = [f"{line}: {value!r}" for line, value in _string_constants(MODULES["benchlab.execute.sweep"])
             if value in BUILTIN_BACKENDS]
    assert spelt == []


#: The backend protocol and what records an attempt from it: generic for every backend.
PROTOCOL_MODULES = ("benchlab.execute.base", "benchlab.execute.record", "benchlab.execute.provenance")
#: Backend words these modules still spell, each with its reason.
PROTOCOL_BACKEND_WORDS = {
    ("benchlab.execute.provenance", "slurm_job_id"): "AttemptProvenance.job_id reads what releases before wrote",
    ("benchlab.execute.provenance", "slurm_state"): "AttemptProvenance.job_state reads what releases before wrote",
}


def _backend_words(constants: list[tuple[int, str]], backends: set[str], allowed: set[str]) -> list[str]:
    """The string literals that are a backend's name or a key it prefixes (``slurm_job_id``),
    those in ``allowed`` (the registry's own entries) left out."""
    word = re.compile("(" + "|".join(map(re.escape, sorted(backends))) + r")(_\w+)?")
    return [f"{line}: {value!r}" for line, value in constants if value not in allowed and word.fullmatch(value)]


def test_the_backend_protocol_names_no_backend():
    # What a backend reports (Outcome) and how it is recorded is the same for every backend: a
    # field or key named for one (slurm_job_id) makes the next backend borrow another's name.
    from benchlab.execute.base import BUILTIN_BACKENDS

    backends = set(BUILTIN_BACKENDS)
    registry = set(BUILTIN_BACKENDS) | set(BUILTIN_BACKENDS.values())
    planted = [(1, "slurm_job_id"), (2, "ray"), (3, "job_id"), (4, "slurmish"), (5, "local"), (6, "a slurm job")]
    assert _backend_words(planted, backends, {"local"}) == ["1: 'slurm_job_id'", "2: 'ray'"]
    found = [f"{MODULES[name].relative_to(SRC.parent)}:{where}" for name in PROTOCOL_MODULES
             for where in _backend_words(_string_constants(MODULES[name]), backends,
                                         registry | {word for (module, word) in PROTOCOL_BACKEND_WORDS
                                                     if module == name})]
    assert found == []


def test_the_runs_folder_is_joined_only_in_run_files():
    # `results / "runs"` spelt anywhere else would be a second definition of where runs live.
    joined = sorted(f"{path.relative_to(SRC.parent)}:{node.lineno}"
                    for name, path in MODULES.items() if name != "benchlab.names.run_files"
                    for node in ast.walk(_parse(path.read_text()))
                    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div)
                    and any(isinstance(side, ast.Constant) and side.value == "runs"
                            for side in (node.left, node.right)))
    assert joined == []


def _status_values() -> set[str]:
    from benchlab.evaluate.jobs import JobStatus
    from benchlab.ledger import Status

    return {s.value for s in Status} | {s.value for s in JobStatus}


def _bare_statuses(source: str, values: set[str]) -> list[tuple[int, str]]:
    """The status literals of ``source``: a string equal to one of ``values`` compared with,
    assigned to, passed as or defaulted for something named ``status``, or quoted in SQL text
    that mentions ``status``. Docstrings are left out."""
    tree = _parse(source)
    docstrings = {id(node.value) for node in ast.walk(tree)
                  if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)}
    sql_quoted = re.compile("'(" + "|".join(map(re.escape, sorted(values))) + ")'")

    def named_status(node: ast.AST) -> bool:
        return "status" in ast.unparse(node).lower()

    def literals(node: ast.AST | None) -> list[ast.Constant]:
        items = node.elts if isinstance(node, ast.Tuple | ast.List | ast.Set) else [node]
        return [c for c in items if isinstance(c, ast.Constant) and c.value in values]

    found: list[ast.Constant] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare):
            sides = [node.left, *node.comparators]
            if any(named_status(side) for side in sides):
                found += [c for side in sides for c in literals(side)]
        elif isinstance(node, ast.keyword) and node.arg and "status" in node.arg.lower():
            found += literals(node.value)
        elif isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if any(named_status(t) for t in targets):
                found += literals(node.value)
        elif isinstance(node, ast.Dict):
            found += [c for k, v in zip(node.keys, node.values, strict=True)
                      if isinstance(k, ast.Constant) and "status" in str(k.value).lower() for c in literals(v)]
        elif isinstance(node, ast.arguments):
            positional = [*node.posonlyargs, *node.args]
            pairs = [*zip(positional[len(positional) - len(node.defaults):], node.defaults, strict=True),
                     *zip(node.kwonlyargs, node.kw_defaults, strict=True)]
            found += [c for arg, default in pairs if "status" in arg.arg.lower() for c in literals(default)]
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
              and node.func.attr in ("get", "setdefault") and named_status(node.func.value) and len(node.args) > 1):
            found += literals(node.args[1])
        elif (isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings
              and "status" in node.value.lower() and sql_quoted.search(node.value)):
            found.append(node)
    return sorted({(c.lineno, c.value) for c in found})


#: Status literals that must be spelt, by module and a part of the literal, each with its reason.
STATUS_SPELT = {
    ("benchlab.ledger.schema", "DEFAULT 'pending'"):
        "the runs table's DDL is the ledger's file format, kept as the SQL that SQLite stores; "
        "test_the_runs_table_defaults_to_the_pending_status holds it to Status.PENDING",
}


def test_the_status_scan_finds_each_form_of_a_bare_status():
    source = '''
def f(row, statuses, status="failed", *, run_status="pruned"):
    """A docstring may say 'running' and status."""
    if row.status == "completed" or row["status"] in ("queued", "interrupted"):
        pass
    status = "pending"
    statuses.get(row, "running")
    g(status="completed", body={"status": "failed"}, other="completed")
    sql = f"UPDATE runs SET status = 'running' WHERE {row}"
    state = "pruned"
    return row.state == "running"
'''
    assert _bare_statuses(source, _status_values()) == [
        (2, "failed"), (2, "pruned"), (4, "completed"), (4, "interrupted"), (4, "queued"), (6, "pending"),
        (7, "running"), (8, "completed"), (8, "failed"), (9, "UPDATE runs SET status = 'running' WHERE ")]


def test_statuses_are_spelt_only_by_their_enums():
    # Status (ledger/records.py) and JobStatus (evaluate/jobs.py) name every state once; a bare string
    # beside them is a second definition that a renamed or added state would miss.
    values = _status_values()
    spelt = []
    used = set()
    for name, path in MODULES.items():
        for line, value in _bare_statuses(path.read_text(), values):
            allowed = [key for key in STATUS_SPELT if key[0] == name and key[1] in value]
            used.update(allowed)
            if not allowed:
                spelt.append(f"{path.relative_to(SRC.parent)}:{line} {value!r}")
    assert spelt == []
    assert used == set(STATUS_SPELT)  # an allowance nothing needs any more goes


def test_templates_name_statuses_through_the_enum():
    # The UI's templates get Status (and the states their counts show) from ui/app.py.
    quoted = re.compile("(['\"])(" + "|".join(sorted(_status_values())) + ")\\1")
    spelt = sorted(f"{path.relative_to(SRC.parent)}:{n} {m.group(0)}"
                   for path in [*SRC.rglob("*.html"), *SRC.rglob("*.j2")]
                   for n, line in enumerate(path.read_text().splitlines(), 1) for m in quoted.finditer(line))
    assert spelt == []


def test_the_runs_table_defaults_to_the_pending_status(tmp_path: Path):
    from benchlab.ledger import Status, Store

    with Store.create(tmp_path) as store:
        default = {row[1]: row[4] for row in store.conn.execute("PRAGMA table_info(runs)")}["status"]
    assert default == f"'{Status.PENDING.value}'"


#: Modules that send both SIGTERM and SIGKILL outside execute/proctree.py, each with its reason.
KILL_SEQUENCE_SPELT = {
    "benchlab.execute.local": "its event loop never blocks on a grace period: it sends proctree's two "
                              "signals at its own times, through proctree.signal_tree",
    "benchlab.execute.ray": "the task and the worker's reaper are pickled by value to workers where "
                            "benchlab may not be installed, so they cannot call proctree",
}


def _signals_sent(path: Path) -> set[str]:
    """The names of SIGTERM and SIGKILL where a call passes them (a signal sent), leaving out
    ``signal.signal`` (a handler installed) and ``prctl`` (a death signal asked for)."""
    sent = set()
    for node in ast.walk(_parse(path.read_text())):
        if not isinstance(node, ast.Call):
            continue
        callee = ast.unparse(node.func)
        if callee.endswith((".signal", ".prctl")) or callee == "signal":
            continue
        for arg in [*node.args, *(k.value for k in node.keywords)]:
            name = arg.attr if isinstance(arg, ast.Attribute) else arg.id if isinstance(arg, ast.Name) else ""
            if name in ("SIGTERM", "SIGKILL"):
                sent.add(name)
    return sent


def test_the_term_grace_kill_sequence_is_written_only_in_proctree():
    # One module ends processes (recovery, the Slurm node, gpus --reclaim): a fix to the
    # sequence (a longer grace, a process that left its group) then reaches every caller.
    both = sorted(name for name, path in MODULES.items() if name != "benchlab.execute.proctree"
                  and _signals_sent(path) == {"SIGTERM", "SIGKILL"} and name not in KILL_SEQUENCE_SPELT)
    assert both == []
    assert all(_signals_sent(MODULES[name]) == {"SIGTERM", "SIGKILL"} for name in KILL_SEQUENCE_SPELT)


# ---------------------------------------------------------------------------- the ledger's one door

#: The ledger package: every SQL statement on a results folder's ledger is written in it. The
#: evaluation service keeps its own databases (jobs, judge replies) under benchlab.evaluate.
LEDGER_PACKAGE = "benchlab.ledger"
OWN_DATABASES = "benchlab.evaluate"

_SQL = re.compile(r"\bSELECT\b[^\n]*\bFROM\b|\bINSERT\s+(OR\s+\w+\s+)?INTO\b|\bUPDATE\s+\w+\s+SET\b|"
                  r"\bDELETE\s+FROM\b|\bPRAGMA\s+\w+|\b(CREATE|DROP|ALTER)\s+(TEMP\s+)?(TABLE|INDEX)\b|"
                  r"\bBEGIN\s+IMMEDIATE\b")
_CONNECTION_CALLS = {"execute", "executemany", "executescript"}


def _store_private_members() -> set[str]:
    """The private names of :class:`benchlab.ledger.Store` and the ledger's classes it is built
    on (methods and attributes they set)."""
    from benchlab.ledger import Store

    names: set[str] = set()
    for base in Store.__mro__:
        if not base.__module__.startswith(LEDGER_PACKAGE + "."):
            continue
        tree = _parse(MODULES[base.__module__].read_text())
        cls = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == base.__name__)
        names |= {n.name for n in cls.body if isinstance(n, ast.FunctionDef)}
        names |= {n.attr for n in ast.walk(cls) if isinstance(n, ast.Attribute)
                  and isinstance(n.value, ast.Name) and n.value.id == "self"}
    return {n for n in names if n.startswith("_") and not n.endswith("__")}


def _ledger_access(source: str, private: set[str]) -> list[tuple[int, str]]:
    """Where ``source`` reaches into a ledger past its door: an SQL statement (a string, the
    literal parts of an f-string joined), a call of a connection's ``execute``, the ``conn`` of
    a store, ``sqlite3.connect``, the plan's SQL fragment (``in_spec_sql``), or a private member
    of ``Store``. Docstrings are left out: they may name a table or a pragma."""
    tree = _parse(source)
    docstrings = {id(node.value) for node in ast.walk(tree)
                  if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)}
    in_fstring = {id(part) for node in ast.walk(tree) if isinstance(node, ast.JoinedStr) for part in node.values}
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        text = None
        if isinstance(node, ast.JoinedStr):
            text = "".join(p.value if isinstance(p, ast.Constant) and isinstance(p.value, str) else "{}"
                           for p in node.values)
        elif (isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings
              and id(node) not in in_fstring):
            text = node.value
        if text is not None and _SQL.search(text):
            found.append((node.lineno, f"SQL {text[:60]!r}"))
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            if node.func.attr in _CONNECTION_CALLS:
                found.append((node.lineno, f".{node.func.attr}()"))
            elif node.func.attr == "connect" and isinstance(node.func.value, ast.Name) \
                    and node.func.value.id == "sqlite3":
                found.append((node.lineno, "sqlite3.connect()"))
        if isinstance(node, ast.Attribute) and (node.attr in ("conn", "in_spec_sql") or node.attr in private):
            found.append((node.lineno, f".{node.attr}"))
        if isinstance(node, ast.Name) and node.id == "in_spec_sql":
            found.append((node.lineno, "in_spec_sql"))
    return sorted(set(found))


def test_the_ledger_scan_finds_each_way_past_the_door():
    source = '''
def f(store, sqlite3, task):
    """SELECT name FROM runs, in a docstring, is prose."""
    store.conn.execute(f"SELECT run_id FROM runs WHERE {store.in_spec_sql()} AND task = ?", (task,))
    rows = ("UPDATE attempts SET status = ?"
            " WHERE attempt_id = ?")
    with store.transaction() as c:
        c.executemany("INSERT OR REPLACE INTO meta VALUES (?, ?)", rows)
    db = sqlite3.connect("x.db")
    db.execute("PRAGMA data_version")
    store._replace_metrics(c, "r", {}, {})
    text = "select the runs to update"  # words, not a statement
'''
    found = _ledger_access(source, {"_replace_metrics"})
    kinds = [what.split(" ")[0] for _, what in found]
    assert (4, ".conn") in found and (4, ".in_spec_sql") in found and (4, ".execute()") in found
    assert (5, "SQL 'UPDATE attempts SET status = ? WHERE attempt_id = ?'") in found
    assert (8, ".executemany()") in found and (9, "sqlite3.connect()") in found
    assert (10, "SQL 'PRAGMA data_version'") in found and (11, "._replace_metrics") in found
    assert kinds.count("SQL") == 4  # the f-string, the UPDATE, the INSERT, the PRAGMA; not the docstring nor the words
    assert not any(line in (3, 12) for line, _ in found)


def test_the_ledger_is_reached_only_through_its_package():
    # Every SQL statement on the ledger lives in the ledger package: the rest of benchlab asks it
    # for typed records, so the schema can change in one place.
    private = _store_private_members()
    assert {"_has_gpu_use", "_meta_value", "_set_default_meta"} <= private  # the walk sees each class
    leaks = [f"{path.relative_to(SRC.parent)}:{line} {what}"
             for name, path in MODULES.items()
             if _unit(name) not in (LEDGER_PACKAGE, OWN_DATABASES)
             for line, what in _ledger_access(path.read_text(), private)]
    assert leaks == []


def _sqlite3_uses(source: str) -> list[int]:
    """The lines where ``source`` imports ``sqlite3`` (to catch its errors, or open a file with it)."""
    return sorted(node.lineno for node in ast.walk(_parse(source))
                  if (isinstance(node, ast.Import) and any(a.name.split(".")[0] == "sqlite3" for a in node.names))
                  or (isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "sqlite3"))


def test_sqlite_errors_are_caught_only_inside_the_ledger():
    # The ledger translates what SQLite raises at its door (ledger/door.py, errors.LedgerError):
    # a caller that caught sqlite3's errors would miss the file's own failures once translated.
    assert _sqlite3_uses("import os, sqlite3\ndef f():\n    from sqlite3 import DatabaseError\n") == [1, 3]
    found = [f"{path.relative_to(SRC.parent)}:{line}" for name, path in MODULES.items()
             if _unit(name) not in (LEDGER_PACKAGE, OWN_DATABASES) for line in _sqlite3_uses(path.read_text())]
    assert found == []


def _past_the_ledgers_door(source: str) -> list[str]:
    """Where ``source`` imports the ledger package's inside: a module of it
    (``benchlab.ledger.store``), or a name ``benchlab.ledger`` does not export."""
    import benchlab.ledger

    public = set(benchlab.ledger.__all__)
    found = []
    for node in ast.walk(_parse(source)):
        if isinstance(node, ast.ImportFrom) and node.module == LEDGER_PACKAGE:
            found += [f"{node.lineno} {alias.name}" for alias in node.names if alias.name not in public]
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith(LEDGER_PACKAGE + "."):
            found.append(f"{node.lineno} from {node.module}")
        elif isinstance(node, ast.Import):
            found += [f"{node.lineno} import {a.name}" for a in node.names if a.name.startswith(LEDGER_PACKAGE + ".")]
    return found


def test_the_ledger_import_scan_finds_each_way_inside():
    source = ("from benchlab.ledger import Store, _ParamsText\nfrom benchlab.ledger.store import Store\n"
              "import benchlab.ledger.schema\nimport benchlab.ledger\nfrom benchlab.ledger import COMPLETED\n")
    assert _past_the_ledgers_door(source) == [
        "1 _ParamsText", "2 from benchlab.ledger.store", "3 import benchlab.ledger.schema"]


def test_nothing_outside_the_ledger_imports_its_internals():
    # The CLI (and every other module) parses, calls and prints: what it needs of the ledger is
    # what `benchlab.ledger` exports, so the package's modules can be split or merged freely.
    found = sorted(f"{MODULES[name].relative_to(SRC.parent)}:{where}" for name in MODULES
                   if _unit(name) != LEDGER_PACKAGE for where in _past_the_ledgers_door(MODULES[name].read_text()))
    assert found == []


def test_the_cli_reaches_no_ledger_internals():
    private = _store_private_members()
    found = sorted(f"{MODULES[name].relative_to(SRC.parent)}:{line} {what}"
                   for name in MODULES if _unit(name) == "benchlab.cli"
                   for line, what in _ledger_access(MODULES[name].read_text(), private))
    assert found == []


#: What the command line may still import of the ledger and of the statistics' inner modules, by
#: module. ``report`` asks the ledger whether an error was a full disk; ``analyze`` reads a CSV of
#: final values without pandas (stats.runvalues) and ``analyze --pairs`` a folder's ranges itself
#: (its numbers come from the one builder, stats.analyze_table). Each entry goes when its command does.
CLI_REACHES_STILL = {
    "benchlab.cli.cmd_report": {"benchlab.ledger"},
    "benchlab.cli.cmd_analyze": {"benchlab.stats.runvalues", "benchlab.stats.ranges"},
}


def _cli_reaches(imports: list[Import], source: str) -> list[str]:
    """Where a module of the command line reaches past the library's public API: an import (at any
    level, by statement or by ``importlib``; not under ``TYPE_CHECKING``) of ``benchlab.ledger`` or of
    one of ``benchlab.stats``' modules, or an import of ``sqlite3``."""
    found = {f"{i.line} {i.imported}" for i in imports
             if _unit(i.imported) == LEDGER_PACKAGE or i.imported.startswith("benchlab.stats.")}
    return sorted(found) + [f"{line} sqlite3" for line in _sqlite3_uses(source)]


def test_the_cli_scan_sees_each_way_past_the_public_api():
    source = ("import sqlite3\nfrom typing import TYPE_CHECKING\nfrom benchlab.stats import holm\n"
              "if TYPE_CHECKING:\n    from benchlab.ledger import RunRecord\n"
              "def f():\n    from benchlab.ledger import Store\n    from benchlab.stats.compare import holm\n"
              "    import importlib\n    importlib.import_module('benchlab.ledger.store')\n")
    imports = _imports_of("benchlab.cli.cmd_diff", source)
    assert sorted(_cli_reaches(imports, source)) == [
        "1 sqlite3", "10 benchlab.ledger.store", "7 benchlab.ledger", "8 benchlab.stats.compare"]


def test_the_cli_imports_neither_the_ledger_nor_sqlite3_nor_the_statistics_inner_modules():
    # The command line parses, calls the library and prints: what it needs of a results folder's
    # ledger is a library function's typed answer (execute.status.run_states, find_run, ...), and of
    # the statistics what `benchlab.stats` exports (the diff's analysis is stats.analyze_versions).
    found = []
    for name, path in MODULES.items():
        if _unit(name) != "benchlab.cli":
            continue
        allowed = CLI_REACHES_STILL.get(name, set())
        found += [f"{path.relative_to(SRC.parent)}:{where}"
                  for where in _cli_reaches(_imports_of(name), path.read_text())
                  if where.split()[1] not in allowed]
    assert found == []


# ---------------------------------------------------------------- what the report does at run time

def _benchmark_and_search(folder: Path) -> Path:
    """A results folder holding a benchmark (two configs, three seeds, a logged curve each) and,
    under ``search/``, a search study with completed and pruned trials, as ``benchlab run`` and
    ``benchlab search`` leave them. Skips the test without the `search` extra's Optuna, or without
    scikit-learn, whose forests Optuna's fANOVA importances are fitted with."""
    import numpy as np

    optuna = pytest.importorskip("optuna")
    pytest.importorskip("sklearn")

    from benchlab.ledger import COMPLETED, PRUNED, SearchRecord, Store
    from benchlab.plan import Run
    from benchlab.search.study import RUNS_ATTR, SUMMARY_ATTR, journal_storage
    from benchlab.search.summary import store_importances

    def record(store: Store, runs: list[tuple[Run, float, str]]) -> None:
        store.register([run for run, _, _ in runs])
        for run, value, status in runs:
            attempt, _ = store.start_attempt(run.run_id, host="test", started=100.0)
            steps = np.array([0.0, 1.0, 2.0])
            store.finish_attempt(attempt, run.run_id, status=status, run_status=status, exit_code=0,
                                 ended=100.0 + (3.0 if status == COMPLETED else 1.0), metrics={"score": value},
                                 series={"score": (steps, value * steps / 2.0)})

    configs = {"a": [0.50, 0.55, 0.60], "b": [0.70, 0.72, 0.74]}
    with Store.create(folder) as store:
        store._set_meta(name="bench", description="", primary="score", goals={"score": "max"}, metrics=["score"],
                       baseline="a", tasks=["t"], configs=list(configs), targets={"t": None}, references={},
                       seeds=[0, 1, 2], spec={"name": "bench", "command": "python run.py",
                                              "configs": [{"name": c, "params": {}} for c in configs]})
        record(store, [(Run(run_id=f"t-{c}-{s}", benchmark="bench", task="t", config=c, seed=s, params={},
                            command="python run.py"), v, COMPLETED)
                       for c, values in configs.items() for s, v in enumerate(values)])

    study_folder = folder / "search" / "search"
    study = optuna.create_study(storage=journal_storage(study_folder), study_name="bench:search",
                                direction="maximize")
    study.set_user_attr(SUMMARY_ATTR, "final")
    trials = []
    for number, (x, lr, state) in enumerate([(0.1, 1e-3, COMPLETED), (0.4, 1e-2, COMPLETED), (0.9, 1e-4, PRUNED),
                                              (0.6, 3e-3, COMPLETED)]):
        study.enqueue_trial({"x": x, "lr": lr})
        trial = study.ask()
        trial.suggest_float("x", 0.0, 1.0)
        trial.suggest_float("lr", 1e-5, 1e-1, log=True)
        run = Run(run_id=f"trial-{number}", benchmark="bench", task="t", config=f"a[trial={number}]", seed=7,
                  params={"x": x, "lr": lr}, command="python run.py")
        trial.set_user_attr(RUNS_ATTR, [run.run_id])
        value = -(x - 0.5) ** 2
        for step in range(3 if state == COMPLETED else 1):
            trial.report(value - (2 - step) / 10, step)
        study.tell(trial, value if state == COMPLETED else None,
                   state=optuna.trial.TrialState.COMPLETE if state == COMPLETED else optuna.trial.TrialState.PRUNED)
        trials.append((run, value, state))
    store_importances(study)  # as the search's end does
    with Store.create(study_folder) as store:
        store.set_search_record(SearchRecord(study.study_name, metric="score", goal="max", summary="final",
                                             budget=4, sampler="tpe", pruner="median"))
        record(store, trials)
    return folder


#: Run in a fresh interpreter: the results table is read first, then the report is written while
#: every SQLite connection and every module the report loads is recorded. The figures' worker
#: processes are forked after the recording starts: one that opens a database fails its job
#: (and so the report), since what it records stays in its own process.
_RECORD_REPORT = '''
import json, os, sqlite3, sys
from pathlib import Path

import pytest
from benchlab.report import write_report
from benchlab.results import read

folder, out, plots, workers = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3] == "plots", int(sys.argv[4])
table = read(folder)
opened, real, parent = [], sqlite3.connect, os.getpid()
def connect(database, *args, **kwargs):
    opened.append(str(database))
    if os.getpid() != parent:
        raise RuntimeError(f"a figure worker opened {database}")
    return real(database, *args, **kwargs)
sqlite3.connect = connect
before = set(sys.modules)
write_report(table, out, plots=plots, workers=workers)
print(json.dumps({"opened": opened, "loaded": sorted(set(sys.modules) - before)}))
'''


def _record_report(folder: Path, out: Path, *, plots: bool, workers: int = 0) -> dict[str, list[str]]:
    import json
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-c", _RECORD_REPORT, str(folder), str(out), "plots" if plots else "-",
                           str(workers)], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.splitlines()[-1])


def _ledger_code(modules: list[str]) -> list[str]:
    return [m for m in modules if m == "optuna" or m.startswith(("optuna.", "benchlab.search"))]


def test_writing_a_report_of_a_read_table_opens_no_ledger_and_loads_no_search_code(tmp_path: Path):
    # The report renders what the results table holds, search studies included: a report path
    # that opened a ledger would read a second, later state of the folder than the table's.
    folder = _benchmark_and_search(tmp_path / "res")
    seen = _record_report(folder, tmp_path / "rep", plots=False)
    assert seen["opened"] == []
    assert _ledger_code(seen["loaded"]) == []
    page = (tmp_path / "rep" / "report.html").read_text()
    assert "<h2>Search: bench:search</h2>" in page and "Trial 1: <strong>score = -0.01</strong>" in page


def test_the_reports_question_level_section_reads_the_runs_records_without_the_ledger(tmp_path: Path):
    # Runs that kept per-question records (NeMo-Skills' output-rs<k>.jsonl here) get the report's
    # question-level section: the runs it reads are the read table's, not a second look at the ledger.
    import json

    folder = _benchmark_and_search(tmp_path / "res")
    right = {"a": {0, 1}, "b": {0, 1, 2, 3}}
    for config, answers in right.items():
        for seed in range(3):
            out = folder / "runs" / f"t-{config}-{seed}" / "eval-results" / "math"
            out.mkdir(parents=True)
            lines = [json.dumps({"problem": f"p{i}", "expected_answer": "1", "predicted_answer": "1",
                                 "symbolic_correct": i in answers}) for i in range(5)]
            (out / "output-rs0.jsonl").write_text("\n".join(lines) + "\n")
    seen = _record_report(folder, tmp_path / "rep", plots=False)
    assert seen["opened"] == []
    report = (tmp_path / "rep" / "BENCHMARK_REPORT.md").read_text()
    # b answers p2 and p3 right on every seed, a never: each question's mean differs by 1 on 2 of 5.
    assert "Each checkpoint against **a**" in report and "symbolic_correct" in report


@pytest.mark.slow
@pytest.mark.parametrize("workers", [0, 2], ids=["drawn-here", "drawn-in-workers"])
def test_the_report_figures_draw_the_tables_curves_and_open_no_ledger(tmp_path: Path, workers: int):
    # The curves are read once with the results table (results.read) and travel in the
    # report's one immutable ReportData to the figures, in this process or in the workers:
    # drawing them opens neither the benchmark's ledger nor a search study's.
    folder = _benchmark_and_search(tmp_path / "res")
    seen = _record_report(folder, tmp_path / "rep", plots=True, workers=workers)
    assert seen["opened"] == []
    assert _ledger_code(seen["loaded"]) == []
    assert (tmp_path / "rep" / "plots" / "curves_score.png").stat().st_size > 0
    assert {p.name for p in (tmp_path / "rep" / "plots" / "search-search").glob("*.png")} == {
        "history.png", "importances.png", "slice.png", "curves.png"}


# A function longer than this must say why it is kept whole, in a `# long: <reason>` comment
# between its signature and its first statement (docstring included).
LONGEST_FUNCTION = 100
LONG_MARKER = re.compile(r"#\s*long:\s*\S.{10,}")


def _long_functions(source: str, limit: int = LONGEST_FUNCTION) -> list[tuple[str, int]]:
    """(name, lines) of each function over ``limit`` lines whose head carries no `# long:` reason."""
    lines = source.splitlines()
    found = []
    for node in ast.walk(_parse(source)):
        if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        length = (node.end_lineno or node.lineno) - node.lineno + 1
        if length <= limit:
            continue
        body = node.body
        first = body[1] if len(body) > 1 and isinstance(body[0], ast.Expr) and isinstance(
            getattr(body[0], "value", None), ast.Constant) else body[0]
        head = lines[node.lineno - 1 : first.lineno - 1]
        if not any(LONG_MARKER.search(line) for line in head):
            found.append((node.name, length))
    return found


def test_the_long_function_scan_sees_a_long_function_unless_it_says_why():
    filler = "".join(f"    x{i} = {i}\n" for i in range(LONGEST_FUNCTION))
    plain = f"def f():\n{filler}"
    said = f'def g(\n    a: int,\n) -> None:\n    """Doc."""\n    # long: one table of cases, clearer whole\n{filler}'
    said_late = f"def h():\n    x = 0\n    # long: said too late, after the first statement\n{filler}"
    short = "def k():\n    return 1\n"
    assert _long_functions(plain) == [("f", LONGEST_FUNCTION + 1)]
    assert _long_functions(said) == []
    assert _long_functions(said_late) == [("h", LONGEST_FUNCTION + 3)]
    assert _long_functions(short) == []
    assert _long_functions(f"async def a():\n{filler}") == [("a", LONGEST_FUNCTION + 1)]


def test_no_function_is_longer_than_the_limit_without_saying_why():
    found = []
    for path in sorted(SRC.rglob("*.py")):
        where = path.relative_to(SRC).as_posix()
        found += [f"{where}:{name} ({length} lines)" for name, length in _long_functions(path.read_text())]
    assert found == [], (f"functions over {LONGEST_FUNCTION} lines: split them, or say why one is best "
                         "kept whole in a `# long: <reason>` comment at its head")


# Below the limit, a ratchet: functions over 80 lines may become fewer, never more. A new one, or
# one that grew past 80, is split (or another split first); lower the count as functions are split.
RATCHET_LINES = 80
OVER_RATCHET = 26  # `benchlab/` on 2026-11-28: yaml_reader._build (125) down to harness._walk (81)


def _functions_over(source: str, limit: int) -> list[tuple[str, int]]:
    return [(node.name, (node.end_lineno or node.lineno) - node.lineno + 1) for node in ast.walk(_parse(source))
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
            and (node.end_lineno or node.lineno) - node.lineno + 1 > limit]


def test_the_ratchet_counts_every_function_over_its_length_reasons_included():
    filler = "".join(f"    x{i} = {i}\n" for i in range(RATCHET_LINES))
    shorter, indented = filler.split("\n", 1)[1], filler.replace("    ", "        ")
    source = (f"def f():\n{filler}def g():\n    # long: a reason does not take it off the count\n{filler}"
              f"def h():\n{shorter}class C:\n    def m(self):\n{indented}")
    assert _functions_over(source, RATCHET_LINES) == [("f", RATCHET_LINES + 1), ("g", RATCHET_LINES + 2),
                                                      ("m", RATCHET_LINES + 1)]


def test_no_more_functions_over_80_lines_than_before():
    found = sorted((length, f"{path.relative_to(SRC).as_posix()}:{name}") for path in sorted(SRC.rglob("*.py"))
                   for name, length in _functions_over(path.read_text(), RATCHET_LINES))
    assert len(found) <= OVER_RATCHET, (
        f"{len(found)} functions over {RATCHET_LINES} lines, {OVER_RATCHET} allowed: split one "
        f"({', '.join(f'{w} ({n})' for n, w in reversed(found))})")


# ---------------------------------------------------------------- untyped mappings at module boundaries
# Across a module boundary a mapping benchlab shapes is a typed record. Only the mappings whose
# shape it does not decide (a run's configuration, an outside format's JSON, a record's stored
# form) cross as dicts, under the names of benchlab/json_types.py, so a signature says which.
UNTYPED = re.compile(r"\b(?:[Dd]ict|(?:Mutable)?Mapping)\[str, (?:Any|object)\]"  # str -> anything
                     r"|\b(?:[Dd]ict|(?:Mutable)?Mapping)\b(?!\[)")  # a bare `dict`: anything -> anything
ALIASES_MODULE = "json_types.py"

#: Untyped mappings that stay, by module and name as the scan reports it, each with its reason.
UNTYPED_SPELT = {
    ("evaluate/_jail.py", "bwrap_argv(cfg)"): "_jail.py runs as a standard-library script in the sandbox "
                                              "(`python -I`), never imported: its config is the JSON sandbox.py "
                                              "writes, and it crosses no module boundary",
    ("evaluate/_jail.py", "cgroup_create(cgroup)"): "the same script's config (see bwrap_argv)",
    ("evaluate/_jail.py", "run(cfg)"): "the same script's config (see bwrap_argv)",
    ("evaluate/_jail.py", "inner(cfg)"): "the same script's config (see bwrap_argv)",
    ("evaluate/glue.py", "alias Namespace"): "a Python namespace of the code under test: names bound to any "
                                             "value, the mapping `exec` itself takes",
    ("execute/base.py", "keywords(return)"): "the keyword arguments of Backend.for_sweep, by parameter name: "
                                             "the typed BackendOptions spread for a `**` call",
}


def _untyped_mappings(source: str) -> list[str]:
    """Public functions' annotations, public record fields and module-level aliases that spell an
    untyped ``str -> Any`` mapping (what a private helper does inside its module is its own)."""
    found: list[str] = []
    tree = _parse(source)

    def spelt(node: ast.expr | None) -> bool:
        return node is not None and bool(UNTYPED.search(ast.unparse(node)))

    def public(name: str) -> bool:
        return not name.startswith("_") or name.endswith("__")  # __init__ is public

    def visit(body: list[ast.stmt]) -> None:
        # Only what a caller outside the module reaches: the module's and its public classes'
        # functions and fields, not a private class's, nor a function's own inner functions.
        for node in body:
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and public(node.name):
                a = node.args
                params = [*a.posonlyargs, *a.args, *a.kwonlyargs, *(x for x in (a.vararg, a.kwarg) if x)]
                bad = [p.arg for p in params if spelt(p.annotation)] + (["return"] if spelt(node.returns) else [])
                if bad:
                    found.append(f"{node.name}({', '.join(bad)})")
            elif isinstance(node, ast.ClassDef) and not node.name.startswith("_"):
                found.extend(f"{node.name}.{item.target.id}" for item in node.body
                             if isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name)
                             and not item.target.id.startswith("_") and spelt(item.annotation))
                visit(node.body)
            elif isinstance(node, ast.If):  # `if TYPE_CHECKING:` and the like
                visit(node.body + node.orelse)

    visit(tree.body)
    for node in tree.body:  # an alias of its own would hide a mapping from this scan
        value = node.value if isinstance(node, ast.Assign | ast.AnnAssign) else None
        # A value is an alias where it is a type: `dict[str, Any]`, or `dict` alone (not a call of it).
        if value is not None and not isinstance(value, ast.Constant | ast.Tuple | ast.Set | ast.Dict) and (
                spelt(value) if isinstance(value, ast.Subscript | ast.Name | ast.Attribute | ast.BinOp)
                else any(isinstance(n, ast.Subscript) and spelt(n) for n in ast.walk(value))):
            target = node.targets[0] if isinstance(node, ast.Assign) else node.target
            found.append(f"alias {ast.unparse(target)}")
    return found


def test_the_untyped_mapping_scan_sees_parameters_returns_fields_and_aliases():
    source = (
        "from typing import Any, Mapping\n"
        "def f(a: dict[str, Any], b: int) -> None: ...\n"
        "async def g(*, c: 'Mapping[str, Any] | None' = None) -> list[dict[str, Any]]: ...\n"
        "def _private(a: dict[str, Any]) -> dict[str, Any]: ...\n"
        "def typed(a: dict[str, int], b: Mapping[str, float]) -> dict[int, Any]: ...\n"
        "class Record:\n"
        "    params: dict[str, Any]\n"
        "    _cache: dict[str, Any]\n"
        "    count: int\n"
        "    def to_json(self) -> dict[str, Any]: ...\n"
        "    def __init__(self, options: dict[str, Any]) -> None: ...\n"
        "class _Inner:\n"
        "    values: dict[str, Any]\n"
        "    def __init__(self, values: dict[str, Any]) -> None: ...\n"
        "def outer() -> None:\n"
        "    def inner(a: dict[str, Any]) -> None: ...\n"
        "Bag = dict[str, Any]\n"
        "def h(a: dict[str, object], b: dict, c: 'list[Mapping]', d: dict[str, dict[str, float]]) -> dict: ...\n"
        "class Body:\n"
        "    extra: dict[str, object]\n"
        "Loose = dict\n"
        "Row = TypedDict('Row', {'name': str, 'rest': dict[str, object]})\n"
        "NAMES = ('dict', 'list')\n"
        "COPY = dict(a=1)\n"
        "CODE = 'x: dict = {}'\n"
    )
    assert _untyped_mappings(source) == ["f(a)", "g(c, return)", "Record.params", "to_json(return)",
                                          "__init__(options)", "h(a, b, c, return)", "Body.extra", "alias Bag",
                                          "alias Loose", "alias Row"]


def test_no_public_signature_or_record_field_carries_an_untyped_mapping():
    found, used = [], set()
    for path in sorted(SRC.rglob("*.py")):
        if path.name == ALIASES_MODULE and path.parent == SRC:
            continue
        where = path.relative_to(SRC).as_posix()
        for name in _untyped_mappings(path.read_text()):
            if (where, name) in UNTYPED_SPELT:
                used.add((where, name))
            else:
                found.append(f"{where}: {name}")
    assert used == set(UNTYPED_SPELT)  # an allowance nothing needs any more goes
    assert found == [], ("a typed record (a frozen dataclass) where benchlab decides the fields; "
                         "benchlab.json_types' ConfigValues or JsonObject where it does not")


def _shipped_extractors() -> list[str]:
    return sorted(p.stem for p in (SRC / "collect" / "extractors").glob("*.py") if not p.stem.startswith("_"))


def test_the_spec_spells_no_extractor_kind():
    # The spec checks a metric's source against the extractors' registry: a kind written into
    # spec/ (a field, a list of kinds, a word for it) is a second list that goes stale.
    kinds = _shipped_extractors()
    assert {"regex", "json", "csv", "lm_eval"} <= set(kinds)
    spelt = sorted(f"{path.relative_to(SRC.parent)}:{line} {value!r}"
                   for name, path in MODULES.items() if name.startswith("benchlab.spec")
                   for line, value in _string_constants(path)
                   if value in kinds or re.search("'(" + "|".join(kinds) + ")'", value))
    assert spelt == []


def _lists_backends(text: str, backends: list[str]) -> bool:
    """Whether ``text`` lists two backends or more: names joined by a comma, 'or' or 'and'."""
    name = r"\b(?:" + "|".join(backends) + r")\b"
    return re.search(rf"{name}(?:,\s*|\s+or\s+|\s+and\s+){name}", text) is not None


def test_the_command_line_lists_no_backends_by_hand():
    # --backend takes its choices from the registry (cli/app.py's backend_option); a help text
    # that lists backends goes stale once one is registered.
    backends = re.findall(r'"(\w+)": "benchlab\.execute\.', (SRC / "execute" / "base.py").read_text())
    assert {"local", "ray", "slurm"} <= set(backends)
    assert _lists_backends("local, ray, slurm or debug [default: the spec's, or local].", backends)
    assert not _lists_backends("Ray cluster to run on (ray backend), else a local Ray.", backends)
    listed = sorted(f"{path.relative_to(SRC.parent)}:{line} {value!r}"
                    for name, path in MODULES.items() if name.startswith("benchlab.cli")
                    for line, value in _string_constants(path) if _lists_backends(value, backends))
    assert listed == []


# A results folder's own files (the ledger, benchmark.json, versions/, the report) are named in
# results_files.py, as a run directory's are in run_files.py; benchmark.json and each version's
# spec.json are read and written there only, through the record SavedSpec.
def _folder_file_names() -> tuple[str, ...]:
    from benchlab.names import results_files as rf

    return (rf.BENCHMARK_FILE, rf.LEDGER_FILE, rf.LOCK_FILE, rf.REGISTRATION_FILE, rf.RECORDS_FILE,
            rf.SOURCES_FILE, rf.VERSION_FILE, rf.VERSION_SPEC_FILE, rf.DIFF_FILE, rf.PACKAGES_FILE,
            rf.DATASET_CACHE, *rf.REPORT_FILES)


def test_results_folder_file_names_are_spelt_only_in_results_files():
    names = _folder_file_names()
    spelt = sorted(f"{path.relative_to(SRC.parent)}:{line} {value!r}"
                   for name, path in MODULES.items() if name != "benchlab.names.results_files"
                   for line, value in _string_constants(path)
                   if any(value == f or value.endswith("/" + f) for f in names))
    assert spelt == []


# What names the saved spec's files. A function that parses JSON out of one of them, or writes
# JSON into one, reads the record by its string keys (or writes it) beside SavedSpec.
_SAVED_SPEC_NAMES = {"BENCHMARK_FILE", "benchmark_file", "VERSION_SPEC_FILE", "version_spec_file"}


def _saved_spec_read_by_hand(source: str) -> list[str]:
    """The functions of ``source`` that call ``json.load(s)`` on benchmark.json or a version's
    spec.json (named, or a variable assigned from its path), or write ``json.dumps`` into one."""
    def is_json(node: ast.AST, *calls: str) -> bool:
        return (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in calls
                and isinstance(node.func.value, ast.Name) and node.func.value.id == "json")

    found = []
    for fn in ast.walk(_parse(source)):
        if not isinstance(fn, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        paths: set[str] = set()  # the function's variables that hold the file's path

        def names_file(expr: ast.AST, paths: set[str] = paths) -> bool:
            return any((isinstance(n, ast.Name) and (n.id in _SAVED_SPEC_NAMES or n.id in paths))
                       or (isinstance(n, ast.Attribute) and n.attr in _SAVED_SPEC_NAMES)
                       or (isinstance(n, ast.Constant) and isinstance(n.value, str)
                           and (n.value.endswith("benchmark.json") or n.value.endswith("spec.json")))
                       for n in ast.walk(expr))

        for _ in range(2):  # a path assigned from a path assigned from the file
            for n in ast.walk(fn):
                if isinstance(n, ast.Assign | ast.AnnAssign) and n.value is not None and names_file(n.value):
                    targets = n.targets if isinstance(n, ast.Assign) else [n.target]
                    paths |= {t.id for t in targets if isinstance(t, ast.Name)}
        if any((is_json(n, "load", "loads") and any(names_file(a) for a in n.args))
               or (isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
                   and n.func.attr in ("write_text", "open") and names_file(n.func.value)
                   and any(is_json(a, "dumps") for a in ast.walk(n)))
               for n in ast.walk(fn)):
            found.append(fn.name)
    return found


def test_the_saved_spec_check_finds_a_string_key_read():
    planted = (
        "import json\n"
        "from benchlab.names.results_files import benchmark_file, BENCHMARK_FILE\n"
        "def reads(folder):\n"
        "    return json.loads(benchmark_file(folder).read_text())['spec']\n"
        "def writes(folder, spec):\n"
        "    (folder / BENCHMARK_FILE).write_text(json.dumps({'spec': spec}))\n"
        "def literal(folder):\n"
        "    path = folder / 'benchmark.json'\n"
        "    text = path.read_text()\n"
        "    return json.loads(text).get('spec_path')\n"
        "def version_spec(folder, vid):\n"
        "    return json.loads((folder / 'versions' / vid / VERSION_SPEC_FILE).read_text())\n"
        "def through_the_record(folder, other):\n"
        "    from benchlab.names.results_files import SavedSpec\n"
        "    return SavedSpec.read(benchmark_file(folder)), json.loads(other.read_text())\n"
        "def other_file(folder):\n"
        "    return json.loads((folder / 'version.json').read_text())\n"
    )
    assert _saved_spec_read_by_hand(planted) == ["reads", "writes", "literal", "version_spec"]


def test_benchmark_json_is_read_and_written_only_through_its_record():
    found = sorted(f"{path.relative_to(SRC.parent)}: {where}"
                   for name, path in MODULES.items() if name != "benchlab.names.results_files"
                   for where in _saved_spec_read_by_hand(path.read_text()))
    assert found == [], "read it with results_files.SavedSpec.read, write it with SavedSpec.write"


def _goal_lookups(source: str) -> list[int]:
    """The lines of ``source`` that look a goal up by hand: ``goal.get(...)``/``goals.get(...)`` or
    ``goal[...]``/``goals[...]`` on a name or attribute called ``goal`` or ``goals``."""
    def is_goal(node: ast.expr) -> bool:
        return (isinstance(node, ast.Name) and node.id in ("goal", "goals")) or (
            isinstance(node, ast.Attribute) and node.attr in ("goal", "goals"))

    return sorted(n.lineno for n in ast.walk(_parse(source))
                  if (isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == "get"
                      and is_goal(n.func.value))
                  or (isinstance(n, ast.Subscript) and isinstance(n.ctx, ast.Load) and is_goal(n.value)))


def test_the_goal_check_finds_a_lookup_by_hand():
    planted = ("g = info.goal.get(info.primary, 'max')\n"
               "h = goals.get(metric)\n"
               "k = info.goal[info.primary]\n"
               "ok = info.primary_goal, info.metric_goal('loss'), goal_of(goal, 'loss'), info.goal\n"
               "info.goal['loss'] = 'min'\n")
    assert _goal_lookups(planted) == [1, 2, 3]


def test_a_metrics_goal_is_looked_up_only_in_benchmark_info():
    # benchmark_info.goal_of holds the default ("max") and the check; BenchmarkInfo.primary_goal
    # and metric_goal use it, as does every other module, stats/ included.
    found = sorted(f"{path.relative_to(SRC.parent)}:{line}"
                   for name, path in MODULES.items() if name != "benchlab.names.benchmark_info"
                   for line in _goal_lookups(path.read_text()))
    assert found == [], "use BenchmarkInfo.primary_goal / metric_goal, or benchmark_info.goal_of"


# --------------------------------------------------------------------------- the renderers compute nothing
# report/ and ui/ render the one analysis `stats` computes (stats.results_analysis.ResultsAnalysis):
# no statistic of their own, no goal resolved again, no database. A source-tree check: what a
# module of report/ or ui/ calls, imports and reads, by name.

#: Calls that compute a statistic: numpy/pandas reductions and quantiles, scipy's distributions'
#: quantiles and tails, and benchlab.stats' functions that compute one (an interval, a mean band,
#: an alignment of curves, a profile, a CV curve, a rank, an accounting, an analysis). The report's
#: own `analyze` step is not among them: it hands the report's data to the one builder.
STAT_CALLS = {
    "mean", "std", "var", "median", "quantile", "percentile", "sem", "nanmean", "nanstd", "nanvar",
    "nanmedian", "nanpercentile", "nanquantile", "ppf", "isf", "cdf", "sf", "stdtrit", "ndtri", "fsum",
    "t_interval", "normal_interval", "bootstrap_ci", "stratified_bootstrap", "studentized_mean_ci",
    "cv_of_mean", "performance_profile", "align", "common_grid", "summarize", "mean_band", "describe",
    "describe_groups", "describe_runs", "rank", "median_member", "holm", "compare", "account",
    "analyze_seeds", "analyze_accounted", "analyze_questions", "bound_interval",
}
#: What report/ and ui/ may import of benchlab.stats: the analysis' types and its one builder.
STATS_RENDERED = {"benchlab.stats.analysis", "benchlab.stats.results_analysis"}
#: A metric's goal resolved again: the analysis carries the primary's (ResultsAnalysis.goal).
GOAL_NAMES = {"primary_goal", "metric_goal", "goal_of"}
RENDERERS = ("report", "ui")
#: What in report/ and ui/ still computes, each with its reason (a module, or ``module::function``);
#: this list only shrinks.
RENDERERS_THAT_COMPUTE = {
    # The question-level comparison (`compare --level questions`, the report's question section),
    # the explicit pairs of `analyze --pairs` and `compare`'s seed-level assembly are analyses of
    # their own (records per question, pairs a user lists, one candidate's options), not yet the
    # one analysis of the results table.
    "report/comparison.py", "report/pairs.py", "report/questions.py",
    # `benchlab variance`'s figure draws stats.sizing's result (a VarianceAnalysis), not the
    # analysis of a results folder. (The CV-vs-N, profile and radar figures draw
    # ResultsAnalysis.figures, whose numbers stats.figures computes in the worker that draws them.)
    "report/variance_plot.py",
    # The dashboard's curve page reads one (task, metric)'s curves from the ledger while runs grow
    # (running seeds included), apart from the report's analysis; it aligns and bands them with
    # stats.curves.curve_set, the report's function, and averages the seeds' wall times.
    "ui/views.py::curves_data",
}


def statistics_in_renderers(src: Path) -> list[str]:
    """Each place in ``src``'s report/ and ui/ that computes a statistic, resolves a metric's goal
    again, imports more of ``benchlab.stats`` than the analysis or imports sqlite3, as
    ``path:line function what`` (the top-level function or class it is in, ``-`` at module level)."""
    found = []
    for unit in RENDERERS:
        for path in sorted((src / unit).rglob("*.py")):
            rel = path.relative_to(src).as_posix()
            for top in _parse(path.read_text()).body:
                where = getattr(top, "name", "-")
                for node in ast.walk(top):
                    what = _renderer_violation(node)
                    if what is not None:
                        found.append(f"{rel}:{node.lineno} {where} {what}")  # type: ignore[attr-defined]
    return found


def _exempt(found: str) -> bool:
    place, where = found.split(" ", 2)[:2]
    module = place.split(":", 1)[0]
    return module in RENDERERS_THAT_COMPUTE or f"{module}::{where}" in RENDERERS_THAT_COMPUTE


def _renderer_violation(node: ast.AST) -> str | None:
    if isinstance(node, ast.Call):
        name = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", None)
        if name in STAT_CALLS:
            return f"computes: {name}()"
        if isinstance(node.func, ast.Name) and name in GOAL_NAMES:
            return f"resolves a goal: {name}()"
    if isinstance(node, ast.Attribute) and node.attr in GOAL_NAMES and isinstance(node.ctx, ast.Load):
        return f"resolves a goal: .{node.attr}"
    if isinstance(node, ast.Import | ast.ImportFrom):
        names = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
        for name in names:
            if name == "sqlite3":
                return "imports sqlite3"
            if name.startswith("benchlab.stats") and name not in STATS_RENDERED:
                return f"imports {name}"
    return None


def test_the_renderer_check_finds_each_kind_of_computation(tmp_path: Path):
    planted = ("import sqlite3\n"
               "from benchlab.stats.describe import t_interval\n"
               "from benchlab.stats.results_analysis import ResultsAnalysis\n"
               "m = values.mean(axis=0)\n"
               "q = np.percentile(x, 75)\n"
               "half = sps.t.ppf(0.975, 3)\n"
               "g = info.primary_goal\n"
               "ok = analysis.goal, row.mean, fmt(row.std)\n")
    (tmp_path / "report").mkdir()
    (tmp_path / "ui").mkdir()
    (tmp_path / "report" / "planted.py").write_text(planted)
    (tmp_path / "report" / "inside.py").write_text("def draw(v):\n    return v.std()\n")
    found = statistics_in_renderers(tmp_path)
    assert [f.split(" ", 1)[0] for f in found] == [
        "report/inside.py:2", *(f"report/planted.py:{n}" for n in (1, 2, 4, 5, 6, 7))]
    assert found[0].split(" ")[1] == "draw"


def test_report_and_ui_render_the_analysis_and_compute_no_statistic():
    everything = statistics_in_renderers(SRC)
    found = [f for f in everything if not _exempt(f)]
    assert found == [], "compute it in stats/ (stats.results_analysis) and render the field"
    # An exemption names something that is there and still computes: the list only shrinks.
    computing = {f.split(":", 1)[0] for f in everything} | {f"{f.split(':', 1)[0]}::{f.split(' ')[1]}"
                                                             for f in everything}
    assert RENDERERS_THAT_COMPUTE <= computing, RENDERERS_THAT_COMPUTE - computing
