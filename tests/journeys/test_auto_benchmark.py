"""The auto-benchmark checklist (seeds/001) end to end: configurations as a YAML block, 2 retries
(a flaky run recovers, a broken config fails every attempt), the failure log, progress with an
ETA on a terminal, every section of BENCHMARK_REPORT.md, and its reproduction commands run again
from a fresh clone giving the same table."""

from __future__ import annotations

import csv
import io
import os
import pty
import re
import subprocess
import sys

import pytest

from journeys.journey_kit import SRC, benchlab, git, status

pytestmark = pytest.mark.slow

TRAIN = '''
import argparse, json, os
p = argparse.ArgumentParser()
p.add_argument("--model"); p.add_argument("--lr", type=float); p.add_argument("--epochs", type=int)
p.add_argument("--dataset"); p.add_argument("--seed", type=int)
a = p.parse_args()
if a.model == "broken":
    raise SystemExit("ValueError: vit_small needs 224x224 inputs, got 32x32")
marker = f"flaky-{a.dataset}-{a.seed}.done"
if a.model == "flaky" and not os.path.exists(marker):
    open(marker, "w").close()
    raise RuntimeError("CUDA error: an illegal memory access was encountered")
acc = {"cifar": 0.80, "svhn": 0.90}[a.dataset] - abs(a.lr - 0.01) * 5 + 0.002 * a.seed
latency = {"resnet50": 12.0, "flaky": 12.5, "broken": 30.0}[a.model]
json.dump({"accuracy": round(acc, 6), "latency_ms": latency},
          open(os.path.join(os.environ["BENCHLAB_RUN_DIR"], "metrics.json"), "w"))
'''

SPEC = """
name: auto
description: three configurations on two datasets, three seeds each
tasks:
  - {name: cifar, params: {dataset: cifar}}
  - {name: svhn, params: {dataset: svhn}}
configs:
  - name: baseline
    params:
      model: resnet50
      lr: 0.01
      epochs: 100
  - name: variant_a
    params:
      model: flaky
      lr: 0.001
      epochs: 100
  - name: variant_b
    params:
      model: broken
      lr: 0.001
      epochs: 100
seeds: 3
command: python train.py --model {model} --lr {lr} --epochs {epochs} --dataset {dataset} --seed {seed}
metrics:
  primary: {name: accuracy, goal: max}
  secondary: [{name: latency_ms, goal: min}]
baseline: baseline
retries: 2
"""

SECTIONS = ["## Summary", "## Results", "## Plots", "## Statistical comparisons", "## Configurations",
            "## Failure log", "## Reproduction"]


def _on_a_terminal(root, *args: str) -> str:
    """``benchlab ARGS`` with a terminal for its output, as a user sees it: the live bar."""
    leader, follower = pty.openpty()
    env = {**os.environ, "PYTHONPATH": SRC + os.pathsep + os.environ.get("PYTHONPATH", ""), "COLUMNS": "160",
           "TERM": "xterm"}
    env.pop("NO_COLOR", None)
    proc = subprocess.Popen([sys.executable, "-m", "benchlab", *args], cwd=root, env=env, stdin=subprocess.DEVNULL,
                            stdout=follower, stderr=follower)
    os.close(follower)
    out = bytearray()
    while True:
        try:
            chunk = os.read(leader, 65536)
        except OSError:  # the terminal closed: the command ended
            break
        if not chunk:
            break
        out += chunk
    proc.wait(timeout=300)
    os.close(leader)
    return out.decode(errors="replace")


def _table(path) -> list[tuple[str, ...]]:
    rows = list(csv.DictReader(io.StringIO(path.read_text())))
    return sorted((r["task"], r["config"], r["seed"], r["metric"], r["value"]) for r in rows)


def test_auto_benchmark_journey(tmp_path):
    root = tmp_path / "project"
    root.mkdir()
    (root / "train.py").write_text(TRAIN)
    (root / "bench.yaml").write_text(SPEC.lstrip())
    (root / ".gitignore").write_text("results/\n*.done\n")
    git(root, "init", "-q")
    git(root, "add", "-A")
    git(root, "commit", "-qm", "benchmark")

    shown = _on_a_terminal(root, "run", "bench.yaml", "-j", "2")
    plain = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", shown)
    assert re.search(r"sweep .* \d+/18 .* ETA \d", plain)  # the live bar, with its ETA
    assert "18 runs: 12 completed, 6 failed" in plain
    # The flaky config's first attempts failed and were retried; it recovered.
    assert re.search(r"retrying \w+/variant_a/s\d \(attempt 1 failed: .*CUDA error", plain)

    now = status(root, "results/auto")
    assert now["counts"] == {"completed": 12, "failed": 6}
    # The flaky run recovered on its second attempt; the broken config used up its 2 retries.
    assert len(list(root.glob("flaky-*.done"))) == 6
    failed = {item["run"]: item["attempt"] for items in now["failures"].values() for item in items}
    assert failed == {f"{t}/variant_b/s{s}": 3 for t in ("cifar", "svhn") for s in range(3)}

    report = (root / "results/auto/BENCHMARK_REPORT.md").read_text()
    positions = [report.index(s) for s in SECTIONS]
    assert positions == sorted(positions)  # every section, in order
    failures = report.split("## Failure log")[1].split("\n## ")[0]
    assert failures.count("/variant_b/s") >= 6 and "needs 224x224 inputs" in failures
    assert "| cifar/variant_b/s0 | 3 | exit-code | exited with code 1 |" in failures  # 1 try + 2 retries
    assert "variant_a" not in failures  # it recovered
    for head in ("**Date:**", "**Task suite:** cifar, svhn", "**Primary metric:** accuracy (higher is better)",
                 "**Seeds per config:**", "**Hardware:**"):
        assert head in report

    # The reproduction commands, run again from a fresh clone of the project.
    block = report.split("## Reproduction")[1].split("```bash")[1].split("```")[0]
    commit = re.search(r"git -C \S+ checkout ([0-9a-f]{40})", block).group(1)
    assert commit == git(root, "rev-parse", "HEAD").strip()
    assert re.search(r"benchlab run \S+/bench\.yaml --results \S+", block)
    clone = tmp_path / "clone"
    git(tmp_path, "clone", "-q", str(root), str(clone))
    git(clone, "checkout", "-q", commit)
    benchlab(clone, "run", "bench.yaml", "--results", "results/again", "-j", "2", code=1)
    benchlab(clone, "report", "results/again", "--no-plots")
    assert _table(clone / "results/again/results.csv") == _table(root / "results/auto/results.csv")
