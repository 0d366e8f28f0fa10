"""``benchlab export``: publish a results folder's report and runs to any fsspec target.

The target is an fsspec URL: a local folder, ``memory://``, ``s3://BUCKET/PREFIX`` (s3fs),
``hf://datasets/ORG/NAME`` (huggingface_hub's ``HfFileSystem``). Credentials come from each
filesystem's own configuration (``~/.aws``, ``AWS_*`` or ``FSSPEC_S3_*`` variables, ``hf auth
login``); benchlab never reads or stores them.

An export is idempotent: the target keeps a manifest (:data:`MANIFEST`) of the SHA-256 of every
file it received, and only files whose hash changed, or that the target no longer lists, are
uploaded; a second export of the same folder uploads nothing. Relative links in BENCHMARKS.md,
BENCHMARK_REPORT.md and report.html are rewritten to the target's public URLs, and every
export is appended to the folder's job log (``EXPORTS.md`` and ``exports.json``, each replaced
whole so that a killed export never leaves half a log; a damaged log stops the next export before
anything is uploaded, with a message saying how to go on).

What is published is the results folder and nothing beyond it: a symbolic link that leads out of
the folder is not followed (it is listed in :attr:`ExportResult.outside_links`), and a version's
``code.diff`` (the uncommitted code under test) is published only with ``with_diff``. Before
anything is uploaded every file is scanned for credentials and secret values as what it really
holds (:mod:`benchlab.history.scan`: archives unpacked, text told by its bytes, the images
report.html embeds decoded as images); one found stops the export, naming the file, line and
the value's fingerprint, unless ``allow`` names that finding (never a whole file).

A link to a run folder (``runs/<id>/``) becomes a link to the ``index.html`` that the export
writes into each published run folder: object stores (S3) and the Hugging Face Hub serve files,
not folders, so a folder link would not resolve there.
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

from benchlab.collect.rebuild import ledger_records
from benchlab.errors import DataError, UsageError
from benchlab.history.scan import Limits, scan_bytes
from benchlab.json_types import JsonObject
from benchlab.names.results_files import (
    BENCHMARK_FILE,
    BENCHMARKS_FILE,
    DIFF_FILE,
    PLOTS_DIR,
    RECORDS_FILE,
    REGISTRATION_FILE,
    REPORT_FILE,
    REPORT_FILES,
    REPORT_HTML,
    VERSIONS_DIR,
)
from benchlab.names.run_files import RUNS_DIR
from benchlab.secrets import Finding, SecretFound, known_fingerprints

MANIFEST = ".benchlab-export.json"
LOG_MD = "EXPORTS.md"
LOG_JSON = "exports.json"
WHATS = ("report", "runs", "all")
#: The files whose relative links point into the results folder and are rewritten on export.
LINKED = (REPORT_FILE, BENCHMARKS_FILE, REPORT_HTML)
_MD_LINK = re.compile(r"(\]\()([^)\s]+)(\))")
_HTML_LINK = re.compile(r"""((?:href|src)=["'])([^"']+)(["'])""")
_RUN_LINK = re.compile(r"^(?:\./)?runs/([^/]+)/")
_RUN_FOLDER_LINK = re.compile(r"^((?:\./)?runs/[^/]+/)$")
#: The page an export writes into each run folder it publishes, listing the folder's files.
RUN_INDEX = "index.html"


@dataclass(frozen=True)
class ExportFile:
    """A file to export: its path under the target, its SHA-256 and size as uploaded."""

    path: str
    sha256: str
    bytes: int
    uploaded: bool


@dataclass(frozen=True)
class ExportLogEntry:
    """One export as ``exports.json`` keeps it: counts of files, not the files themselves, beside
    the paths that were uploaded.

    ``unpublished_runs`` and ``outside_links`` are None in an entry written before the log kept
    them: such an entry is written back without them, as it was."""

    when: str
    what: str
    target: str
    public_url: str | None
    dry_run: bool
    files: int
    uploaded: int
    uploaded_bytes: int
    skipped: int
    uploaded_files: list[str]
    unpublished_runs: list[str] | None = None
    outside_links: list[str] | None = None

    def to_json(self) -> JsonObject:
        """The entry with the keys (and in the order) the log has always had."""
        out: JsonObject = {"when": self.when, "what": self.what, "target": self.target, "public_url": self.public_url,
                           "dry_run": self.dry_run, "files": self.files, "uploaded": self.uploaded,
                           "uploaded_bytes": self.uploaded_bytes, "skipped": self.skipped,
                           "uploaded_files": self.uploaded_files}
        if self.unpublished_runs is not None:
            out["unpublished_runs"] = self.unpublished_runs
        if self.outside_links is not None:
            out["outside_links"] = self.outside_links
        return out

    @classmethod
    def from_json(cls, data: JsonObject) -> ExportLogEntry:
        """An entry as the log holds it; ``KeyError``/``TypeError``/``ValueError`` when it is not one
        (:func:`read_log` turns those into a message about the log)."""
        def paths(key: str) -> list[str] | None:
            value = data.get(key)
            if value is None:
                return None
            if not isinstance(value, list) or not all(isinstance(x, str) for x in value):
                raise ValueError(f"{key}: expected a list of paths, got {value!r}")
            return list(value)

        when, what, target = str(data["when"]), str(data["what"]), str(data["target"])
        url = None if data.get("public_url") is None else str(data["public_url"])
        dry_run = bool(data["dry_run"])
        files, uploaded, uploaded_bytes, skipped = (int(data[k]) for k in ("files", "uploaded", "uploaded_bytes",
                                                                           "skipped"))
        uploaded_files = paths("uploaded_files")
        if uploaded_files is None:
            raise KeyError("uploaded_files")
        return cls(when, what, target, url, dry_run, files, uploaded, uploaded_bytes, skipped, uploaded_files,
                   paths("unpublished_runs"), paths("outside_links"))


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
    #: Symbolic links in the results folder that lead out of it: not followed, not published.
    outside_links: list[str] = field(default_factory=list)

    @property
    def uploaded(self) -> list[ExportFile]:
        return [f for f in self.files if f.uploaded]

    @property
    def uploaded_bytes(self) -> int:
        return sum(f.bytes for f in self.uploaded)

    def log_entry(self) -> ExportLogEntry:
        """This export as its line in the folder's export log."""
        return ExportLogEntry(self.when, self.what, self.target, self.public_url, self.dry_run, len(self.files),
                              len(self.uploaded), self.uploaded_bytes, len(self.files) - len(self.uploaded),
                              [f.path for f in self.uploaded], list(self.unpublished_runs), list(self.outside_links))

    def to_json(self) -> JsonObject:
        """What ``export --json`` prints: the export's log entry."""
        return self.log_entry().to_json()


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


def rewrite_links(text: str, base: str | None) -> str:
    """Relative links (Markdown ``](x)``, HTML ``href``/``src``) made absolute under ``base``
    (kept relative where ``base`` is None), a run folder's link (``runs/<id>/``) pointing at its
    :data:`RUN_INDEX`; links with a scheme, anchors, absolute paths and ``data:`` URIs are left
    as they are."""

    def fix(m: re.Match[str]) -> str:
        link = m.group(2)
        if not link or link.startswith(("#", "/", "data:", "mailto:")) or re.match(r"^[a-z][a-z0-9+.-]*:", link, re.I):
            return m.group(0)
        if _RUN_FOLDER_LINK.match(link):
            link += RUN_INDEX
        if base is None:
            return m.group(1) + link + m.group(3)
        return m.group(1) + base + (link[2:] if link.startswith("./") else link) + m.group(3)

    return _HTML_LINK.sub(fix, _MD_LINK.sub(fix, text))


def linked_runs(text: str) -> set[str]:
    """The run ids whose folders (``runs/<id>/``) relative links of ``text`` point to."""
    links = [m.group(2) for m in _MD_LINK.finditer(text)] + [m.group(2) for m in _HTML_LINK.finditer(text)]
    return {m.group(1) for link in links if (m := _RUN_LINK.match(link))}


def _files_under(results: Path, folder: Path, outside: list[str]) -> list[Path]:
    """The files under ``folder`` (relative to ``results``), not following a symbolic link that
    leads out of ``results`` (each such link is appended to ``outside``)."""
    import os

    root = results.resolve()
    out: list[Path] = []
    for top, dirs, names in os.walk(folder, followlinks=False):
        here = Path(top)
        for d in list(dirs):
            if (here / d).is_symlink():
                dirs.remove(d)
                target = (here / d).resolve()
                if target.is_relative_to(root) and target.is_dir():
                    outside.append((here / d).relative_to(results).as_posix() + "/ (a link to a folder, not "
                                   "followed)")
                else:
                    outside.append((here / d).relative_to(results).as_posix())
        for name in names:
            path = here / name
            if path.is_symlink():
                target = path.resolve()
                if not (target.is_relative_to(root) and target.is_file()):
                    outside.append(path.relative_to(results).as_posix())
                    continue
            if path.is_file():
                out.append(path.relative_to(results))
    return sorted(out)


def files_to_export(results: Path, what: str, *, with_diff: bool = False,
                    outside: list[str] | None = None) -> list[Path]:
    """The files of ``results`` that ``what`` (report, runs or all) exports, relative paths;
    ``versions/<id>/code.diff`` only ``with_diff``. Symbolic links that lead out of ``results``
    are left out and named in ``outside``."""
    outside = [] if outside is None else outside
    if what not in WHATS:
        raise DataError(f"--what must be one of {', '.join(WHATS)}; got {what!r}")
    out: list[Path] = []
    if what in ("report", "all"):
        if not (results / REPORT_FILE).exists():
            raise DataError(f"{results}: no report to export (BENCHMARK_REPORT.md is missing); write it with "
                            f"`benchlab report {results}`, or export --what runs")
        for n in REPORT_FILES:
            if (results / n).is_symlink() and not (results / n).resolve().is_relative_to(results.resolve()):
                outside.append(n)
            elif (results / n).is_file():
                out.append(Path(n))
        if (results / PLOTS_DIR).is_dir():
            out += _files_under(results, results / PLOTS_DIR, outside)
    if what in ("runs", "all"):
        for folder in (RUNS_DIR, VERSIONS_DIR):
            if (results / folder).is_dir():
                out += [p for p in _files_under(results, results / folder, outside)
                        if not p.name.endswith(".tmp") and (with_diff or p.parts[0] != VERSIONS_DIR
                                                            or p.name != DIFF_FILE)]
        # What `collect --rebuild` of the published copy needs beside the run folders (the ledger's
        # own records are added by export itself, read from the ledger: results_files.RECORDS_FILE).
        for name in (BENCHMARK_FILE, REGISTRATION_FILE):
            if (results / name).is_file() and not (results / name).is_symlink():
                out.append(Path(name))
    return out


def run_index(run_id: str, names: list[str]) -> str:
    """The page listing a published run folder's files (:data:`RUN_INDEX`), links relative."""
    import html

    items = "\n".join(f'<li><a href="{html.escape(n, quote=True)}">{html.escape(n)}</a></li>' for n in names)
    return ('<!DOCTYPE html>\n<html lang="en">\n<head><meta charset="utf-8">'
            f"<title>run {html.escape(run_id)}</title></head>\n<body>\n<h1>run {html.escape(run_id)}</h1>\n"
            f"<ul>\n{items}\n</ul>\n</body>\n</html>\n")


def allowed(entry: str) -> tuple[str, int] | str:
    """What one ``--allow-secret`` names: ``(path, line)`` for ``FILE:LINE``, the digest for a
    finding's fingerprint (``sha256:…``); a ``UsageError`` for anything else (a whole file is
    never let through: a second secret in it would go with the first)."""
    entry = entry.strip()
    if re.fullmatch(r"sha256:[0-9a-f]{16}", entry):
        return entry
    path, sep, line = entry.rpartition(":")
    if sep and path and line.isdigit():
        return path, int(line)
    raise UsageError(f"--allow-secret {entry}: name one finding, as the refusal printed it: FILE:LINE "
                     "(e.g. runs/ID/train.log:12) or its fingerprint (sha256:…), never a whole file")


def scan(results: Path, contents: dict[str, bytes], allow: list[str] | tuple[str, ...] = (),
         limits: Limits | None = None) -> list[Finding]:
    """The secrets found in ``contents`` (path -> bytes about to be published), unpacked and
    decoded (:mod:`benchlab.history.scan`), less the findings ``allow`` names one by one."""
    names = [allowed(a) for a in allow]
    places = {n for n in names if isinstance(n, tuple)}
    digests = {n for n in names if isinstance(n, str)}
    known = known_fingerprints(results)
    found: list[Finding] = []
    for name, data in contents.items():
        found += [f for f in scan_bytes(name, data, known, limits)
                  if (f.path, f.line) not in places and f.digest not in digests]
    return found


def _filesystem(target: str) -> tuple[Any, str]:
    from benchlab.names.extras import require

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
           public: str | None = None, now: datetime | None = None, allow: list[str] | tuple[str, ...] = (),
           with_diff: bool = False) -> ExportResult:
    """Upload what changed of ``results`` to ``target`` (see the module docstring).

    Raises :class:`benchlab.secrets.SecretFound` (nothing uploaded) when a file to publish holds
    a credential or a secret value that ``allow`` does not name; ``DataError`` when the
    folder's export log is damaged.
    """
    results = Path(results)
    outside: list[str] = []
    paths = files_to_export(results, what, with_diff=with_diff, outside=outside)
    entries = read_log(results)  # a damaged log stops the export before anything is uploaded
    base = public_url(target, public)
    contents: dict[str, bytes] = {}
    linked: set[str] = set()
    runs: dict[str, list[str]] = {}
    for rel in paths:
        name = rel.as_posix()
        data = (results / rel).read_bytes()
        if name in LINKED:
            linked |= linked_runs(data.decode("utf-8"))
            data = rewrite_links(data.decode("utf-8"), base).encode("utf-8")
        contents[name] = data
        if rel.parts[0] == "runs" and len(rel.parts) >= 3:
            runs.setdefault(rel.parts[1], []).append("/".join(rel.parts[2:]))
    for run_id, names in runs.items():
        contents.setdefault(f"runs/{run_id}/{RUN_INDEX}", run_index(run_id, names).encode("utf-8"))
    if what in ("runs", "all"):
        records = ledger_records(results)
        if records is not None:
            contents[RECORDS_FILE] = records
    findings = scan(results, contents, allow)
    if findings:
        raise SecretFound(findings, "remove the secret (and rotate it), or, for a false alarm, let that one "
                                    "finding through with --allow-secret FILE:LINE or --allow-secret "
                                    "sha256:… (its fingerprint, in brackets)")
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
                          base, dry_run, outside_links=outside)
    for name, data in contents.items():
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
        append_log(results, result, entries)
    return result


def read_log(results: Path) -> list[ExportLogEntry]:
    """The entries of the folder's ``exports.json``, oldest first (empty when there is none).

    Raises ``DataError`` when it cannot be read as a list of exports, saying how to go on."""
    log_json = results / LOG_JSON
    if not log_json.exists():
        return []
    try:
        entries = json.loads(log_json.read_text(encoding="utf-8"))
    except (ValueError, UnicodeDecodeError) as exc:
        where = f" (line {exc.lineno}: {exc.msg})" if isinstance(exc, json.JSONDecodeError) else ""
        raise DataError(f"{log_json}: the export log is damaged{where}, perhaps by an export that was killed "
                        f"or a full disk. Nothing was uploaded. Move it aside to start a new log "
                        f"(mv {log_json} {log_json}.damaged; EXPORTS.md keeps the earlier exports) and export "
                        "again") from None
    if not isinstance(entries, list):
        raise DataError(f"{log_json}: expected a list of exports, found {type(entries).__name__}; move it aside "
                        f"(mv {log_json} {log_json}.damaged) and export again")
    out = []
    for i, entry in enumerate(entries):
        try:
            if not isinstance(entry, dict):
                raise TypeError(f"expected an object, found {type(entry).__name__}")
            out.append(ExportLogEntry.from_json(entry))
        except (KeyError, TypeError, ValueError) as exc:
            what = f"no {exc.args[0]!r}" if isinstance(exc, KeyError) else str(exc)
            raise DataError(f"{log_json}: entry {i} is not an export ({what}); move the log aside "
                            f"(mv {log_json} {log_json}.damaged; EXPORTS.md keeps the earlier exports) and "
                            "export again") from None
    return out


def append_log(results: Path, result: ExportResult, entries: list[ExportLogEntry] | None = None) -> None:
    """Append the export to ``exports.json`` (a list) and ``EXPORTS.md`` (a table) in ``results``,
    each replaced whole (a reader, or a killed export, never sees half of one)."""
    from benchlab.report.atomic import write_text_atomic

    entries = read_log(results) if entries is None else entries
    write_text_atomic(results / LOG_JSON, json.dumps([e.to_json() for e in [*entries, result.log_entry()]],
                                                     indent=1))
    log_md = results / LOG_MD
    text = log_md.read_text(encoding="utf-8") if log_md.exists() else (
        "# Exports\n\n| when | what | where | files | uploaded | bytes uploaded |\n|---|---|---|---:|---:|---:|\n")
    write_text_atomic(log_md, text + f"| {result.when} | {result.what} | {result.target} | {len(result.files)} | "
                                     f"{len(result.uploaded)} | {result.uploaded_bytes} |\n")


__all__ = ["LOG_JSON", "LOG_MD", "MANIFEST", "RUN_INDEX", "WHATS", "ExportFile", "ExportLogEntry", "ExportResult",
           "append_log", "export",
           "files_to_export", "known_fingerprints", "linked_runs", "public_url", "read_log", "rewrite_links",
           "run_index",
           "safe_url", "scan", "allowed"]

