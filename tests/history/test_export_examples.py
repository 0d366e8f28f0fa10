"""Every bundled example, run (with fewer seeds and steps) and reported as a user would, publishes
with `benchlab export`'s default flags: what benchlab wrote itself (report.html and its embedded
plots, BENCHMARKS.md, results.csv, provenance.json, the versions, the ledger's records) is never
refused as a secret."""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from importlib.util import find_spec
from pathlib import Path

import pytest

from benchlab_testing import run_cli

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"

pytestmark = [pytest.mark.slow, pytest.mark.skipif(
    find_spec("sklearn") is None or find_spec("gymnasium") is None,
    reason="needs the examples extra: pip install 'benchlab[examples]'")]

# (example, what its spec's seeds line becomes, -s overrides): small enough for two cores. The quick
# start is the session's (tests/conftest.py's shared_quickstart: 3 seeds, 3 epochs).
SHRUNK = {
    "cartpole": ("seeds: [0, 1, 2, 3, 4]", "seeds: [0, 1]", ["max_frame=2000", "log_every=500"]),
    "search": ("seeds: 3 ", "seeds: 2 ", []),
    "checkpoint-eval": ("seeds: [0]", "seeds: [0]", []),
}


@pytest.fixture(scope="module")
def endpoint() -> Iterator[str]:
    """benchlab's stub model server, for the checkpoint-eval example."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen([sys.executable, "-m", "benchlab.evaluate.stub", "--port", str(port), "--model",
                             "step-1000=0.45", "--model", "step-2000=0.6", "--model", "step-3000=0.75"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while True:
        try:
            urllib.request.urlopen(url + "/v1/models", timeout=1).read()
            break
        except OSError:
            if time.monotonic() > deadline or proc.poll() is not None:
                proc.kill()
                raise RuntimeError("the stub model server did not start") from None
            time.sleep(0.2)
    yield url
    proc.terminate()
    proc.wait(timeout=10)


@pytest.mark.parametrize("example", [*sorted(SHRUNK), "quickstart"])
def test_a_default_export_of_each_bundled_example_is_not_refused(example, tmp_path, request):
    here = tmp_path / example
    if example == "quickstart":
        # The session's quick start run (tests/conftest.py), copied: the export writes beside it.
        shared = request.getfixturevalue("shared_quickstart")
        shutil.copytree(shared.parents[1] / "quickstart", here)
        shutil.copytree(shared, here / "results")
    else:
        old, new, sets = SHRUNK[example]
        shutil.copytree(EXAMPLES / example, here)
        spec = here / "benchlab.yaml"
        text = spec.read_text()
        assert old in text, f"{example}: the spec's seeds line changed; update SHRUNK"
        spec.write_text(text.replace(old, new, 1))
        if example == "checkpoint-eval":
            sets = [f"model_url={request.getfixturevalue('endpoint')}"]
        overrides = [a for s in sets for a in ("-s", s)]
        # The report is written by the command a user runs next, below.
        ran = run_cli("run", "benchlab.yaml", *overrides, "-r", "results", "-j", "2", "--no-report", cwd=here,
                      timeout=600)
        assert ran.returncode == 0, ran.stdout + ran.stderr
    run_cli("report", "results", cwd=here, check=True)
    assert "data:image/png;base64," in (here / "results" / "report.html").read_text()  # plots embedded
    out = run_cli("export", "results", str(tmp_path / "published"), "--json", cwd=here)
    assert out.returncode == 0, out.stderr
    published = json.loads(out.stdout)
    assert "report.html" in published["uploaded_files"] and "ledger-records.json" in published["uploaded_files"]
