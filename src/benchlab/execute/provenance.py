"""What a run's ``provenance.json`` records: the code under test, the software, the machine.

The sweep computes the part shared by every run once (``sweep_provenance``, a
:class:`SweepProvenance`), then each attempt adds its own times, exit code and devices (an
:class:`AttemptProvenance`); :class:`Provenance` is the two as the file holds them, one JSON
object whose keys are those of both parts.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import os
import platform
import socket
import subprocess
import sys
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from benchlab.json_types import JsonObject
from benchlab.ledger import CodeState
from benchlab.names.run_files import PROVENANCE_FILE

if TYPE_CHECKING:
    from benchlab.evalrules import EvaluationSettings
    from benchlab.spec import Spec

# Packages whose versions matter to an ML result, recorded when installed.
TRACKED_PACKAGES = ("benchlab", "numpy", "scipy", "pandas", "torch", "jax", "jaxlib", "tensorflow",
                    "scikit-learn", "gymnasium", "transformers", "vllm", "ray")


def _git(workdir: Path, *args: str) -> str | None:
    try:
        out = subprocess.run(["git", *args], cwd=workdir, capture_output=True, timeout=20, check=True)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.decode("utf-8", errors="replace")


@dataclass(frozen=True)
class GitState:
    """The repository of the code under test, as ``provenance.json`` keeps it under ``git``
    (all None: not in a git repository)."""

    commit: str | None = None
    #: Tracked files differ from the commit.
    dirty: bool | None = None
    #: SHA-256 of ``git diff HEAD`` (None: no diff).
    diff_sha256: str | None = None

    def to_json(self) -> JsonObject:
        return {"commit": self.commit, "dirty": self.dirty, "diff_sha256": self.diff_sha256}

    @classmethod
    def from_json(cls, data: JsonObject) -> GitState:
        return cls(data.get("commit"), data.get("dirty"), data.get("diff_sha256"))


def git_state(workdir: Path) -> GitState:
    """Commit, dirty flag and a hash of the uncommitted diff of the repository holding ``workdir``."""
    commit = _git(workdir, "rev-parse", "HEAD")
    if commit is None:
        return GitState()
    status = _git(workdir, "status", "--porcelain", "--untracked-files=no") or ""
    diff = _git(workdir, "diff", "HEAD") or ""
    return GitState(commit.strip(), bool(status.strip()),
                    hashlib.sha256(diff.encode()).hexdigest() if diff else None)


def spec_files(spec: Spec) -> list[Path]:
    """The spec files of a benchmark: the spec's own and those its promoted configs came from
    (``benchlab search --promote``). Editing them changes run ids, not the code under test."""
    files = [spec.path] if spec.path is not None else []
    files += [spec.base_dir / c.origin.spec for c in spec.configs if c.origin is not None]
    return list(dict.fromkeys(Path(f).resolve() for f in files))


def _in_repo(paths: Iterable[Path], top: str) -> list[str]:
    out = []
    for path in paths:
        try:
            out.append(Path(path).resolve().relative_to(Path(top).resolve()).as_posix())
        except ValueError:
            continue  # the spec lives outside the repository
    return out


def code_state(workdir: Path, spec_path: Path | Iterable[Path] | None = None) -> CodeState:
    """The state of the code under test in ``workdir``'s repository, as the ledger compares it
    between sweeps: the commit, and hashes of the tracked files' contents at it and of the
    uncommitted diff, both leaving out the spec files (``spec_path``: one or several, see
    :func:`spec_files`; their edits change run ids instead, so a spec edit, committed or not, is
    not a change of the code)."""
    head = _git(workdir, "rev-parse", "HEAD", "--show-toplevel")
    if head is None or len(head.split()) < 2:
        return CodeState(None)
    commit, top = head.split("\n")[:2]
    paths = [spec_path] if isinstance(spec_path, str | Path) else list(spec_path or [])
    own = set(_in_repo(paths, top))
    diff = _git(workdir, "diff", "HEAD", *_pathspec(own)) or ""
    tree = _git(workdir, "ls-tree", "-r", "HEAD") or ""
    if own:
        tree = "\n".join(line for line in tree.splitlines() if line.split("\t", 1)[-1] not in own)
    return CodeState(commit.strip(), bool(diff), hashlib.sha256(diff.encode()).hexdigest() if diff else None,
                     hashlib.sha256(tree.encode()).hexdigest())


def _pathspec(excluded: Iterable[str]) -> list[str]:
    return ["--", ":(top)", *(f":(top,exclude){p}" for p in sorted(excluded))]


def changed_files(workdir: Path, since: str | None, spec_paths: Iterable[Path] = ()) -> list[str]:
    """The files of the code under test that differ between commit ``since`` and the work tree
    (committed or not), spec files left out, as paths from the repository's top; where ``since``
    is unknown (None, or a commit this clone lacks), those of the uncommitted diff only."""
    top = _git(workdir, "rev-parse", "--show-toplevel")
    if top is None:
        return []
    excluded = _in_repo(spec_paths, top.strip())
    base = since if since and _git(workdir, "cat-file", "-e", f"{since}^{{commit}}") is not None else "HEAD"
    names = _git(workdir, "diff", "--name-only", base, *_pathspec(excluded)) or ""
    return [n for n in names.splitlines() if n]


def package_versions() -> dict[str, str]:
    versions = {}
    for name in TRACKED_PACKAGES:
        try:
            versions[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            continue
    return versions


def cpu_model() -> str | None:
    """The CPU's model name as the kernel reports it (``/proc/cpuinfo``), else the platform's guess."""
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.startswith(("model name", "Model", "cpu model")):
                    return line.split(":", 1)[1].strip() or None
    except OSError:
        pass
    return platform.processor() or None


@dataclass(frozen=True)
class SweepProvenance:
    """The part of ``provenance.json`` shared by every run of one sweep: the code, the software
    and the machine the sweep runs on."""

    git: GitState
    python: str
    python_executable: str
    platform: str
    host: str
    cpu_count: int | None
    cpu_model: str | None
    #: Versions of the installed :data:`TRACKED_PACKAGES`, by name.
    packages: dict[str, str]
    #: The benchmark version the sweep runs at (``versions/<id>``), and its diff file.
    benchmark_version: str | None = None
    code_diff_file: str | None = None
    #: Every GPU of the machine, model by index as a string (empty: none; the key is left out).
    machine_gpus: dict[str, str] = field(default_factory=dict)

    def to_json(self) -> JsonObject:
        """The keys ``provenance.json`` holds for this part, in the file's order."""
        out: JsonObject = {
            "git": self.git.to_json(), "python": self.python, "python_executable": self.python_executable,
            "platform": self.platform, "host": self.host, "cpu_count": self.cpu_count,
            "cpu_model": self.cpu_model, "packages": dict(self.packages),
            "benchmark_version": self.benchmark_version, "code_diff_file": self.code_diff_file}
        if self.machine_gpus:
            out["machine_gpus"] = dict(self.machine_gpus)
        return out

    @classmethod
    def from_json(cls, data: JsonObject) -> SweepProvenance:
        return cls(git=GitState.from_json(data.get("git") or {}), python=data.get("python", ""),
                   python_executable=data.get("python_executable", ""), platform=data.get("platform", ""),
                   host=data.get("host", ""), cpu_count=data.get("cpu_count"), cpu_model=data.get("cpu_model"),
                   packages=dict(data.get("packages") or {}), benchmark_version=data.get("benchmark_version"),
                   code_diff_file=data.get("code_diff_file"), machine_gpus=dict(data.get("machine_gpus") or {}))


@dataclass(frozen=True)
class AttemptProvenance:
    """The part of ``provenance.json`` that is one attempt's own: which run, when, how it ended,
    on which devices, and what its metrics were read as."""

    run_id: str
    #: The run's coordinates (``task/config/s<seed>``).
    run: str
    attempt: int
    #: Unix times in seconds.
    started: float
    ended: float
    exit_code: int | None
    signal: int | None
    timed_out: bool
    node: str | None
    gpus: list[int] | None
    #: The model of each of ``gpus``, in the same order (None: not known).
    gpu_models: list[str | None]
    command: str
    #: The primary metric's name and each metric's goal (``max``/``min``) by name.
    primary: str
    goals: dict[str, str]
    #: Set when benchlab wrote the run's ``metrics.json`` from what an extractor read.
    metrics_json: str | None = None
    #: What lm-evaluation-harness's results file says of the evaluation (its own fields).
    lm_eval: JsonObject | None = None
    #: What the field's rules want kept of an lm-eval or vLLM run (:mod:`benchlab.evalrules`).
    evaluation: EvaluationSettings | None = None
    interrupted: bool = False
    #: How the run's files came home (:meth:`benchlab.execute.base.Outcome.transfer_json`; empty: left out).
    transfer: dict[str, str] = field(default_factory=dict)

    @property
    def duration_s(self) -> float:
        return self.ended - self.started

    @property
    def job_id(self) -> str | None:
        """The scheduler's id of the attempt's job (None: no scheduler ran it), from this
        release's ``transfer`` or from an earlier one's (``slurm_job_id``)."""
        return self.transfer.get("job_id", self.transfer.get("slurm_job_id"))

    @property
    def job_state(self) -> str | None:
        """The scheduler's final state of that job (``slurm_state`` in earlier releases)."""
        return self.transfer.get("job_state", self.transfer.get("slurm_state"))

    def to_json(self) -> JsonObject:
        """The keys ``provenance.json`` holds for this part, in the file's order (optional ones
        left out when unset)."""
        out: JsonObject = {
            "run_id": self.run_id, "run": self.run, "attempt": self.attempt, "started": self.started,
            "ended": self.ended, "duration_s": self.duration_s, "exit_code": self.exit_code,
            "signal": self.signal, "timed_out": self.timed_out, "node": self.node, "gpus": self.gpus,
            "gpu_models": self.gpu_models, "command": self.command,
            "metrics": {"primary": self.primary, "goals": dict(self.goals)}}
        if self.metrics_json is not None:
            out["metrics_json"] = self.metrics_json
        if self.lm_eval is not None:
            out["lm_eval"] = self.lm_eval
        if self.evaluation is not None:
            out["evaluation"] = self.evaluation
        out["interrupted"] = self.interrupted
        if self.transfer:
            out["transfer"] = dict(self.transfer)
        return out

    @classmethod
    def from_json(cls, data: JsonObject) -> AttemptProvenance:
        metrics = data.get("metrics") or {}
        return cls(run_id=data["run_id"], run=data.get("run", ""), attempt=int(data.get("attempt", 1)),
                   started=float(data.get("started", 0.0)), ended=float(data.get("ended", 0.0)),
                   exit_code=data.get("exit_code"), signal=data.get("signal"),
                   timed_out=bool(data.get("timed_out")), node=data.get("node"), gpus=data.get("gpus"),
                   gpu_models=list(data.get("gpu_models") or []), command=data.get("command", ""),
                   primary=metrics.get("primary", ""), goals=dict(metrics.get("goals") or {}),
                   metrics_json=data.get("metrics_json"), lm_eval=data.get("lm_eval"),
                   evaluation=data.get("evaluation"), interrupted=bool(data.get("interrupted")),
                   transfer=dict(data.get("transfer") or {}))


@dataclass(frozen=True)
class Provenance:
    """A run's ``provenance.json``: the sweep's shared part and the attempt's own, one JSON object
    (see docs/history.md and docs/gpus.md for what readers take from it)."""

    shared: SweepProvenance
    attempt: AttemptProvenance

    def to_json(self) -> JsonObject:
        return {**self.shared.to_json(), **self.attempt.to_json()}

    @classmethod
    def from_json(cls, data: JsonObject) -> Provenance:
        return cls(SweepProvenance.from_json(data), AttemptProvenance.from_json(data))

    @classmethod
    def read(cls, run_dir: Path) -> Provenance:
        """The ``provenance.json`` of ``run_dir`` (``OSError`` when it has none, ``ValueError``
        when it is not JSON)."""
        return cls.from_json(json.loads((run_dir / PROVENANCE_FILE).read_text()))


def sweep_provenance(workdir: Path) -> SweepProvenance:
    """The part of provenance shared by every run of one sweep (without its benchmark version,
    which the sweep adds)."""
    return SweepProvenance(
        git=git_state(workdir),
        python=sys.version.split()[0],
        python_executable=sys.executable,
        platform=platform.platform(),
        host=socket.gethostname(),
        cpu_count=os.cpu_count(),
        cpu_model=cpu_model(),
        packages=package_versions(),
    )


# The shared part's JSON, by the object it was made from (a sweep has one).
_encoded: dict[int, tuple[SweepProvenance, str]] = {}


def write_provenance(run_dir: Path, shared: SweepProvenance, attempt: AttemptProvenance) -> None:
    """Write ``provenance.json``: the shared part plus this attempt's own facts.

    The shared part is the same for every run of a sweep, so its JSON is made
    once per object and each run only encodes its own few fields.
    """
    cached = _encoded.get(id(shared))
    if cached is None or cached[0] is not shared:
        cached = _encoded[id(shared)] = (shared, json.dumps(shared.to_json(), indent=1, default=str))
    own = json.dumps(attempt.to_json(), indent=1, default=str)
    # '{\n "a": 1\n}' + '{\n "b": 2\n}' -> '{\n "a": 1,\n "b": 2\n}'
    text = cached[1][:-2] + ",\n" + own[2:]
    tmp = run_dir / "provenance.json.tmp"
    tmp.write_text(text)
    os.replace(tmp, run_dir / PROVENANCE_FILE)
