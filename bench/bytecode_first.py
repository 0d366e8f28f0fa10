"""benchlab's bytecode written before a bench times anything, as ``pip install`` leaves it.

With PYTHONDONTWRITEBYTECODE set (some machines' images set it), an editable checkout would be
compiled again by every process a bench times, and the figure would measure the compiler. The
bench scripts run as ``python bench/NAME.py``, which puts this folder first on sys.path.
"""

from __future__ import annotations

import compileall
from pathlib import Path


def compile_benchlab() -> None:
    import benchlab

    compileall.compile_dir(Path(benchlab.__file__).parent, quiet=1)
