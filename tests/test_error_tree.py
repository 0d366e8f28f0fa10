"""Every exception benchlab defines belongs to the one tree rooted at ``benchlab.errors.BenchlabError``."""

from __future__ import annotations

import importlib
import inspect
import re
from pathlib import Path

import benchlab
from benchlab import errors
from benchlab.errors import BenchlabError

SRC = Path(benchlab.__file__).resolve().parent

# Outside the tree on purpose (errors.py's docstring says why).
OUTSIDE = {
    "benchlab.evaluate._jail._SetupError",  # a stdlib-only script in its own process; never reaches the library
    "benchlab.execute.gpu_double.NVMLError",  # must derive from Exception exactly as pynvml.NVMLError does
    # The code verdict's own signals, each caught where it is raised and turned into a sample's
    # reason (a test that cannot be judged, data an answer sent that is not plain, a comparison
    # the server refuses to evaluate): none reaches a caller of the library.
    "benchlab.evaluate.glue.GlueError",
    "benchlab.evaluate.plain.PlainDataError",
    "benchlab.evaluate.testplan.Unjudgeable",
}


def _modules() -> list[str]:
    names = []
    for path in sorted(SRC.rglob("*.py")):
        parts = path.relative_to(SRC.parent).with_suffix("").parts
        if parts[-1] == "__main__":
            continue  # importing it runs the CLI
        names.append(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
    return names


def _exception_classes() -> dict[str, type[BaseException]]:
    found = {}
    for name in _modules():
        module = importlib.import_module(name)
        for attr, value in vars(module).items():
            if inspect.isclass(value) and issubclass(value, BaseException) and value.__module__ == name:
                found[f"{name}.{attr}"] = value
    return found


def test_every_exception_class_under_benchlab_subclasses_benchlab_error():
    classes = _exception_classes()
    assert "benchlab.collect.extractors.ExtractFailed" in classes  # the walk reaches every package
    assert "benchlab.execute.gpus.SmiUnavailable" in classes  # execute/ has no __init__.py
    outside = sorted(name for name, cls in classes.items()
                     if not issubclass(cls, BenchlabError) and name not in OUTSIDE)
    assert outside == []


def test_the_tree_in_errors_docstring_names_every_benchlab_error():
    assert errors.__doc__ is not None
    missing = sorted(name for name, cls in _exception_classes().items()
                     if issubclass(cls, BenchlabError)
                     and not re.search(rf"^[ │├└─]+{cls.__name__} ", errors.__doc__, re.MULTILINE))
    assert missing == []
