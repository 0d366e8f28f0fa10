"""A run's ``provenance.json`` as typed records: the layout files already on disk have reads into
them, and they write it back key for key."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchlab.execute.provenance import (
    AttemptProvenance,
    GitState,
    Provenance,
    SweepProvenance,
    write_provenance,
)
from benchlab.names.run_files import PROVENANCE_FILE

# A provenance.json as a Slurm sweep of an lm-eval run wrote it before the records existed
# (written out by hand in the file's layout: shared keys first, then the attempt's own).
OLD_FILE = """{
 "git": {
  "commit": "4f1c2d9e8b7a6f5e4d3c2b1a0f9e8d7c6b5a4f3e",
  "dirty": true,
  "diff_sha256": "9b74c9897bac770ffc029102a200c5de"
 },
 "python": "3.11.7",
 "python_executable": "/opt/venv/bin/python",
 "platform": "Linux-6.1.0-x86_64-with-glibc2.36",
 "host": "login1",
 "cpu_count": 64,
 "cpu_model": "AMD EPYC 7763 64-Core Processor",
 "packages": {
  "benchlab": "0.1.0",
  "numpy": "2.1.0"
 },
 "benchmark_version": "2af631ba4ab1",
 "code_diff_file": "versions/2af631ba4ab1/code.diff",
 "machine_gpus": {
  "0": "NVIDIA H100 80GB HBM3",
  "1": "NVIDIA H100 80GB HBM3"
 },
 "run_id": "8d0934424f46",
 "run": "gsm8k/ckpt-1000/s0",
 "attempt": 2,
 "started": 10.0,
 "ended": 14.5,
 "duration_s": 4.5,
 "exit_code": 0,
 "signal": null,
 "timed_out": false,
 "node": "gpu7",
 "gpus": [
  1
 ],
 "gpu_models": [
  "NVIDIA H100 80GB HBM3"
 ],
 "command": "lm_eval --model hf --tasks gsm8k",
 "metrics": {
  "primary": "exact_match",
  "goals": {
   "exact_match": "max",
   "loss": "min"
  }
 },
 "metrics_json": "written by benchlab from the extracted metrics",
 "lm_eval": {
  "lm_eval_version": "0.4.8",
  "file": "out/results_2025.json"
 },
 "evaluation": {
  "tool": "lm-eval",
  "model": "ckpt-1000",
  "seed": "0",
  "temperature": null,
  "tensor_parallel_size": null,
  "batch_size": "8",
  "version": "0.4.8"
 },
 "interrupted": false,
 "transfer": {
  "slurm_job_id": "812_3",
  "slurm_state": "COMPLETED"
 }
}"""


def test_a_provenance_json_written_before_the_records_reads_into_them(tmp_path: Path) -> None:
    (tmp_path / PROVENANCE_FILE).write_text(OLD_FILE)
    prov = Provenance.read(tmp_path)
    assert prov.shared.git == GitState("4f1c2d9e8b7a6f5e4d3c2b1a0f9e8d7c6b5a4f3e", True,
                                       "9b74c9897bac770ffc029102a200c5de")
    assert (prov.shared.host, prov.shared.cpu_count, prov.shared.benchmark_version) == ("login1", 64, "2af631ba4ab1")
    assert prov.shared.machine_gpus == {"0": "NVIDIA H100 80GB HBM3", "1": "NVIDIA H100 80GB HBM3"}
    a = prov.attempt
    assert (a.run_id, a.run, a.attempt, a.exit_code, a.node, a.gpus) == (
        "8d0934424f46", "gsm8k/ckpt-1000/s0", 2, 0, "gpu7", [1])
    assert a.duration_s == 4.5
    assert (a.primary, a.goals) == ("exact_match", {"exact_match": "max", "loss": "min"})
    assert a.lm_eval == {"lm_eval_version": "0.4.8", "file": "out/results_2025.json"}
    assert a.evaluation is not None and a.evaluation["batch_size"] == "8"
    assert a.transfer == {"slurm_job_id": "812_3", "slurm_state": "COMPLETED"}
    assert (a.job_id, a.job_state) == ("812_3", "COMPLETED")  # the earlier release's names, still read


def test_the_schedulers_job_is_read_under_its_generic_names() -> None:
    data = json.loads(OLD_FILE)
    data["transfer"] = {"job_id": "77", "job_state": "TIMEOUT"}
    a = Provenance.from_json(data).attempt
    assert (a.job_id, a.job_state) == ("77", "TIMEOUT")
    data["transfer"] = {}
    assert (Provenance.from_json(data).attempt.job_id, Provenance.from_json(data).attempt.job_state) == (None, None)


def test_the_records_write_the_file_back_byte_for_byte(tmp_path: Path) -> None:
    prov = Provenance.from_json(json.loads(OLD_FILE))
    write_provenance(tmp_path, prov.shared, prov.attempt)
    assert (tmp_path / PROVENANCE_FILE).read_text() == OLD_FILE
    assert not (tmp_path / "provenance.json.tmp").exists()


def test_unset_optional_parts_are_left_out_of_the_file(tmp_path: Path) -> None:
    shared = SweepProvenance(git=GitState(), python="3.12.1", python_executable="/usr/bin/python3",
                             platform="Linux", host="box", cpu_count=None, cpu_model=None, packages={})
    attempt = AttemptProvenance(run_id="r1", run="t/a/s0", attempt=1, started=1.0, ended=3.0, exit_code=1,
                                signal=None, timed_out=False, node=None, gpus=None, gpu_models=[], command="false",
                                primary="score", goals={"score": "max"})
    write_provenance(tmp_path, shared, attempt)
    data = json.loads((tmp_path / PROVENANCE_FILE).read_text())
    # What docs/history.md and docs/gpus.md name is always there; the optional parts are not.
    assert list(data) == ["git", "python", "python_executable", "platform", "host", "cpu_count", "cpu_model",
                          "packages", "benchmark_version", "code_diff_file", "run_id", "run", "attempt", "started",
                          "ended", "duration_s", "exit_code", "signal", "timed_out", "node", "gpus", "gpu_models",
                          "command", "metrics", "interrupted"]
    assert data["git"] == {"commit": None, "dirty": None, "diff_sha256": None}
    assert data["duration_s"] == 2.0


def test_two_sweeps_each_write_their_own_shared_part(tmp_path: Path) -> None:
    attempt = Provenance.from_json(json.loads(OLD_FILE)).attempt
    for host in ("first", "second"):
        shared = SweepProvenance(git=GitState(), python="3.12.1", python_executable="python", platform="Linux",
                                 host=host, cpu_count=1, cpu_model=None, packages={})
        write_provenance(tmp_path, shared, attempt)
        assert json.loads((tmp_path / PROVENANCE_FILE).read_text())["host"] == host


def test_a_provenance_record_cannot_be_changed_after_it_is_made() -> None:
    prov = Provenance.from_json(json.loads(OLD_FILE))
    with pytest.raises(AttributeError):
        prov.shared.host = "elsewhere"  # type: ignore[misc]
