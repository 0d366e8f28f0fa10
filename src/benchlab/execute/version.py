"""A benchmark version: everything a reviewer needs to reproduce its runs, kept once per version.

A version is the code under test (commit, and the full text of the uncommitted diff), the
package list of the Python that runs the commands, the spec as resolved, the environment
variables the spec names (by name and a short hash of the value, never the value: a command's
``$HF_TOKEN`` is a credential) and a SHA-256 of each dataset the spec lists. Fingerprints of the
named variables' and the secret spec variables' values (:class:`benchlab.secrets.Fingerprint`)
let ``benchlab export`` find those values in a file without the version holding them. It is written under
``<results>/versions/<id>/`` the first time a sweep sees it, and every run's
``provenance.json`` names it (``benchmark_version``) instead of repeating it.

On resume the sweep compares the version now with the one the runs began under
(:func:`changes_since`); a changed dataset or code stops ``benchlab run`` unless the user allows
it, and an allowed change is recorded in the ledger (``versions`` in its meta).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from benchlab.errors import UserError
from benchlab.json_types import JsonObject
from benchlab.ledger import DatasetSum, VersionRecord
from benchlab.names.results_files import (
    DATASET_CACHE,
    DIFF_FILE,
    PACKAGES_FILE,
    VERSION_FILE,
    VERSIONS_DIR,
    SavedSpec,
    version_spec_file,
)
from benchlab.secrets import Fingerprint, credential_env, fingerprints, short_hash

if TYPE_CHECKING:
    from benchlab.ledger import CodeState
    from benchlab.spec import Spec

_CHUNK = 1 << 20
_ENV_REF = re.compile(r"\$\{?([A-Z_][A-Z0-9_]*)\}?")
_PACKAGES_SCRIPT = ("import importlib.metadata as m, json, sys; json.dump(sorted({(d.metadata['Name'] or '') "
                    "+ '==' + (d.version or '') for d in m.distributions() if d.metadata['Name']}, "
                    "key=str.lower), sys.stdout)")


class BenchmarkChanged(UserError):
    """On resume, a dataset or the code under test differs from what the benchmark's runs began with."""

    def __init__(self, results: Path, changes: list[str]):
        self.results = results
        self.changes = changes
        super().__init__(
            f"{results}: the benchmark changed since its runs began: {'; '.join(changes)}. Nothing was run: "
            "put it back, use a new --results folder, or run with --allow-changed to record the change and go on")


@dataclass
class BenchmarkVersion:
    """What one version of a benchmark ran with (see the module docstring)."""

    id: str
    recorded_at: str
    commit: str | None
    dirty: bool | None
    diff_sha256: str | None
    tree_sha256: str | None
    interpreter: str
    packages_of: str  # "command" (the Python the command runs) or "benchlab" (benchlab's own)
    packages: list[str]
    env: dict[str, str | None]  # name -> benchlab.secrets.short_hash of the value, None where unset
    datasets: list[DatasetSum] = field(default_factory=list)
    spec_sha256: str = ""
    #: A fingerprint of each secret value the runs were given (to find it in a file, not to know it).
    secret_fingerprints: list[Fingerprint] = field(default_factory=list)
    diff: str = ""  # the diff's text; written to its own file, not into version.json

    def to_json(self) -> JsonObject:
        """``version.json``'s content: every field but the diff and the package list (files of
        their own), with the number of packages."""
        out = asdict(self)
        out.pop("diff")
        out.pop("packages")
        out["packages_count"] = len(self.packages)
        return out

    @classmethod
    def from_json(cls, data: JsonObject, diff: str = "", packages: list[str] | None = None) -> BenchmarkVersion:
        known = {k: v for k, v in data.items() if k in cls.__dataclass_fields__}
        known["datasets"] = [DatasetSum.from_json(d) for d in data.get("datasets", [])]
        known["secret_fingerprints"] = [Fingerprint.from_json(f) for f in data.get("secret_fingerprints") or []]
        return cls(**{**known, "diff": diff, "packages": packages or []})

    def record(self, changes: list[str]) -> VersionRecord:
        """The ledger's entry for this version, with what changed since the one before it."""
        return VersionRecord.from_json({**self.to_json(), "changes": changes})


def command_interpreter(spec: Spec) -> tuple[str, str]:
    """The Python that runs the spec's commands and whose it is: ``(path, "command")`` when every
    command starts with the same Python interpreter that can be found, else benchlab's own
    ``(sys.executable, "benchlab")``."""
    commands = {c for c in [spec.command, *(t.command for t in spec.tasks), *(c.command for c in spec.configs)] if c}
    firsts = set()
    for command in commands:
        try:
            words = shlex.split(command)
        except ValueError:
            words = command.split()
        firsts.add(words[0] if words else "")
    if len(firsts) == 1:
        (first,) = firsts
        if re.fullmatch(r"(.*/)?python[0-9.]*", first):
            path_env = spec.env.get("PATH", os.environ.get("PATH"))
            found: str | None
            if "/" in first:
                # not resolve(): a venv's python is a symlink to the base interpreter, whose packages differ
                found = os.path.normpath(spec.work_path / first)
                found = found if os.access(found, os.X_OK) else None
            else:
                found = shutil.which(first, path=path_env)
            if found:
                return found, "command"
    return sys.executable, "benchlab"


def package_list(interpreter: str) -> list[str]:
    """``name==version`` of every distribution the interpreter sees, sorted (empty if it cannot say)."""
    if interpreter == sys.executable:
        import importlib.metadata as md

        found = (name_and_version(d) for d in md.distributions())
        return sorted({f"{name}=={version}" for name, version in found if name}, key=str.lower)
    try:
        out = subprocess.run([interpreter, "-c", _PACKAGES_SCRIPT], capture_output=True, timeout=60, check=True)
        return [str(x) for x in json.loads(out.stdout)]
    except (OSError, subprocess.SubprocessError, ValueError):
        return []


# A header line as the email package's parser takes it (email.feedparser.headerRE); any other line
# ends the headers.
_HEADER_LINE = re.compile(r"^(From |[\041-\071\073-\176]*:|[\t ])")


def name_and_version(dist: Any) -> tuple[str | None, str | None]:
    """A distribution's ``Name`` and ``Version``, as ``dist.metadata`` gives them, read from the
    headers alone: parsing each metadata file whole with the email package took half a second
    over a few hundred distributions, before every sweep's first launch. A header folded over
    several lines (never seen for these two) goes through ``dist.metadata``."""
    text = dist.read_text("METADATA") or dist.read_text("PKG-INFO") or dist.read_text("") or ""
    found: dict[str, str] = {}
    last = ""
    for line in text.splitlines():
        if not line or not _HEADER_LINE.match(line):
            break
        if line[0] in " \t":
            if last in ("name", "version"):
                return dist.metadata["Name"], dist.version
            continue
        key, _, value = line.partition(":")
        last = key.lower()
        found.setdefault(last, value.lstrip(" \t"))
    return found.get("name"), found.get("version")


def named_env_values(spec: Spec) -> dict[str, str | None]:
    """The environment variables the spec names, with their values: its ``env:`` and the ``$NAME``
    its commands use (as this process sees them; None where unset). Never to be written."""
    out: dict[str, str | None] = dict(sorted(spec.env.items()))
    commands = [spec.command, *(t.command for t in spec.tasks), *(c.command for c in spec.configs)]
    for command in filter(None, commands):
        for name in _ENV_REF.findall(command):
            if name not in out and not name.startswith("BENCHLAB_"):
                out[name] = os.environ.get(name)
    return out


def named_env(spec: Spec) -> dict[str, str | None]:
    """The environment variables the spec names, each with a short hash of its value (so that a
    change shows) and None where unset: what a version records of them."""
    return {k: None if v is None else short_hash(v) for k, v in named_env_values(spec).items()}


def secret_fingerprints(spec: Spec) -> list[Fingerprint]:
    """Fingerprints of the values of the secret spec variables, of the environment variables
    the commands name (``$NAME``) and of those every run receives from the shell whose names
    are credentials' (``$HF_TOKEN`` unnamed by any command), for export's scan and the masking of
    what benchlab keeps of a log."""
    values: dict[str, str | None] = {k: v for k, v in credential_env().items() if k[1:] not in spec.env}
    values.update({f"${k}": v for k, v in named_env_values(spec).items() if k not in spec.env})
    values.update({f"variables.{k}": v for k, v in spec.secret_values().items()})
    return fingerprints(values)


def _file_sha(path: Path, cache: dict[str, Any]) -> tuple[str, int]:
    st = path.stat()
    key = str(path.resolve())
    hit = cache.get(key)
    if hit and hit["size"] == st.st_size and hit["mtime_ns"] == st.st_mtime_ns:
        return hit["sha256"], st.st_size
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        while chunk := fh.read(_CHUNK):
            digest.update(chunk)
    cache[key] = {"size": st.st_size, "mtime_ns": st.st_mtime_ns, "sha256": digest.hexdigest()}
    return digest.hexdigest(), st.st_size


def dataset_sums(spec: Spec, cache_file: Path | None) -> list[DatasetSum]:
    """The SHA-256 of each of the spec's ``datasets:``. A file's hash is cached by its size and
    modification time in ``cache_file``, so an unchanged 10 GB dataset is read once."""
    if not spec.datasets:
        return []
    cache: dict[str, Any] = {}
    if cache_file is not None and cache_file.exists():
        try:
            cache = json.loads(cache_file.read_text())
        except ValueError:
            cache = {}
    before = json.dumps(cache, sort_keys=True)
    out = []
    for i, ds in enumerate(spec.datasets):
        path = Path(ds.path) if os.path.isabs(ds.path) else spec.base_dir / ds.path
        where = f"{spec.path or 'spec'} datasets[{i}] ({ds.name})"
        if path.is_file():
            sha, size = _file_sha(path, cache)
            out.append(DatasetSum(ds.name, ds.path, sha, size, 1))
        elif path.is_dir():
            listing = hashlib.sha256()
            total = count = 0
            for f in sorted(p for p in path.rglob("*") if p.is_file()):
                sha, size = _file_sha(f, cache)
                listing.update(f"{f.relative_to(path).as_posix()}\t{sha}\n".encode())
                total, count = total + size, count + 1
            out.append(DatasetSum(ds.name, ds.path, listing.hexdigest(), total, count))
        else:
            raise UserError(f"{where}: path {path} is neither a file nor a folder; expected the dataset there")
    if cache_file is not None and json.dumps(cache, sort_keys=True) != before:
        cache_file.parent.mkdir(parents=True, exist_ok=True)
        tmp = cache_file.with_suffix(".tmp")
        tmp.write_text(json.dumps(cache, indent=1, sort_keys=True))
        os.replace(tmp, cache_file)
    return out


def _git_diff(workdir: Path) -> str:
    try:
        out = subprocess.run(["git", "diff", "HEAD"], cwd=workdir, capture_output=True, timeout=60, check=True)
    except (OSError, subprocess.SubprocessError):
        return ""
    return out.stdout.decode("utf-8", errors="replace")


def current_version(spec: Spec, code: CodeState, results_dir: Path, *, clock: Any = None) -> BenchmarkVersion:
    """The benchmark version as it is now: code, packages, resolved spec, env and datasets."""
    interpreter, whose = command_interpreter(spec)
    packages = package_list(interpreter)
    spec_text = json.dumps(spec.model_dump(mode="json", by_alias=True, exclude_none=True), sort_keys=True)
    diff = _git_diff(spec.work_path) if code.dirty else ""
    datasets = dataset_sums(spec, results_dir / VERSIONS_DIR / DATASET_CACHE)
    env = named_env(spec)
    identity = json.dumps({"code": [code.commit, code.diff_sha256, code.tree_sha256], "packages": packages,
                           "spec": spec_text, "env": env, "datasets": [asdict(d) for d in datasets],
                           "interpreter": interpreter}, sort_keys=True)
    now = (clock or (lambda: datetime.now(UTC)))()
    return BenchmarkVersion(
        id=hashlib.sha256(identity.encode()).hexdigest()[:12], recorded_at=now.isoformat(timespec="seconds"),
        commit=code.commit, dirty=code.dirty, diff_sha256=code.diff_sha256, tree_sha256=code.tree_sha256,
        interpreter=interpreter, packages_of=whose, packages=packages, env=env, datasets=datasets,
        spec_sha256=hashlib.sha256(spec_text.encode()).hexdigest(), secret_fingerprints=secret_fingerprints(spec),
        diff=diff)


def write_version(results_dir: Path, version: BenchmarkVersion, spec: Spec) -> Path:
    """Write the version's folder (once: an existing one is kept as it was first written)."""
    folder = results_dir / VERSIONS_DIR / version.id
    if (folder / VERSION_FILE).exists():
        return folder
    folder.mkdir(parents=True, exist_ok=True)
    (folder / DIFF_FILE).write_text(version.diff)
    (folder / PACKAGES_FILE).write_text("".join(f"{p}\n" for p in version.packages))
    SavedSpec(spec.model_dump(mode="json", by_alias=True, exclude_none=True),
              str(spec.path) if spec.path else None, spec.overrides).write(version_spec_file(results_dir, version.id))
    tmp = folder / (VERSION_FILE + ".tmp")
    tmp.write_text(json.dumps(version.to_json(), indent=1))
    os.replace(tmp, folder / VERSION_FILE)
    return folder


def read_version(results_dir: Path, version_id: str) -> BenchmarkVersion:
    """A version written by :func:`write_version`, with its diff text and package list."""
    folder = Path(results_dir) / VERSIONS_DIR / version_id
    data = json.loads((folder / VERSION_FILE).read_text())
    diff = (folder / DIFF_FILE).read_text() if (folder / DIFF_FILE).exists() else ""
    packages = (folder / PACKAGES_FILE).read_text().split() if (folder / PACKAGES_FILE).exists() else []
    return BenchmarkVersion.from_json(data, diff, packages)


def changes_since(then: VersionRecord, now: BenchmarkVersion,
                  code_files: Callable[[str | None], list[str]] | None = None) -> list[str]:
    """What of the code and the datasets differs between a recorded version and now, one phrase
    each; empty when nothing did. Packages and env are recorded, not checked.
    ``code_files(commit)`` lists the files changed since that commit, named in the code's phrase."""
    out = []
    same_tree = then.tree_sha256 and now.tree_sha256 and then.tree_sha256 == now.tree_sha256
    code: list[str] = []
    if then.commit and now.commit:
        if then.commit != now.commit and not same_tree:
            code.append(f"the code's commit ({then.commit[:10]} -> {now.commit[:10]})")
        if then.diff_sha256 != now.diff_sha256:
            def d(x: str | None) -> str:
                return f"diff {x[:8]}" if x else "no diff"
            code.append(f"the code's uncommitted diff ({d(then.diff_sha256)} -> {d(now.diff_sha256)})")
    if code and code_files is not None:
        # Which files, so the user can tell a real change of the code from a stray edit.
        files = code_files(then.commit)
        if files:
            shown = ", ".join(files[:8]) + (f" and {len(files) - 8} more" if len(files) > 8 else "")
            code[-1] += f", in {shown}"
    out += code
    before = {d.name: d for d in then.datasets}
    after = {d.name: d for d in now.datasets}
    for name in sorted(before.keys() | after.keys()):
        if name not in after:
            out.append(f"dataset {name!r} (no longer listed)")
        elif name not in before:
            out.append(f"dataset {name!r} (added)")
        elif before[name].sha256 != after[name].sha256:
            out.append(f"dataset {name!r} at {after[name].path} (sha256 {before[name].sha256[:12]} -> "
                       f"{after[name].sha256[:12]})")
    return out


__all__ = [
    "BenchmarkChanged",
    "BenchmarkVersion",
    "DatasetSum",
    "changes_since",
    "current_version",
    "dataset_sums",
    "named_env",
    "named_env_values",
    "read_version",
    "write_version",
]
