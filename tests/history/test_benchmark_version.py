"""A benchmark version's provenance: the diff kept as a file, the command's packages, the datasets'
checksums, and the resume check that stops on a changed dataset or code."""

from __future__ import annotations

import hashlib
import json
import os
import re
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from benchlab.execute.version import dataset_sums
from benchlab.spec import parse_spec
from benchlab_testing import run_cli

SPEC = """
name: prov
tasks: [{{name: t1}}]
configs: [{{name: a, params: {{x: 1}}}}, {{name: b, params: {{x: 2}}}}]
seeds: 2
command: {python} run.py x={{x}}
env: {{GREETING: hello}}
datasets:
  - {{name: train, path: data/train.csv}}
  - {{name: images, path: data/images}}
metrics: {{primary: score}}
"""

RUN = """
import json, os, sys
x = int(sys.argv[1].split("=")[1])
seed = int(os.environ["BENCHLAB_SEED"])
json.dump({"score": x + seed / 10}, open(os.path.join(os.environ["BENCHLAB_RUN_DIR"], "metrics.json"), "w"))
"""


def _git(root: Path, *args: str) -> str:
    return subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@example.org", *args], cwd=root,
                          check=True, capture_output=True, text=True).stdout


def _bench(root: Path, python: str = "python") -> Path:
    (root / "run.py").write_text(RUN)
    (root / "data" / "images").mkdir(parents=True)
    (root / "data" / "train.csv").write_text("a,b\n1,2\n")
    (root / "data" / "images" / "0.bin").write_bytes(b"\x00\x01" * 100)
    (root / "data" / "images" / "1.bin").write_bytes(b"\x02" * 7)
    (root / "bench.yaml").write_text(textwrap.dedent(SPEC.format(python=python)).lstrip())
    _git(root, "init", "-q")
    _git(root, "add", "run.py", "bench.yaml")
    _git(root, "commit", "-qm", "first")
    return root / "results" / "prov"


def _versions(results: Path) -> list[dict]:
    with sqlite3.connect(results / "benchlab.db") as db:
        (value,) = db.execute("SELECT value FROM meta WHERE key = 'versions'").fetchone()
    return json.loads(value)


def test_version_keeps_the_full_diff_spec_env_and_dataset_checksums_once(tmp_path):
    results = _bench(tmp_path)
    (tmp_path / "run.py").write_text(RUN + "# tuned\n")  # an uncommitted change of the code
    run_cli("run", "bench.yaml", "--no-report", cwd=tmp_path, check=True)
    (version,) = _versions(results)
    folder = results / "versions" / version["id"]
    diff = (folder / "code.diff").read_text()
    assert diff == _git(tmp_path, "diff", "HEAD")
    assert "+# tuned" in diff
    assert version["diff_sha256"] == hashlib.sha256(diff.encode()).hexdigest()
    # Named, with a short hash of the value (the value itself may be a credential).
    assert version["env"]["GREETING"] == "sha256:" + hashlib.sha256(b"hello").hexdigest()[:16]
    spec = json.loads((folder / "spec.json").read_text())["spec"]
    assert spec["command"] == "python run.py x={x}" and spec["datasets"][0]["name"] == "train"
    sums = {d["name"]: d for d in version["datasets"]}
    assert sums["train"]["sha256"] == hashlib.sha256(b"a,b\n1,2\n").hexdigest()
    assert sums["train"]["bytes"] == 8 and sums["images"]["files"] == 2
    listing = "".join(f"{n}\t{hashlib.sha256(b).hexdigest()}\n" for n, b in
                      (("0.bin", b"\x00\x01" * 100), ("1.bin", b"\x02" * 7)))
    assert sums["images"]["sha256"] == hashlib.sha256(listing.encode()).hexdigest()
    # Each run names the version and the diff file instead of carrying them.
    provs = [json.loads(p.read_text()) for p in (results / "runs").glob("*/provenance.json")]
    assert len(provs) == 4
    assert {p["benchmark_version"] for p in provs} == {version["id"]}
    assert {p["code_diff_file"] for p in provs} == {f"versions/{version['id']}/code.diff"}
    assert {p["git"]["diff_sha256"] for p in provs} == {version["diff_sha256"]}
    # The command's interpreter is this venv's python: its package list is the whole environment.
    packages = (folder / "packages.txt").read_text().split()
    assert version["packages_of"] == "command"
    assert any(p.lower().startswith("benchlab==") for p in packages)
    assert any(p.lower().startswith("numpy==") for p in packages)


@pytest.mark.slow
def test_packages_are_those_of_the_python_the_command_runs(tmp_path):
    env = tmp_path / "env"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(env)], check=True)
    results = _bench(tmp_path, python="env/bin/python")
    run_cli("run", "bench.yaml", "--no-report", cwd=tmp_path, check=True)
    (version,) = _versions(results)
    assert version["packages_of"] == "command"
    assert version["interpreter"] == str(env / "bin" / "python")
    packages = (results / "versions" / version["id"] / "packages.txt").read_text().split()
    assert not any(p.lower().startswith(("benchlab==", "numpy==")) for p in packages)  # a bare venv


def test_a_command_that_is_not_python_records_benchlabs_own_packages_and_says_so(tmp_path):
    spec = parse_spec("name: s\ntasks: [{name: t}]\nconfigs: [{name: a}]\ncommand: ./train.sh\n"
                      "metrics: {primary: m}\n")
    from benchlab.execute.version import command_interpreter

    assert command_interpreter(spec) == (sys.executable, "benchlab")


def test_dataset_hash_is_cached_by_size_and_mtime(tmp_path):
    data = tmp_path / "big.bin"
    data.write_bytes(b"a" * 1000)
    spec = parse_spec(f"name: s\ntasks: [{{name: t}}]\nconfigs: [{{name: a}}]\ncommand: x\n"
                      f"metrics: {{primary: m}}\ndatasets: [{{name: big, path: {data}}}]\n")
    cache = tmp_path / "cache.json"
    (first,) = dataset_sums(spec, cache)
    assert first.sha256 == hashlib.sha256(b"a" * 1000).hexdigest()
    # Same size and mtime: the cached hash is used, the file is not read again (its new bytes
    # do not show), which is what makes a 10 GB dataset cost one read.
    st = data.stat()
    data.write_bytes(b"b" * 1000)
    os.utime(data, ns=(st.st_atime_ns, st.st_mtime_ns))
    (again,) = dataset_sums(spec, cache)
    assert again.sha256 == first.sha256
    # A new mtime makes it read again.
    os.utime(data, ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))
    (third,) = dataset_sums(spec, cache)
    assert third.sha256 == hashlib.sha256(b"b" * 1000).hexdigest()


def test_resume_stops_on_a_changed_dataset_and_allow_changed_records_it(tmp_path):
    results = _bench(tmp_path)
    run_cli("run", "bench.yaml", "--no-report", cwd=tmp_path, check=True)
    (tmp_path / "bench.yaml").write_text((tmp_path / "bench.yaml").read_text().replace("seeds: 2", "seeds: 3"))
    (tmp_path / "data" / "train.csv").write_text("a,b\n1,3\n")
    stopped = run_cli("run", "bench.yaml", "--no-report", cwd=tmp_path)
    assert stopped.returncode == 2, stopped.stderr
    err = " ".join(stopped.stderr.split())
    assert "dataset 'train' at data/train.csv (sha256 " in err and "--allow-changed" in err
    assert "Traceback" not in stopped.stderr
    # docs/history.md shows this message (its folder and hashes aside).
    doc = (Path(__file__).resolve().parents[2] / "docs" / "history.md").read_text()
    shown = next(line for line in doc.splitlines() if line.startswith("error: results/starter: the benchmark"))
    pattern = re.escape(shown).replace("results/starter", ".+").replace("3f0bd4c5a2b1", "[0-9a-f]{12}")
    assert re.search(pattern.replace("9e51c0d7f2aa", "[0-9a-f]{12}"), err), (shown, err)
    with sqlite3.connect(results / "benchlab.db") as db:
        assert db.execute("SELECT COUNT(*) FROM attempts").fetchone()[0] == 4  # the new seed did not run
    went_on = run_cli("run", "bench.yaml", "--no-report", "--allow-changed", cwd=tmp_path, check=True)
    assert "6 runs" in went_on.stdout
    first, second = _versions(results)
    assert first["id"] != second["id"]
    assert second["changes"] == [c for c in second["changes"] if c.startswith("dataset 'train'")] != []
    # Recorded: the next resume compares with the allowed version and goes on without the flag.
    run_cli("run", "bench.yaml", "--no-report", cwd=tmp_path, check=True)


def test_resume_stops_on_a_new_commit_with_other_code(tmp_path):
    _bench(tmp_path)
    run_cli("run", "bench.yaml", "--no-report", cwd=tmp_path, check=True)
    (tmp_path / "run.py").write_text(RUN.replace("/ 10", "/ 20"))
    _git(tmp_path, "commit", "-qam", "new scoring")
    stopped = run_cli("run", "bench.yaml", "--no-report", cwd=tmp_path)
    assert stopped.returncode == 2
    assert "the code's commit (" in stopped.stderr


def test_packages_are_named_as_importlib_metadata_names_them(tmp_path):
    import importlib.metadata as md

    from benchlab.execute.version import name_and_version, package_list

    # Every distribution this interpreter sees, as the email parser behind ``dist.metadata`` reads it.
    expected = sorted({f"{d.metadata['Name']}=={d.version}" for d in md.distributions() if d.metadata["Name"]},
                      key=str.lower)
    assert len(expected) > 20
    assert package_list(sys.executable) == expected
    # Headers written in odd ways: lower-case keys, tabs, a body after the headers, a folded name.
    cases = {
        "plain": "Metadata-Version: 2.1\nName: Foo_Bar\nVersion: 1.0.post2\n\nName: not-me\n",
        "odd": "metadata-version: 2.1\nname:\tBaz \nversion:  3\nSummary: x\n",
        "folded": "Metadata-Version: 2.1\nName: long\n  name\nVersion: 2\n",
        "nameless": "Metadata-Version: 2.1\nVersion: 9\n",
    }
    for label, text in cases.items():
        info = tmp_path / f"{label}-1.dist-info"
        info.mkdir()
        (info / "METADATA").write_text(text)
        dist = md.PathDistribution(info)
        assert name_and_version(dist) == (dist.metadata["Name"], dist.version), label
