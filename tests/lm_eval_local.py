"""lm-evaluation-harness's own command line, with its task index built from ``--include_path`` only.

Usage: ``python tests/lm_eval_local.py ARGS``, ARGS those of ``lm_eval``.

On every start the harness reads each of its ~14,000 bundled task files to index them (about 17 s
of CPU on a two-core machine, most of an ``lm_eval --model dummy`` run), though the tests evaluate
only tasks of their own, written under ``--include_path``. This runs the harness's ``cli_evaluate``
with its ``TaskManager`` told not to include the bundled tasks: the evaluation, and every file it
writes, are the harness's. The tests that check what a user's own ``lm_eval`` or ``python -m
lm_eval`` command records (the tool named in provenance, the docs' worked examples) run the real
entry point.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

# Run as a script, this folder is first on sys.path, and its test packages (evaluate/ among them)
# would shadow the harness's own imports.
if sys.path and Path(sys.path[0] or ".").resolve() == Path(__file__).resolve().parent:
    del sys.path[0]

from lm_eval.tasks import manager  # noqa: E402

_index_all = manager.TaskManager.__init__


def _index_included(self: manager.TaskManager, *args: Any, **kwargs: Any) -> None:
    kwargs.setdefault("include_defaults", False)
    _index_all(self, *args, **kwargs)


manager.TaskManager.__init__ = _index_included  # type: ignore[method-assign]

if __name__ == "__main__":
    from lm_eval.__main__ import cli_evaluate

    sys.exit(cli_evaluate())
