"""The SLM-Lab workflow (seeds/000) end to end, as a user types it: a spec with ``${max_frame}``
set by ``-s``, a log-regex metric read from colour-coded ``trial_metrics`` lines, targets, a config
that crashes and one that hangs; run, kill -9, resume, report, search (kept out of
BENCHMARKS.md), promote, run the promoted config in the same results folder, and publish to a
"dev" target, then to a "public" one with the links rewritten.

The trial script stands in for SLM-Lab (a linear policy's return as a closed form of lr and the
seed), so each run takes a fraction of a second and the expected scores are known by hand."""

from __future__ import annotations

import os
import re
import signal
import sqlite3

import pytest

from journeys.journey_kit import benchlab, start, status, wait_for

pytestmark = pytest.mark.slow

LAB = r'''
"""An SLM-Lab trial: prints `trial_metrics` lines with colour codes; --mode crash or hang."""
import argparse, os, threading
p = argparse.ArgumentParser()
p.add_argument("--env", required=True)
p.add_argument("--lr", type=float, required=True)
p.add_argument("--max-frame", type=float, required=True)
p.add_argument("--mode", default="ok")
a = p.parse_args()
seed = int(os.environ["BENCHLAB_SEED"])
if a.mode == "hang":
    print("trial_metrics: frame:0.00e+00 | total_reward_ma:\x1b[32m9.00\x1b[0m", flush=True)
    threading.Event().wait()
quality = max(0.0, 1.0 - 4.0 * (a.lr - 0.4) ** 2)
frames = int(a.max_frame)
for i in range(1, 5):
    frame = frames * i // 4
    reward = 500.0 * quality * (0.4 + 0.6 * i / 4) * min(1.0, frames / 2000) + 3.0 * seed
    print(f"trial_metrics: frame:{frame:.2e} | total_reward_ma:\x1b[32m{reward:.2f}\x1b[0m | fps:1000")
    print(f"eval_metrics: frame:{frame:.2e} | eval_reward_ma:{reward - 1.0:.2f}")
    if a.mode == "crash" and i == 2:
        raise RuntimeError(f"NaN in policy loss at frame {frame} (tensor at 0x7f{seed}a3c0)")
'''

SPEC = r"""
name: slm
variables:
  max_frame: 1000
tasks:
  - {name: CartPole-v1, params: {env: cartpole}, target: 480}
configs:                        # hang first: it is in flight when the sweep is killed
  - {name: hang, params: {lr: 0.4, mode: hang}}
  - {name: ppo, params: {lr: 0.4, mode: ok}}
  - {name: a2c, params: {lr: 0.2, mode: ok}}
  - {name: dqn, params: {lr: 0.0, mode: ok}}
  - {name: crash, params: {lr: 0.4, mode: crash}}
seeds: 2
command: python lab.py --env {env} --lr {lr} --max-frame ${max_frame} --mode {mode}
metrics:
  primary:
    name: total_reward_ma
    goal: max
    from:
      regex: 'trial_metrics: frame:(?P<step>\S+) \| total_reward_ma:(?P<value>[-+]?(?:nan|inf|[.\deE+-]+))'
      series: true
  secondary:
    - name: eval_reward_ma
      goal: max
      from: {regex: 'eval_metrics: frame:(?P<step>\S+) \| eval_reward_ma:(?P<value>[-+.\deE]+)', series: true}
baseline: a2c
settings: [max_frame]
timeout: 3s
retries: 0
search:
  metric: eval_reward_ma
  base_config: a2c
  space:
    lr: {uniform: [0.0, 0.8]}
  seeds: [100]
  budget: 3
  pruner: none
"""


def reward(lr: float, seed: int, frames: int = 2000) -> float:
    """The final total_reward_ma of lab.py, computed here by hand."""
    return 500.0 * max(0.0, 1.0 - 4.0 * (lr - 0.4) ** 2) * min(1.0, frames / 2000) + 3.0 * seed


def _count(db, status):
    try:
        with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as con:
            return con.execute("SELECT COUNT(*) FROM runs WHERE status = ?", (status,)).fetchone()[0]
    except sqlite3.Error:
        return 0


def test_slm_lab_journey(tmp_path):
    root = tmp_path
    (root / "lab.py").write_text(LAB)
    (root / "bench.yaml").write_text(SPEC.lstrip())
    mf = ("-s", "max_frame=2000")
    results = root / "results" / "slm"

    # validate: the plan, with the variable set from the command line in every command.
    plan = benchlab(root, "validate", "bench.yaml", *mf).stdout
    assert "slm: 1 tasks × 5 configs × 2 seeds = 10 runs" in plan
    assert plan.count("--max-frame 2000") == 10
    # Hydra's multirun spelling is refused with the grid to write, and that grid reaches the command.
    multi = benchlab(root, "validate", "bench.yaml", "-s", "max_frame=1e3,2e3", code=2)
    assert "grid: {max_frame: [1e3,2e3]}" in multi.stderr

    # run, then kill -9 of benchlab itself while the hanging run is in flight.
    sweep = start(root, "run", "bench.yaml", *mf, "-j", "2")
    db = results / "benchlab.db"
    wait_for(lambda: _count(db, "completed") >= 2)
    os.kill(sweep.pid, signal.SIGKILL)
    sweep.communicate(timeout=60)
    shown = benchlab(root, "status", "results/slm").stdout
    assert "running" not in shown.splitlines()[0] and "no sweep is running" in shown

    # resume: what finished is kept, the rest runs; the crash and the hang fail (exit 1).
    resumed = benchlab(root, "run", "bench.yaml", *mf, "-j", "2", code=1).stdout
    assert re.search(r"\d of 10 runs already done; running the other \d", resumed)
    assert "timed out after 3s" in resumed and "NaN in policy loss" in resumed
    assert "flagged: CartPole-v1/hang failed on every seed (2 runs: 2 timeout)" in resumed
    now = status(root, "results/slm")
    assert now["counts"] == {"completed": 6, "failed": 4}
    # One crash is one group though each run names its own address.
    assert sorted((g["failure_class"], g["count"]) for g in now["failure_groups"]) == [
        ("exception", 2), ("timeout", 2)]
    with sqlite3.connect(db) as con:  # every run completed at most once, kill or not
        assert con.execute("SELECT MAX(n) FROM (SELECT COUNT(*) n FROM attempts WHERE status = 'completed' "
                           "GROUP BY run_id)").fetchone() == (1,)

    # report: BENCHMARKS.md with the target statuses and the Settings line.
    board = (results / "BENCHMARKS.md").read_text()
    row = next(line for line in board.splitlines() if line.startswith("| CartPole-v1 |"))
    ppo, a2c, dqn = (sum(reward(lr, s) for s in (0, 1)) / 2 for lr in (0.4, 0.2, 0.0))
    assert f"{ppo:.1f} ± 2.1" in row and "✅" in row  # 501.5 >= 480
    assert f"{a2c:.1f} ± 2.1" in row and "⚠️" in row  # 421.5: above 80% of 480
    assert f"{dqn:.1f} ± 2.1" in row and "❌" in row  # 181.5
    assert row.count("✗ failed (0/2 seeds)") == 2
    assert "- **CartPole-v1**: max_frame 2000" in board

    # search: its trials never enter the benchmark's table.
    searched = benchlab(root, "search", "bench.yaml", *mf, "-j", "2").stdout
    assert "3 of 3 trials done (3 completed, 0 pruned this time)" in searched
    assert "promote it: benchlab search bench.yaml -s max_frame=2000 --promote NAME" in searched
    benchlab(root, "report", "results/slm", "--no-plots")
    assert "trial" not in (results / "BENCHMARKS.md").read_text()

    # promote, and run the promoted config into the same folder with the same -s.
    promoted = benchlab(root, "search", "bench.yaml", *mf, "--promote", "tuned").stdout
    lr = float(re.search(r"with lr=([0-9.]+)", promoted).group(1))
    assert "next: benchlab run bench.tuned.yaml -s max_frame=2000" in promoted
    dry = benchlab(root, "run", "bench.tuned.yaml", *mf, "--dry-run").stdout
    assert dry.strip().endswith("2 runs would run (dry run: nothing was started)")
    ran = benchlab(root, "run", "bench.tuned.yaml", *mf, code=1).stdout  # the 4 failures still count
    assert "running the other 2" in ran and "results: results/slm" in ran
    board = (results / "BENCHMARKS.md").read_text()
    header = next(line for line in board.splitlines() if line.startswith("| task |"))
    assert header == "| task | target | hang | ppo | a2c | dqn | crash | tuned | best |"
    tuned = sum(reward(lr, s) for s in (0, 1)) / 2
    assert abs(float(re.search(r"\| \[([0-9.]+) ± [0-9.]+\]\(runs/\w+/\) ✅ \| ppo", board).group(1)) - tuned) < 0.1

    # publish: to the dev target, then to the public one, links rewritten to each.
    for name in ("benchmark-dev", "benchmark"):
        out = benchlab(root, "export", "results/slm", str(tmp_path / "pub" / name),
                       "--public-url", f"https://data.example.org/{name}/")
        assert f"links point to https://data.example.org/{name}/" in out.stdout + out.stderr
    public = (tmp_path / "pub" / "benchmark" / "BENCHMARKS.md").read_text()
    assert "benchmark-dev" not in public
    # Each score links to its run's page (an index.html: S3 and the Hub serve files, not folders).
    links = re.findall(r"\((https://data\.example\.org/benchmark/runs/(\w+)/index\.html)\)", public)
    assert links and all((tmp_path / "pub" / "benchmark" / "runs" / rid / "index.html").is_file()
                         for _, rid in links)
