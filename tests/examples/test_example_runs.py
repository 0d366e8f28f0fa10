"""Real runs of the bundled examples, each launched from its spec's own command line.

Each test renders the spec's command for one (task, config, seed) the way a
run is launched (values shell-quoted, cwd the spec's workdir, BENCHLAB_RUN_DIR
set) and checks the files and log the program leaves behind.
"""

from __future__ import annotations

import json
import math
import os
import re
import shlex
import subprocess
import sys
from importlib.util import find_spec
from pathlib import Path
from typing import Any

import pytest

from benchlab.spec import Spec, load_spec

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
SRC = Path(__file__).resolve().parents[2] / "src"
ANSI = re.compile(r"\x1b\[[0-9;]*m")

# find_spec, not importorskip: importing scikit-learn here would cost a second for nothing.
pytestmark = pytest.mark.skipif(
    find_spec("sklearn") is None or find_spec("gymnasium") is None,
    reason="needs the examples extra: pip install 'benchlab[examples]'")


def launch(spec: Spec, task: str, config: str, seed: int, run_dir: Path) -> str:
    """Run one (task, config, seed) of ``spec`` to completion; return its stdout + stderr."""
    run_dir.mkdir(parents=True, exist_ok=True)  # as the executor does before a run starts
    values: dict[str, Any] = {**spec.variables, **spec.task(task).params,
                              **spec.config(config).params,
                              "task": task, "config": config, "seed": seed,
                              "run_dir": str(run_dir), "run_id": "test", "benchmark": spec.name}
    template = spec.config(config).command or spec.command
    assert template is not None
    command = template.format(**{k: shlex.quote(str(v)) for k, v in values.items()})
    # The spec says `python`; run it with this interpreter, which has the extras installed.
    command = re.sub(r"^python\b", shlex.quote(sys.executable), command)
    env = {**os.environ, **spec.env, "BENCHLAB_RUN_DIR": str(run_dir),
           "BENCHLAB_RUN_ID": "test", "BENCHLAB_SEED": str(seed),
           "PYTHONPATH": os.pathsep.join(filter(None, [str(SRC), os.environ.get("PYTHONPATH")]))}
    proc = subprocess.run(command, shell=True, cwd=spec.work_path, env=env, capture_output=True,
                          text=True, timeout=60)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc.stdout + proc.stderr


@pytest.mark.slow
def test_quickstart_run_writes_accuracy_and_a_curve_per_epoch(tmp_path: Path) -> None:
    spec = load_spec(EXAMPLES / "quickstart/benchlab.yaml", overrides=["epochs=8"])
    launch(spec, "digits", "logreg", seed=3, run_dir=tmp_path)

    final = json.loads((tmp_path / "metrics.json").read_text())
    assert 0.0 <= final["accuracy"] <= 1.0
    assert final["accuracy"] > 0.5  # ten classes: chance is about 0.1
    assert final["fit_time"] > 0.0

    steps = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert [s["step"] for s in steps] == list(range(1, 9))
    assert all(0.0 <= s["val_accuracy"] <= 1.0 for s in steps)
    assert all(math.isfinite(s["train_loss"]) and s["train_loss"] > 0.0 for s in steps)
    # Eight epochs of SGD on standardised digits lower the cross-entropy.
    assert steps[-1]["train_loss"] < steps[0]["train_loss"]


@pytest.mark.slow
@pytest.mark.parametrize(
    ("task", "config", "majority"),
    [
        # Always guessing the commonest class: 357/569 benign tumours, 71/178 wines.
        ("breast_cancer", "linear_svm", 357 / 569),
        ("wine", "mlp", 71 / 178),
    ],
    ids=["breast_cancer-linear_svm", "wine-mlp"],
)
def test_quickstart_beats_the_majority_class_on_the_small_datasets(
    tmp_path: Path, task: str, config: str, majority: float
) -> None:
    spec = load_spec(EXAMPLES / "quickstart/benchlab.yaml", overrides=["epochs=3"])
    launch(spec, task, config, seed=0, run_dir=tmp_path)
    final = json.loads((tmp_path / "metrics.json").read_text())
    assert majority < final["accuracy"] <= 1.0
    lines = (tmp_path / "metrics.jsonl").read_text().splitlines()
    assert [json.loads(line)["step"] for line in lines] == [1, 2, 3]


@pytest.mark.slow
def test_quickstart_same_seed_same_curve(tmp_path: Path) -> None:
    spec = load_spec(EXAMPLES / "quickstart/benchlab.yaml", overrides=["epochs=3"])
    # The MLP draws the most random numbers: initial weights, batch order, the split.
    for name in ("a", "b", "c"):
        launch(spec, "wine", "mlp", seed=0 if name == "c" else 2, run_dir=tmp_path / name)
    curve = {name: (tmp_path / name / "metrics.jsonl").read_text() for name in "abc"}
    accuracy = {name: json.loads((tmp_path / name / "metrics.json").read_text())["accuracy"]
                for name in "abc"}
    assert curve["a"] == curve["b"]
    assert accuracy["a"] == accuracy["b"]
    assert curve["a"] != curve["c"]


def trial_metrics(log: str, spec: Spec) -> list[tuple[float, float]]:
    """(frame, total_reward_ma) of every metric line, read with the spec's own regex."""
    source = spec.metrics.primary.source
    assert source is not None and source.kind == "regex" and source.options.regex is not None
    pattern = re.compile(source.options.regex)
    points = [pattern.search(ANSI.sub("", line)) for line in log.splitlines()]
    return [(float(m["step"]), float(m["value"])) for m in points if m]


@pytest.mark.slow
@pytest.mark.parametrize("config", ["cem", "random_search", "reinforce"])
def test_cartpole_run_prints_slm_lab_lines_deterministically(tmp_path: Path, config: str) -> None:
    spec = load_spec(EXAMPLES / "cartpole/benchlab.yaml",
                     overrides=["max_frame=12000", "log_every=3000"])
    first = launch(spec, "cartpole-200", config, seed=1, run_dir=tmp_path / "a")
    second = launch(spec, "cartpole-200", config, seed=1, run_dir=tmp_path / "b")

    # The colours are really there, so reading the numbers depends on stripping them.
    assert "\x1b[" in first
    assert all("trial_metrics: frame:" not in line
               for line in first.splitlines() if "trial_metrics" in line)

    points = trial_metrics(first, spec)
    assert [frame for frame, _ in points] == [3000.0, 6000.0, 9000.0, 12000.0]
    assert all(0.0 <= ma <= 200.0 for _, ma in points)

    fps = spec.metrics.secondary[0].source
    assert fps is not None and fps.options.regex is not None
    rates = [float(m["value"]) for m in re.finditer(fps.options.regex, ANSI.sub("", first))]
    assert len(rates) == 4 and all(r > 0 for r in rates)

    # Same seed, same run: every line equal once the wall-clock fps is set aside.
    def without_fps(log: str) -> list[str]:
        return [re.sub(r"fps:\d+", "fps:-", line) for line in log.splitlines()]

    assert without_fps(first) == without_fps(second)
    assert points == trial_metrics(second, spec)


@pytest.mark.slow
def test_cartpole_seeds_differ(tmp_path: Path) -> None:
    spec = load_spec(EXAMPLES / "cartpole/benchlab.yaml",
                     overrides=["max_frame=6000", "log_every=3000"])
    one = trial_metrics(launch(spec, "cartpole-500", "reinforce", 1, tmp_path / "a"), spec)
    two = trial_metrics(launch(spec, "cartpole-500", "reinforce", 2, tmp_path / "b"), spec)
    assert [f for f, _ in one] == [f for f, _ in two] == [3000.0, 6000.0]
    assert one != two
