"""Optional dependencies: which extra brings each module, and the one line said when one is missing.

benchlab's core stays light; what only some users need comes in an extra
(``pip install 'benchlab[serve]'``). Every place that imports an optional module
goes through here, so a missing one is always the same single line naming the
command to run, never a ``ModuleNotFoundError`` traceback::

    benchlab serve needs fastapi, which is not installed: pip install 'benchlab[serve]'
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
from types import ModuleType
from typing import NoReturn

from benchlab.errors import MissingExtra

#: extra -> the top-level modules it brings that benchlab (or a bundled example) imports.
EXTRAS: dict[str, tuple[str, ...]] = {
    "serve": ("fastapi", "starlette", "uvicorn", "httpx", "math_verify", "plotly"),
    "ray": ("ray",),
    "slurm": ("submitit",),
    "gpu": ("pynvml",),
    "search": ("optuna", "cmaes"),
    "tensorboard": ("tensorboard",),
    "examples": ("sklearn", "gymnasium"),
    "export": ("fsspec", "s3fs", "huggingface_hub", "detect_secrets"),
    # Inspect AI's own reader for its logs (a .eval log is a zip compressed with zstd); the
    # harness itself for the tests that run it.
    "evals": ("inspect_ai", "lm_eval"),
    # `benchlab import`: each source read with its own tool's package.
    "import": ("mlflow", "wandb", "hydra"),
    # Launchers the `launcher` backend drives through their command lines (docs/launchers.md); a
    # spec's commands name them, benchlab imports neither.
    "dstack": ("dstack",),
    "skypilot": ("sky",),
    "sagemaker": ("sagemaker",),
}

#: module -> its pip package, where the two names differ.
PACKAGES = {"pynvml": "nvidia-ml-py", "sklearn": "scikit-learn", "math_verify": "math-verify",
            "detect_secrets": "detect-secrets", "inspect_ai": "inspect-ai", "lm_eval": "lm-eval",
            "mlflow": "mlflow-skinny", "hydra": "hydra-core", "sky": "skypilot"}


def install_hint(extra: str) -> str:
    """The command that installs ``extra``: ``pip install 'benchlab[serve]'``."""
    return f"pip install 'benchlab[{extra}]'"


def extra_of(module: str | None) -> str | None:
    """The extra that brings ``module`` (a dotted name is judged by its top level), or None."""
    top = (module or "").split(".")[0]
    return next((extra for extra, modules in EXTRAS.items() if top in modules), None)


def missing_extra(module: str, what: str, extra: str | None = None) -> MissingExtra:
    """The error for ``what`` (``benchlab serve``, ``the ray backend``) lacking ``module``."""
    extra = extra or extra_of(module)
    if extra is None:
        raise ValueError(f"{module!r} is in no extra of benchlab")
    top = module.split(".")[0]
    return MissingExtra(module=top, extra=extra,
                        message=f"{what} needs {PACKAGES.get(top, top)}, which is not installed: "
                                f"{install_hint(extra)}")


def installed(module: str) -> bool:
    """Whether ``module`` can be imported, found without importing it (a heavy one costs seconds)."""
    if module in sys.modules:
        return sys.modules[module] is not None  # None: its import was blocked
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


def require(extra: str, what: str, modules: tuple[str, ...] | None = None) -> None:
    """Raise :class:`MissingExtra` for the first of ``modules`` (default: every module of
    ``extra``) that is not installed."""
    for module in modules or EXTRAS[extra]:
        if not installed(module):
            raise missing_extra(module, what, extra)


def load(module: str, what: str) -> ModuleType:
    """``import module``, or :class:`MissingExtra` saying which extra brings it."""
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as exc:
        if extra_of(exc.name) is None:
            raise
        raise missing_extra(exc.name or module, what) from None


def exit_missing(exc: ModuleNotFoundError, what: str, *, main: bool) -> NoReturn:
    """An optional import failed in a module. Run as a script (``python -m ...``, ``main``), say
    the one line on stderr and exit 2; imported, raise :class:`MissingExtra`. An import of a
    module that no extra brings is raised as it is."""
    if extra_of(exc.name) is None:
        raise exc
    error = missing_extra(exc.name or "", what)
    if not main:
        raise error from None
    sys.stderr.write(f"error: {error}\n")
    raise SystemExit(2)
