"""``benchlab export``: publish a results folder's report and runs to any fsspec target.

The target is an fsspec URL: a local folder, ``memory://``, ``s3://BUCKET/PREFIX`` (s3fs),
``hf://datasets/ORG/NAME`` (huggingface_hub's ``HfFileSystem``). Credentials come from each
filesystem's own configuration (``~/.aws``, ``AWS_*`` or ``FSSPEC_S3_*`` variables, ``hf auth
login``); benchlab never reads or stores them.

An export is idempotent: the target keeps a manifest (:data:`MANIFEST`) of the SHA-256 of every
file it received, and only files whose hash changed, or that the target no longer lists, are
uploaded; a second export of the same folder uploads nothing. Relative links in BENCHMARKS.md,
BENCHMARK_REPORT.md and report.html are rewritten to the target's public URLs, and every
export is appended to the folder's job log (``EXPORTS.md`` and ``exports.json``).
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from benchlab.errors import DataError
from benchlab.execute.version import VERSIONS_DIR

MANIFEST = ".benchlab-export.json"
LOG_MD = "EXPORTS.md"
LOG_JSON = "exports.json"
WHATS = ("report", "runs", "all")
REPORT_FILES = ("BENCHMARK_REPORT.md", "BENCHMARKS.md", "results.csv", "report.html")
#: The files whose relative links point into the results folder and are rewritten on export.
LINKED = ("BENCHMARK_REPORT.md", "BENCHMARKS.md", "report.html")
_MD_LINK = re.compile(r"(\]\()([^)\s]+)(\))")
_HTML_LINK = re.compile(r"""((?:href|src)=["'])([^"']+)(["'])""")
_RUN_LINK = re.compile(r"^(?:\./)?runs/([^/]+)/")


@dataclass(frozen=True)
class ExportFile:
    """A file to export: its path under the target, its SHA-256 and size as uploaded."""

    path: str
    sha256: str
    bytes: int
    uploaded: bool


@dataclass
class ExportResult:
    """What one export did (or, with ``dry_run``, would do)."""

    when: str
    what: str
    target: str
    public_url: str | None
    dry_run: bool
    files: list[ExportFile] = field(default_factory=list)
    #: Run folders the exported report links to that the target holds neither before nor after
    #: this export (an ``--what report`` export of a folder whose runs were never exported).
    unpublished_runs: list[str] = field(default_factory=list)

    @property
    def uploaded(self) -> list[ExportFile]:
        return [f for f in self.files if f.uploaded]

    @property
    def uploaded_bytes(self) -> int:
        return sum(f.bytes for f in self.uploaded)

    def to_json(self) -> dict[str, Any]:
        return {"when": self.when, "what": self.what, "target": self.target, "public_url": self.public_url,
                "dry_run": self.dry_run, "files": len(self.files), "uploaded": len(self.uploaded),
                "uploaded_bytes": self.uploaded_bytes, "skipped": len(self.files) - len(self.uploaded),
                "uploaded_files": [f.path for f in self.uploaded], "unpublished_runs": self.unpublished_runs}


def safe_url(url: str) -> str:
    """The URL without a user name or password in it (never written to a log)."""
    parts = urlsplit(url)
    if parts.username or parts.password:
        host = parts.hostname or ""
        return urlunsplit((parts.scheme, host + (f":{parts.port}" if parts.port else ""), parts.path,
                           parts.query, parts.fragment))
    return url


def public_url(target: str, override: str | None = None) -> str | None:
    """The base URL under which the target's files are read by others, ending in ``/``; None for
    a local folder or ``memory://`` (links stay relative there).

    ``s3://BUCKET/PREFIX`` -> ``https://BUCKET.s3.amazonaws.com/PREFIX/``;
    ``hf://datasets/ORG/NAME[@REV]/PATH`` -> ``https://huggingface.co/datasets/ORG/NAME/resolve/REV/PATH/``
    (``REV`` defaulting to ``main``); ``override`` wins (a CDN, a custom S3 endpoint).
    """
    if override:
        return override.rstrip("/") + "/"
    parts = urlsplit(target)
    if parts.scheme == "s3":
        prefix = parts.path.strip("/")
        return f"https://{parts.netloc}.s3.amazonaws.com/" + (f"{prefix}/" if prefix else "")
    if parts.scheme == "hf":
        words = (parts.netloc + parts.path).strip("/").split("/")
        kinds = {"datasets", "spaces"}
        if len(words) < 2 or (words[0] in kinds and len(words) < 3):
            raise DataError(f"{target}: expected hf://datasets/ORG/NAME[/PATH], hf://spaces/ORG/NAME or "
                            "hf://ORG/NAME (a model repository)")
        kind, rest = (words[0] + "/", words[1:]) if words[0] in kinds else ("", words)
        org, name, path = rest[0], rest[1], rest[2:]
        name, _, rev = name.partition("@")
        base = f"https://huggingface.co/{kind}{org}/{name}/resolve/{rev or 'main'}/"
        return base + ("/".join(path) + "/" if path else "")
    return None


def rewrite_links(text: str, base: str) -> str:
    """Relative links (Markdown ``](x)``, HTML ``href``/``src``) made absolute under ``base``;
    links with a scheme, anchors, absolute paths and ``data:`` URIs are left as they are."""

    def fix(m: re.Match[str]) -> str:
        link = m.group(2)
        if not link or link.startswith(("#", "/", "data:", "mailto:")) or re.match(r"^[a-z][a-z0-9+.-]*:", link, re.I):
            return m.group(0)
        return m.group(1) + base + (link[2:] if link.startswith("./") else link) + m.group(3)

    return _HTML_LINK.sub(fix, _MD_LINK.sub(fix, text))


def linked_runs(text: str) -> set[str]:
    """The run ids whose folders (``runs/<id>/``) relative links of ``text`` point to."""
    links = [m.group(2) for m in _MD_LINK.finditer(text)] + [m.group(2) for m in _HTML_LINK.finditer(text)]
    return {m.group(1) for link in links if (m := _RUN_LINK.match(link))}


def files_to_export(results: Path, what: str) -> list[Path]:
    """The files of ``results`` that ``what`` (report, runs or all) exports, relative paths."""
    if what not in WHATS:
        raise DataError(f"--what must be one of {', '.join(WHATS)}; got {what!r}")
    out: list[Path] = []
    if what in ("report", "all"):
        if not (results / "BENCHMARK_REPORT.md").exists():
            raise DataError(f"{results}: no report to export (BENCHMARK_REPORT.md is missing); write it with "
                            f"`benchlab report {results}`, or export --what runs")
        out += [Path(n) for n in REPORT_FILES if (results / n).is_file()]
        if (results / "plots").is_dir():
            out += sorted(p.relative_to(results) for p in (results / "plots").rglob("*") if p.is_file())
    if what in ("runs", "all"):
        for folder in ("runs", VERSIONS_DIR):
            if (results / folder).is_dir():
                out += sorted(p.relative_to(results) for p in (results / folder).rglob("*")
                              if p.is_file() and not p.name.endswith(".tmp"))
        if (results / "benchmark.json").is_file():
            out.append(Path("benchmark.json"))
    return out


def _filesystem(target: str) -> tuple[Any, str]:
    from benchlab.extras import require

    scheme = urlsplit(target).scheme
    require("export", "benchlab export", ("fsspec",))
    if scheme == "s3":
        require("export", "benchlab export to s3://", ("s3fs",))
    elif scheme == "hf":
        require("export", "benchlab export to hf://", ("huggingface_hub",))
    import fsspec

    options = {"auto_mkdir": True} if scheme in ("", "file") else {}
    fs, root = fsspec.core.url_to_fs(target, **options)
    return fs, root.rstrip("/")


def export(results: Path, target: str, *, what: str = "all", dry_run: bool = False,
           public: str | None = None, now: datetime | None = None) -> ExportResult:
    """Upload what changed of ``results`` to ``target`` (see the module docstring)."""
    results = Path(results)
    paths = files_to_export(results, what)
    base = public_url(target, public)
    fs, root = _filesystem(target)
    manifest_path = f"{root}/{MANIFEST}"
    try:
        manifest = json.loads(fs.cat_file(manifest_path)) if fs.exists(manifest_path) else {}
    except (OSError, ValueError):
        manifest = {}
    known: dict[str, Any] = manifest.get("files", {})
    try:  # one listing, to upload again what the target lost since
        present = {p[len(root) + 1:] if p.startswith(root + "/") else p: info.get("size")
                   for p, info in fs.find(root, detail=True).items()}
    except (FileNotFoundError, OSError):
        present = {}
    result = ExportResult((now or datetime.now(UTC)).isoformat(timespec="seconds"), what, safe_url(target),
                          base, dry_run)
    linked: set[str] = set()
    for rel in paths:
        name = rel.as_posix()
        data = (results / rel).read_bytes()
        if name in LINKED:
            linked |= linked_runs(data.decode("utf-8"))
            if base is not None:
                data = rewrite_links(data.decode("utf-8"), base).encode("utf-8")
        sha = hashlib.sha256(data).hexdigest()
        same = known.get(name, {}).get("sha256") == sha and present.get(name) in (len(data), None) \
            and name in present
        if not same and not dry_run:
            fs.pipe_file(f"{root}/{name}", data)
            known[name] = {"sha256": sha, "bytes": len(data)}
        result.files.append(ExportFile(name, sha, len(data), not same))
    held = {n.split("/")[1] for n in [*present, *(f.path for f in result.files)] if n.startswith("runs/")
            and n.count("/") >= 2}
    result.unpublished_runs = sorted(linked - held)
    if not dry_run:
        if result.uploaded or not fs.exists(manifest_path):
            fs.pipe_file(manifest_path, json.dumps({"files": known, "updated": result.when}, indent=1,
                                                   sort_keys=True).encode())
        append_log(results, result)
    return result


def append_log(results: Path, result: ExportResult) -> None:
    """Append the export to ``exports.json`` (a list) and ``EXPORTS.md`` (a table) in ``results``."""
    log_json = results / LOG_JSON
    entries = json.loads(log_json.read_text()) if log_json.exists() else []
    entries.append(result.to_json())
    log_json.write_text(json.dumps(entries, indent=1))
    log_md = results / LOG_MD
    if not log_md.exists():
        log_md.write_text("# Exports\n\n| when | what | where | files | uploaded | bytes uploaded |\n"
                          "|---|---|---|---:|---:|---:|\n")
    with open(log_md, "a") as fh:
        fh.write(f"| {result.when} | {result.what} | {result.target} | {len(result.files)} | "
                 f"{len(result.uploaded)} | {result.uploaded_bytes} |\n")


__all__ = ["LOG_JSON", "LOG_MD", "MANIFEST", "WHATS", "ExportFile", "ExportResult", "append_log", "export",
           "files_to_export", "linked_runs", "public_url", "rewrite_links", "safe_url"]

