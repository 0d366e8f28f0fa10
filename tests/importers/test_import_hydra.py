"""`benchlab import hydra`: the jobs of a multirun that the real Hydra ran (``-m``).

The app computes its accuracy from its config by a formula; the expected numbers are that
formula applied to each job's config as OmegaConf loads it, not what benchlab read.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from import_report_rows import report_row

from benchlab_testing import run_cli

pytest.importorskip("hydra")

APP = r'''
import json, logging, math
import hydra
from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig

log = logging.getLogger(__name__)

@hydra.main(version_base=None, config_path="conf", config_name="config")
def main(cfg: DictConfig) -> None:
    out = HydraConfig.get().runtime.output_dir
    for epoch in range(3):
        acc = 0.5 + cfg.optimizer.boost + 0.05 * epoch + 0.01 * math.sin(cfg.seed + 1)
        log.info("epoch=%d val_acc=%.6f", epoch, acc)
    if cfg.seed == 9:
        return  # a job that reports nothing
    with open(f"{out}/metrics.json", "w") as f:
        json.dump({"loss": 1 - acc}, f)

if __name__ == "__main__":
    main()
'''
CONFIG = "defaults:\n  - optimizer: sgd\n  - _self_\nseed: 0\ndata: digits\n"
OPTIMIZERS = {"sgd": "boost: 0.0\nlr: 0.1\n", "adam": "boost: 0.1\nlr: 0.001\n"}
REGEX = r"{regex: 'epoch=(?P<step>\d+) val_acc=(?P<value>\S+)', file: app.log, series: true}"


def _expected(config: dict) -> float:
    import math

    return 0.5 + config["optimizer"]["boost"] + 0.05 * 2 + 0.01 * math.sin(config["seed"] + 1)


@pytest.fixture(scope="module")
def multirun(tmp_path_factory) -> Path:
    tmp = tmp_path_factory.mktemp("hydra")
    (tmp / "app.py").write_text(APP)
    (tmp / "conf" / "optimizer").mkdir(parents=True)
    (tmp / "conf" / "config.yaml").write_text(CONFIG)
    for name, text in OPTIMIZERS.items():
        (tmp / "conf" / "optimizer" / f"{name}.yaml").write_text(text)
    proc = subprocess.run([sys.executable, "app.py", "-m", "optimizer=sgd,adam", "seed=0,1,2",
                           "hydra.sweep.dir=multirun/day/time"], cwd=tmp, capture_output=True, text=True,
                          timeout=600, env={**os.environ, "HYDRA_FULL_ERROR": "1"})
    assert proc.returncode == 0, proc.stderr[-3000:]
    return tmp


def test_a_multirun_imports_by_its_overrides_with_the_metric_read_by_an_extractor(multirun: Path):
    from omegaconf import OmegaConf

    proc = run_cli("import", "hydra", "multirun/day/time", "--results", "res", "--metric", "val_acc", "--from",
                   REGEX, "--baseline", "optimizer=sgd", cwd=multirun, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert "imported 6 runs (0 already there, 0 left out)" in proc.stdout

    expected: dict[str, list[float]] = {}
    for job in sorted((multirun / "multirun" / "day" / "time").glob("[0-9]*")):
        config = OmegaConf.to_container(OmegaConf.load(job / ".hydra" / "config.yaml"))
        expected.setdefault(config["optimizer"]["boost"], []).append(_expected(config))
    import benchlab

    table = benchlab.load(multirun / "res")
    # Named by the overrides but the seed, as Hydra's own override_dirname names them.
    assert sorted(set(table.config)) == ["optimizer=adam", "optimizer=sgd"]
    assert set(table.task) == {"app"}
    for name, boost in (("sgd", 0.0), ("adam", 0.1)):
        got = table[(table.config == f"optimizer={name}") & (table.metric == "val_acc") & table.step.isna()]
        assert np.allclose(sorted(got.value), sorted(expected[boost]), atol=1e-6)
        curves = table[(table.config == f"optimizer={name}") & (table.metric == "val_acc") & table.step.notna()]
        assert sorted(set(curves.step)) == [0.0, 1.0, 2.0]
        assert set(table[table.config == f"optimizer={name}"].metric) == {"val_acc", "loss"}  # metrics.json too

    proc = run_cli("report", "res", "--no-plots", "--no-html", cwd=multirun, timeout=300)
    assert proc.returncode == 0, proc.stderr
    text = (multirun / "res" / "BENCHMARK_REPORT.md").read_text()
    for name, boost in (("sgd", 0.0), ("adam", 0.1)):
        (mean, mean_tol), (std, std_tol) = report_row(text, f"optimizer={name}", "3/3")
        assert abs(mean - np.mean(expected[boost])) <= mean_tol + 1e-6
        assert abs(std - np.std(expected[boost], ddof=1)) <= std_tol + 1e-6
    # No spec made these runs: the report offers no `benchlab run` to make them again.
    reproduction = text.split("## Reproduction", 1)[1]
    assert "benchlab run" not in reproduction and "imported_from" in reproduction
    run_dir = next((multirun / "res" / "runs").iterdir())
    assert (run_dir / ".hydra" / "overrides.yaml").exists()
    assert "val_acc=" in (run_dir / "train.log").read_text()
    origin = json.loads((run_dir / "provenance.json").read_text())["imported_from"]
    assert origin["source"] == "hydra" and origin["job"] == "app" and origin["overrides"]


def test_jobs_without_the_metric_are_named_and_the_others_imported(multirun: Path, tmp_path: Path):
    proc = subprocess.run([sys.executable, str(multirun / "app.py"), "-m", "optimizer=sgd", "seed=1,9",
                           f"hydra.sweep.dir={tmp_path}/multirun/x/y"], cwd=multirun, capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    proc = run_cli("import", "hydra", "multirun", "--results", "res", "--metric", "loss", "--json", cwd=tmp_path,
                   timeout=300)
    assert proc.returncode == 2
    got = json.loads(proc.stdout)
    assert got["added"] == ["app/optimizer=sgd/s1"]
    [skipped] = got["skipped"]
    assert skipped["run"].endswith("multirun/x/y/1 (app #1)")
    assert skipped["reason"].startswith("logged no 'loss' (it logged: ")


def test_a_bad_from_is_one_line(multirun: Path):
    proc = run_cli("import", "hydra", "multirun", "--results", "res2", "--metric", "val_acc", "--from",
                   "{regex: '(', jsn: x}", cwd=multirun, timeout=300)
    assert proc.returncode == 2
    assert len(proc.stderr.strip().splitlines()) == 1 and proc.stderr.startswith("error: --from {regex: '(', jsn: x}")


def test_an_imported_folder_is_read_by_rebuild_diff_export_and_the_dashboard(multirun: Path, tmp_path: Path):
    import shutil

    import benchlab

    proc = run_cli("import", "hydra", str(multirun / "multirun" / "day"), "--results", "res", "--metric", "val_acc",
                   "--from", REGEX, cwd=tmp_path, timeout=300)
    assert proc.returncode == 0, proc.stderr
    before = benchlab.load(tmp_path / "res").sort_values(["config", "seed", "metric", "step"], ignore_index=True)
    shutil.copytree(tmp_path / "res", tmp_path / "copy")

    # The run directories alone give the ledger again, as they do for runs benchlab launched.
    proc = run_cli("collect", "res", "--rebuild", cwd=tmp_path, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert "6 completed" in proc.stdout
    after = benchlab.load(tmp_path / "res").sort_values(["config", "seed", "metric", "step"], ignore_index=True)
    assert after.equals(before)

    proc = run_cli("diff", "copy", "res", "--json", "--reps", "0", cwd=tmp_path, timeout=300)
    assert proc.returncode == 0, proc.stderr
    moved = json.loads(proc.stdout)
    assert moved and "Traceback" not in proc.stderr

    assert run_cli("report", "res", "--no-plots", cwd=tmp_path, timeout=300).returncode == 0
    proc = run_cli("export", "res", str(tmp_path / "published"), cwd=tmp_path, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert len(list((tmp_path / "published").glob("runs/*/provenance.json"))) == 6
    assert (tmp_path / "published" / "BENCHMARK_REPORT.md").exists()

    from starlette.testclient import TestClient

    from benchlab.ui.app import create_app
    from benchlab.ui.library import Library

    with TestClient(create_app(Library([tmp_path / "res"]), warm_up=False)) as client:
        page = client.get("/b/res/numbers")
    assert page.status_code == 200 and "optimizer=adam" in page.text
