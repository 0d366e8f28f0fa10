"""`benchlab status` is what one runs, again and again, from a second shell: it must start fast."""

from __future__ import annotations

import subprocess
import sys

from benchlab_testing import BASIC_SPEC

HEAVY = ("numpy", "pandas", "benchlab.spec", "benchlab.collect")


def test_status_reads_the_ledger_without_loading_numpy_pandas_or_the_spec_models(make_bench):
    bench = make_bench(BASIC_SPEC)
    bench.cli("run", "bench.yaml", "-r", "out", "--no-report", check=True)
    code = ("import atexit, sys\n"
            f"atexit.register(lambda: print('loaded:', [m for m in {HEAVY!r} if m in sys.modules]))\n"
            f"sys.argv = ['benchlab', 'status', {str(bench.results)!r}]\n"
            "from benchlab.cli import main\n"
            "main()\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert "8 runs — 8 completed" in proc.stdout
    assert "loaded: []" in proc.stdout
