"""Every bundled example, run (with fewer seeds and steps) and reported as a user would, publishes
with `benchlab export`'s default flags: what benchlab wrote itself (report.html and its embedded
plots, BENCHMARKS.md, results.csv, provenance.json, the versions, the ledger's records) is never
refused as a secret."""

from __future__ import annotations

import json
import shutil
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
}
# Run once for the session too (tests/conftest.py's shared_checkpoint_eval, against the stub endpoint).
SHARED = {"quickstart": "shared_quickstart", "checkpoint-eval": "shared_checkpoint_eval"}


@pytest.mark.parametrize("example", sorted([*SHRUNK, *SHARED]))
def test_a_default_export_of_each_bundled_example_is_not_refused(example, tmp_path, request):
    here = tmp_path / example
    if example == "quickstart":
        # The session's quick start run (tests/conftest.py), copied: the export writes beside it.
        shared = request.getfixturevalue("shared_quickstart")
        shutil.copytree(shared.parents[1] / "quickstart", here)
        shutil.copytree(shared, here / "results")
    elif example in SHARED:
        shutil.copytree(request.getfixturevalue(SHARED[example]), here)
    else:
        old, new, sets = SHRUNK[example]
        shutil.copytree(EXAMPLES / example, here)
        spec = here / "benchlab.yaml"
        text = spec.read_text()
        assert old in text, f"{example}: the spec's seeds line changed; update SHRUNK"
        spec.write_text(text.replace(old, new, 1))
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
