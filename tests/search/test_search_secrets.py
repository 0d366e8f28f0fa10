"""A search over a spec with a secret variable: the trials get the value, nothing it prints shows it."""

from __future__ import annotations

import pytest

from benchlab_testing import run_cli

SPEC = """name: sec
tasks: [{name: t}]
configs: [{name: a, params: {lr: 0.1}}]
seeds: 1
variables: {tok: null}
secrets: [tok]
command: python run.py --t ${tok} --lr {lr}
metrics: {primary: score}
search: {metric: {name: val, goal: max}, space: {lr: {log_uniform: [0.01, 1.0]}}, budget: 2}
"""

RUN = """import json, os
ok = os.environ.get("BENCHLAB_SECRET_TOK") == "hf_searchtoken1234567890"
with open(os.path.join(os.environ["BENCHLAB_RUN_DIR"], "metrics.json"), "w") as f:
    json.dump({"score": 1.0, "val": 1.0 if ok else 0.0}, f)
"""


@pytest.mark.slow
def test_a_searchs_trials_get_the_secret_and_its_output_masks_it(tmp_path):
    (tmp_path / "bench.yaml").write_text(SPEC)
    (tmp_path / "run.py").write_text(RUN)
    proc = run_cli("search", "bench.yaml", "-s", "tok=hf_searchtoken1234567890", "-j", "1", cwd=tmp_path,
                   timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "val = 1 " in proc.stdout  # the trial's run read the value from its environment
    assert "hf_searchtoken1234567890" not in proc.stdout + proc.stderr
    assert "promote it: benchlab search bench.yaml -s 'tok=<secret>' --promote NAME" in proc.stdout
    written = [p for p in (tmp_path / "results").rglob("*") if p.is_file()
               and b"hf_searchtoken1234567890" in p.read_bytes()]
    assert written == []
