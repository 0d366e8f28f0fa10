"""The slurm backend's parts that need no cluster: what a run asks of Slurm, and the exits-2."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

from benchlab.execute.slurm import TIME_MARGIN_MIN, sbatch_parameters, settings_from
from benchlab.spec import Resources, Slurm, load_spec
from benchlab_testing import run_cli

SPEC = """
name: pieces
tasks: [{name: t}]
configs: [{name: a}]
seeds: 1
command: python -c pass
metrics: {primary: score}
"""


def write_spec(root: Path, extra: str = "") -> Path:
    spec = root / "bench.yaml"
    spec.write_text(textwrap.dedent(SPEC).lstrip() + textwrap.dedent(extra))
    return spec


def test_a_runs_resources_and_timeout_become_sbatch_options() -> None:
    settings = settings_from(Slurm(partition="gpu", account="lab", sbatch={"exclude": "node3"}), None)
    params = sbatch_parameters(Resources(cpus=2.5, gpus=0.5, memory=1.5), 61.0, settings)
    assert params["cpus_per_task"] == 3  # a fraction of a core asks for the whole core
    assert params["gres"] == "gpu:1"  # Slurm does not share a device: half a GPU takes one
    assert params["mem"] == "1536M"
    assert params["time"] == 2 + TIME_MARGIN_MIN  # 61 s is two started minutes
    assert params["partition"] == "gpu" and params["account"] == "lab"
    assert params["additional_parameters"] == {"exclude": "node3"}
    assert "qos" not in params and "constraint" not in params


def test_no_timeout_leaves_the_time_limit_to_the_partition() -> None:
    params = sbatch_parameters(Resources(), None, settings_from(None, None))
    assert params["time"] is None and "gres" not in params and "mem" not in params


def test_flags_override_the_spec_section_and_other_keys_are_sbatch_options() -> None:
    section = Slurm(partition="gpu", qos="normal", sbatch={"nice": 10})
    s = settings_from(section, {"partition": "debug", "--constraint": "a100", "mail-type": "END",
                                "array_size": "50"})
    assert (s.partition, s.qos, s.constraint, s.array_size) == ("debug", "normal", "a100", 50)
    assert s.sbatch == {"nice": 10, "mail_type": "END"}


def test_the_spec_takes_a_slurm_section_and_the_slurm_backend(tmp_path: Path) -> None:
    spec = load_spec(write_spec(tmp_path, """
        backend: slurm
        slurm: {partition: gpu, constraint: a100, sbatch: {exclude: node3}, setup: [module load cuda]}
    """))
    assert spec.backend == "slurm"
    assert (spec.slurm.partition, spec.slurm.constraint, spec.slurm.setup) == ("gpu", "a100", ["module load cuda"])


def test_an_unknown_key_of_the_slurm_section_is_a_spec_error(tmp_path: Path) -> None:
    write_spec(tmp_path, "slurm: {partiton: gpu}\n")
    proc = run_cli("validate", "bench.yaml", cwd=tmp_path)
    assert proc.returncode == 2
    assert "bench.yaml:7 slurm: unknown field 'partiton'" in proc.stderr


def test_without_submitit_the_slurm_backend_exits_2_with_the_install_line(tmp_path: Path) -> None:
    write_spec(tmp_path)
    code = ("import sys, runpy; sys.modules['submitit'] = None; "
            "sys.argv = ['benchlab', 'run', 'bench.yaml', '--backend', 'slurm']; "
            "runpy.run_module('benchlab', run_name='__main__')")
    proc = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 2, out
    assert "pip install 'benchlab[slurm]'" in out and "Traceback" not in out


def test_without_sbatch_on_the_path_the_slurm_backend_exits_2_saying_so(tmp_path: Path) -> None:
    write_spec(tmp_path)
    bare = tmp_path / "bin"
    bare.mkdir()
    os.symlink(sys.executable, bare / "python")
    proc = run_cli("run", "bench.yaml", "--backend", "slurm", "--results", str(tmp_path / "out"), cwd=tmp_path,
                   env={"PATH": str(bare)})
    out = proc.stdout + proc.stderr
    assert proc.returncode == 2, out
    assert "sbatch, squeue, sacct, scancel, srun not found on the PATH" in out and "Traceback" not in out
    assert not (tmp_path / "out").exists()


def test_slurm_flags_need_the_slurm_backend_and_the_key_value_form(tmp_path: Path) -> None:
    write_spec(tmp_path)
    proc = run_cli("run", "bench.yaml", "--slurm", "partition=gpu", cwd=tmp_path)
    assert proc.returncode == 2 and "--slurm needs the slurm backend" in proc.stdout + proc.stderr
    proc = run_cli("run", "bench.yaml", "--backend", "slurm", "--slurm", "partition", cwd=tmp_path)
    assert proc.returncode == 2 and "--slurm partition: expected KEY=VALUE" in proc.stdout + proc.stderr


SEARCH = """
search:
  metric: val
  space: {x: {uniform: [0, 1]}}
  budget: 2
"""


def test_search_takes_the_slurm_flags_as_run_does(tmp_path: Path) -> None:
    # search had no --slurm, and checked only the Ray flags: `search --backend slurm` took the spec's
    # slurm: section alone, and a missing sbatch was found only after the study folder was made.
    write_spec(tmp_path, SEARCH)
    out = tmp_path / "out"
    proc = run_cli("search", "bench.yaml", "--slurm", "partition=gpu", "--results", str(out), cwd=tmp_path)
    assert proc.returncode == 2 and "--slurm needs the slurm backend" in proc.stdout + proc.stderr
    proc = run_cli("search", "bench.yaml", "--backend", "slurm", "--slurm", "partition", "--results", str(out),
                   cwd=tmp_path)
    assert proc.returncode == 2 and "--slurm partition: expected KEY=VALUE" in proc.stdout + proc.stderr
    bare = tmp_path / "bin"
    bare.mkdir()
    os.symlink(sys.executable, bare / "python")
    proc = run_cli("search", "bench.yaml", "--backend", "slurm", "--slurm", "partition=gpu", "--results", str(out),
                   cwd=tmp_path, env={"PATH": str(bare)})
    said = proc.stdout + proc.stderr
    assert proc.returncode == 2, said
    assert "sbatch, squeue, sacct, scancel, srun not found on the PATH" in said and "Traceback" not in said
    assert not out.exists()


def test_the_docs_slurm_section_is_a_valid_spec_part_and_asks_slurm_for_what_it_says(tmp_path: Path) -> None:
    from benchlab_testing import doc_blocks

    doc = Path(__file__).parents[2] / "docs" / "cluster.md"
    (fragment,) = [b for b in doc_blocks(doc, "yaml") if "backend: slurm" in b]
    spec = load_spec(write_spec(tmp_path, fragment))
    params = sbatch_parameters(spec.resources, spec.timeout, settings_from(spec.slurm, None))
    assert (params["partition"], params["account"], params["constraint"]) == ("gpu", "mylab", "a100")
    assert params["additional_parameters"] == {"exclude": "node[07-08]", "nice": 10}
    assert params["setup"] == ["module load cuda/12.1"]
