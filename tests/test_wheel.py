"""The wheel works on its own: built from the checkout, installed into a fresh virtualenv, it runs
the quick start end to end, with its templates, static files, datasets and skills inside."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.slow

# Files that are not Python modules and that a command reads at run time.
DATA = ["benchlab/report/templates/BENCHMARK_REPORT.md.j2", "benchlab/ui/static/ui.js", "benchlab/ui/static/ui.css",
        "benchlab/ui/templates/base.html", "benchlab/evaluate/data/eval.yaml", "benchlab/evaluate/data/pyfunc.jsonl",
        "benchlab/skills/paired-seeds/SKILL.md", "benchlab/py.typed"]


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("dist")
    proc = subprocess.run([sys.executable, "-m", "pip", "wheel", str(ROOT), "--no-deps", "-w", str(out), "-q"],
                          capture_output=True, text=True, timeout=600)
    if proc.returncode != 0 and "No matching distribution found for hatchling" in proc.stderr:
        pytest.skip("hatchling (the build backend) cannot be fetched here")
    assert proc.returncode == 0, proc.stderr
    (built,) = out.glob("benchlab-*.whl")
    return built


def test_the_wheel_holds_every_file_a_command_reads(wheel):
    names = set(zipfile.ZipFile(wheel).namelist())
    assert [d for d in DATA if d not in names] == []
    assert not any(n.startswith(("tests/", "bench/", "benchlab/tests")) for n in names)


def test_the_quick_start_runs_from_the_wheel_in_a_fresh_virtualenv(wheel, tmp_path):
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300)
    py = venv / "bin" / "python"
    subprocess.run([str(py), "-m", "pip", "install", "-q", "--no-deps", str(wheel)], check=True, timeout=300)
    # The dependencies come from this environment's site-packages, added as a plain path: its .pth
    # files (an editable benchlab among them) are not read, so only the wheel's benchlab is there.
    site = Path(subprocess.run([str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                               check=True, capture_output=True, text=True).stdout.strip())
    (site / "zz_dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env["PATH"] = f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    where = subprocess.run([str(py), "-c", "import benchlab; print(benchlab.__file__)"], env=env, cwd=tmp_path,
                           check=True, capture_output=True, text=True).stdout
    assert where.startswith(str(venv)), where
    work = tmp_path / "work"
    shutil.copytree(ROOT / "examples" / "quickstart", work / "quickstart")
    # One task, two seeds of one epoch (6 runs, each importing scikit-learn): what is under test is
    # the installed wheel, end to end, not the numbers.
    spec = work / "quickstart" / "benchlab.yaml"
    data = yaml.safe_load(spec.read_text())
    data["tasks"] = [t for t in data["tasks"] if t["name"] == "wine"]
    assert len(data["tasks"]) == 1, "the quick start changed"
    spec.write_text(yaml.safe_dump(data, sort_keys=False))
    proc = subprocess.run([str(venv / "bin" / "benchlab"), "run", "quickstart/benchlab.yaml", "-s", "epochs=1",
                           "-s", "seeds=2", "-j", "2"], env=env, cwd=work, capture_output=True, text=True,
                          timeout=900)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    results = work / "quickstart" / "results" / "quickstart"
    for name in ("BENCHMARK_REPORT.md", "BENCHMARKS.md", "results.csv", "report.html"):
        assert (results / name).is_file(), name
    assert "wine" in (results / "BENCHMARKS.md").read_text()
    skills = subprocess.run([str(venv / "bin" / "benchlab"), "skills", "install", str(work / "agent")], env=env,
                            capture_output=True, text=True, timeout=120)
    assert skills.returncode == 0 and (work / "agent/.claude/skills/benchmark-record/SKILL.md").is_file()
