"""`benchlab variance` does the pilot-variance step of a training benchmark whole: the smallest
N for the AUC and for the derivative (slope) summaries, and the two-panel figure of the CV of
the mean against N."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
from PIL import Image

from benchlab_testing import run_cli


def _curves(tmp_path):
    rng = np.random.default_rng(3)
    steps = np.arange(0, 101, 10)
    rows = []
    for seed in range(10):
        rate = 0.05 + rng.normal(0, 0.004)
        noise = rng.normal(0, 0.3, steps.size)
        rows += [("t", "a", seed, "reward", int(s), float(10 * (1 - np.exp(-rate * s)) + 0.02 * s + e))
                 for s, e in zip(steps, noise, strict=True)]
    df = pd.DataFrame(rows, columns=["task", "config", "seed", "metric", "step", "value"])
    path = tmp_path / "runs.csv"
    df.to_csv(path, index=False)
    return df, path


def _cv_by_hand(values: np.ndarray) -> np.ndarray:
    n = np.arange(1, values.size + 1)
    return values.std(ddof=1) / (np.sqrt(n) * abs(values.mean()))


def test_variance_gives_the_smallest_n_for_auc_and_slope_and_draws_both_panels(tmp_path):
    df, path = _curves(tmp_path)
    plot = tmp_path / "variance.png"
    proc = run_cli("variance", str(path), "--config", "a", "--threshold", "0.05", "--output", str(plot), "--json",
                   cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    task = json.loads(proc.stdout)["tasks"][0]
    auc, slope = [], []
    for _, g in df.groupby("seed"):
        s, v = g["step"].to_numpy(float), g["value"].to_numpy(float)
        auc.append(np.sum((v[1:] + v[:-1]) * np.diff(s)) / 2 / (s[-1] - s[0]))
        w = s >= s[-1] - 0.25 * (s[-1] - s[0])  # the last quarter of the steps
        slope.append(np.polyfit(s[w], v[w], 1)[0])
    for key, values in (("auc", np.array(auc)), ("slope", np.array(slope))):
        cv = _cv_by_hand(values)
        assert np.allclose(task[key]["cv"], cv)
        below = np.flatnonzero(cv < 0.05)
        assert task[key]["smallest_n"] == (int(below[0]) + 1 if below.size else None)
    with Image.open(plot) as img:
        assert img.size == (1200, 480)  # two panels side by side, 10 x 4 inches at 120 dpi
    text = run_cli("variance", str(path), "--config", "a", cwd=tmp_path)
    assert text.returncode == 0 and " slope " in text.stdout and " auc " in text.stdout
