"""The report names its methods: lm-eval's own standard error for one-seed evaluations, the
normalisation of the aggregates, the curve alignment, and why a profile was left out."""

from __future__ import annotations

import json

# lm_eval stand-in: copies a v0.4.9-shaped results file into --output_path.
LM_EVAL_SCRIPT = r'''
import os, shutil, sys
out = os.path.join(sys.argv[1], "__ckpt__step-1000")
os.makedirs(out, exist_ok=True)
shutil.copy(os.path.join(os.path.dirname(os.path.abspath(__file__)), "results.json"),
            os.path.join(out, "results_2026-01-01T00-00-00.000001.json"))
'''

LM_EVAL_SPEC = """
name: ckpt-eval
tasks: [{name: gsm8k}]
configs: [{name: step-1000}]
seeds: [0]
retries: 0
command: python run.py {run_dir}
metrics:
  primary: {name: "exact_match,strict-match", goal: max, from: {lm_eval: .}}
"""


def _row(text: str, config: str) -> list[str]:
    line = next(ln for ln in text.splitlines() if ln.startswith("| ") and f"| {config}" in ln)
    return [c.strip() for c in line.strip("|").split("|")]


def test_one_seed_lm_eval_run_shows_the_harness_standard_error_as_its_interval(make_bench):
    from lm_eval_testkit import results_v049

    bench = make_bench(LM_EVAL_SPEC, script=LM_EVAL_SCRIPT)
    (bench.root / "results.json").write_text(json.dumps(results_v049()))
    bench.cli("run", "bench.yaml", "-r", "out", "--no-report", check=True)
    bench.cli("report", "out", "--no-plots", check=True)
    text = (bench.root / "out" / "BENCHMARK_REPORT.md").read_text()
    # By hand: gsm8k exact_match,strict-match 0.5625 with stderr 0.0137 in the file; the normal
    # 95% interval 0.5625 ± 1.959964 · 0.0137 = [0.53565, 0.58935], at the 3 decimals that two
    # significant digits of the standard error (0.014) give.
    row = _row(text, "step-1000")
    assert row[3] == "0.562 ± 0.014 (s.e.)"
    assert row[4] == "[0.536, 0.589] (lm-eval standard error)"
    page = (bench.root / "out" / "report.html").read_text()
    assert "[0.536, 0.589] (lm-eval standard error)" in page
