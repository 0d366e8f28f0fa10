"""What a run's ``provenance.json`` records: the code under test, the software, the machine.

The sweep computes the part shared by every run once (``sweep_provenance``),
then each attempt adds its own times, exit code and devices.
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
from pathlib import Path
from typing import TYPE_CHECKING, Any

from benchlab.ledger import CodeState
from benchlab.run_files import PROVENANCE_FILE

if TYPE_CHECKING:
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


def git_state(workdir: Path) -> dict[str, Any]:
    """Commit, dirty flag and a hash of the uncommitted diff of the repository holding ``workdir``."""
    commit = _git(workdir, "rev-parse", "HEAD")
    if commit is None:
        return {"commit": None, "dirty": None, "diff_sha256": None}
    status = _git(workdir, "status", "--porcelain", "--untracked-files=no") or ""
    diff = _git(workdir, "diff", "HEAD") or ""
    return {
        "commit": commit.strip(),
        "dirty": bool(status.strip()),
        "diff_sha256": hashlib.sha256(diff.encode()).hexdigest() if diff else None,
    }


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


def sweep_provenance(workdir: Path) -> dict[str, Any]:
    """The part of provenance shared by every run of one sweep."""
    return {
        "git": git_state(workdir),
        "python": sys.version.split()[0],
        "python_executable": sys.executable,
        "platform": platform.platform(),
        "host": socket.gethostname(),
        "cpu_count": os.cpu_count(),
        "cpu_model": cpu_model(),
        "packages": package_versions(),
    }


_encoded: dict[int, tuple[dict[str, Any], str]] = {}


def write_provenance(run_dir: Path, shared: dict[str, Any], **attempt: Any) -> None:
    """Write ``provenance.json``: the shared part plus this attempt's own facts.

    The shared part is the same for every run of a sweep, so its JSON is made
    once (``shared`` must not change after the first write) and each run only
    encodes its own few fields.
    """
    if not shared or not attempt or any(k in shared for k in attempt):
        text = json.dumps({**shared, **attempt}, indent=1, default=str)
    else:
        cached = _encoded.get(id(shared))
        if cached is None or cached[0] is not shared:
            cached = _encoded[id(shared)] = (shared, json.dumps(shared, indent=1, default=str))
        own = json.dumps(attempt, indent=1, default=str)
        # '{\n "a": 1\n}' + '{\n "b": 2\n}' -> '{\n "a": 1,\n "b": 2\n}'
        text = cached[1][:-2] + ",\n" + own[2:]
    tmp = run_dir / "provenance.json.tmp"
    tmp.write_text(text)
    os.replace(tmp, run_dir / PROVENANCE_FILE)
