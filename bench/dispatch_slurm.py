"""Dispatch overhead on Slurm: benchlab's slurm backend vs Hydra's submitit launcher, same Slurm.

Both run N trivial runs (``echo score=1``) as one Slurm job array each, throttled to
``-j J`` tasks at once, on the same Slurm: benchlab as a full sweep (spec, plan, ledger,
run directories, metrics collected, provenance), Hydra as a multirun of a tiny app over
``seed=0..N-1`` through ``hydra/launcher=submitit_slurm`` (the task runs the same command
with ``subprocess.run``). Each tool's wall time is measured from the command's start to its
end, in this process; Slurm's own part is the span of the tool's jobs in Slurm's accounting
(first submit to last end, 1 s resolution). What is left, per run, is the tool's overhead
beyond Slurm's scheduling; printed for both, with the ratio.

Without ``SLURM_CONF`` in the environment a one-node Slurm is started for the measurement
(``tests/localslurm.py``: root, Debian's Slurm packages) and stopped at the end.

    python bench/dispatch_slurm.py --runs 200 -j 4
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import textwrap
import time
from datetime import datetime
from pathlib import Path

COMMAND = "echo score=1"

HYDRA_APP = '''
import subprocess

import hydra
from omegaconf import DictConfig


@hydra.main(version_base=None, config_path=".", config_name="config")
def main(cfg: DictConfig) -> float:
    out = subprocess.run({command!r}, shell=True, capture_output=True, text=True, check=True).stdout
    return float(out.split("=")[1])


if __name__ == "__main__":
    main()
'''

HYDRA_CONFIG = '''
defaults:
  - override hydra/launcher: submitit_slurm
  - _self_
seed: 0
hydra:
  launcher:
    submitit_folder: {folder}/.submitit/%j
    timeout_min: 10
    cpus_per_task: 1
    tasks_per_node: 1
    nodes: 1
    mem_gb: null
    array_parallelism: {jobs}
    name: {name}
  sweep:
    dir: {folder}/multirun
'''


def slurm_span(name: str, runs: int) -> tuple[float, int]:
    """Seconds from the first submit to the last end of the jobs named ``name``, and how many
    (waits for accounting, which may lag behind the jobs' ends, to know all ``runs``)."""
    deadline = time.monotonic() + 60
    while True:
        span, n = _span(name)
        if n >= runs or time.monotonic() > deadline:
            return span, n
        time.sleep(1)


def _span(name: str) -> tuple[float, int]:
    out = subprocess.run(["sacct", "-X", "-n", "-P", "--name", name, "-S", "now-2hours", "-o",
                          "JobID,Submit,End,State"], capture_output=True, text=True, check=True).stdout
    submits, ends, n = [], [], 0
    for line in out.splitlines():
        job, submit, end, state = line.split("|")
        if "[" in job or "T" not in end:  # a pending array range; an end accounting has not heard of yet
            continue
        n += 1
        submits.append(datetime.fromisoformat(submit).timestamp())
        ends.append(datetime.fromisoformat(end).timestamp())
    return (max(ends) - min(submits), n) if n else (0.0, 0)


def bench_benchlab(runs: int, jobs: int, work: Path) -> tuple[float, str]:
    from benchlab.execute.slurm import SlurmOptions
    from benchlab.execute.sweep import Sweep
    from benchlab.spec import load_spec

    name = f"dispatch{os.getpid()}"
    work.mkdir(parents=True, exist_ok=True)
    spec_path = work / "dispatch.yaml"
    spec_path.write_text(textwrap.dedent(f"""
        name: {name}
        tasks: [{{name: noop}}]
        configs: [{{name: echo}}]
        seeds: {runs}
        command: {COMMAND}
        metrics:
          primary: {{name: score, from: {{regex: 'score=(?P<value>[0-9.]+)'}}}}
    """))
    t0 = time.perf_counter()
    result = Sweep(load_spec(spec_path), work / "results", backend="slurm", jobs=jobs,
                   backend_options=SlurmOptions(jobs=jobs)).run()
    wall = time.perf_counter() - t0
    assert result.completed == runs, f"benchlab completed {result.completed} of {runs}"
    return wall, f"benchlab-{name}"


def bench_hydra(runs: int, jobs: int, work: Path) -> tuple[float, str]:
    name = f"hydra{os.getpid()}"
    work.mkdir(parents=True, exist_ok=True)
    (work / "app.py").write_text(HYDRA_APP.format(command=COMMAND))
    (work / "config.yaml").write_text(HYDRA_CONFIG.format(folder=work, jobs=jobs, name=name))
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, "app.py", "--multirun", f"seed=range(0,{runs})"], cwd=work,
                          capture_output=True, text=True)
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        raise SystemExit(f"hydra multirun failed:\n{proc.stdout[-2000:]}\n{proc.stderr[-2000:]}")
    return wall, name


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("-j", "--jobs", type=int, default=4, help="array tasks at once (%%N)")
    args = parser.parse_args()
    cluster = None
    if not os.environ.get("SLURM_CONF"):
        sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
        from localslurm import LocalSlurm, why_not

        reason = why_not()
        if reason:
            raise SystemExit(f"no Slurm to measure on: {reason}")
        cluster = LocalSlurm(Path(tempfile.mkdtemp(prefix="bench-slurm-")), cpus=args.jobs, gpus=0).start()
        os.environ.update(cluster.env)
    try:
        with tempfile.TemporaryDirectory(prefix="dispatch-slurm-") as tmp:
            rows = []
            for tool, fn in (("benchlab (slurm backend)", bench_benchlab), ("Hydra submitit launcher", bench_hydra)):
                wall, name = fn(args.runs, args.jobs, Path(tmp) / tool.split()[0])
                span, n = slurm_span(name, args.runs)
                rows.append((tool, wall, span, n))
    finally:
        if cluster is not None:
            cluster.stop()
    load = os.getloadavg()
    print(f"{args.runs} trivial runs ({COMMAND!r}), one job array each, %{args.jobs}; "
          f"load average {load[0]:.1f} {load[1]:.1f} {load[2]:.1f} on {os.cpu_count()} cores")
    print(f"{'':26} {'wall s':>8} {'Slurm span s':>13} {'jobs':>5} {'overhead ms/run':>16}")
    overhead = {}
    for tool, wall, span, n in rows:
        overhead[tool] = (wall - span) / args.runs * 1000
        print(f"{tool:26} {wall:8.1f} {span:13.0f} {n:5d} {overhead[tool]:16.1f}")
    b, h = overhead["benchlab (slurm backend)"], overhead["Hydra submitit launcher"]
    print(f"overhead beyond Slurm's scheduling: benchlab / Hydra = {b / h:.2f}" if h > 0 else
          "Hydra's overhead measured as zero or less: no ratio")


if __name__ == "__main__":
    main()
