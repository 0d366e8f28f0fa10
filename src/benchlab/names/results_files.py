"""A results folder's own files, beside its ``runs/`` (whose files ``run_files.py`` names), spelt
here once; and ``benchmark.json``, written and read here only.

What the folder holds, and what writes each:

- ``benchlab.db``: the ledger (``benchlab.ledger``); ``.benchlab.lock``: the lock its writers hold.
- ``benchmark.json``: the spec the folder was last run with (:class:`SavedSpec`), written by
  ``benchlab run`` beside the ledger's copy of the benchmark, so that ``collect --rebuild``,
  ``status`` and ``collect --reread`` can read the runs again without the spec file.
- ``versions/<id>/``: one folder per benchmark version: ``version.json``, the spec as that version
  resolved it in ``spec.json`` (a :class:`SavedSpec` too), the code's diff in ``code.diff``, the
  installed packages in ``packages.txt``; ``versions/dataset-hashes.json`` keeps the datasets'
  hashes between versions (all written by ``execute/version.py``).
- ``preregistration.json``: the pre-registered analysis plan (``benchlab.history.preregistration``).
- ``ledger-records.json``: the ledger's own records as ``benchlab export`` publishes them.
- ``merged.json``: where a merged folder's runs came from (``benchlab.history.merge``).
- ``search/<name>/``: a search study's folder (``benchlab.search``).
- the report (``benchlab report``): ``BENCHMARK_REPORT.md``, ``BENCHMARKS.md``, ``results.csv``,
  ``report.html``, the figures under ``plots/``, and ``report-tables.json``: the report's tables
  with the key of what they were computed from, which the dashboard shows while the key holds
  (:mod:`benchlab.names.report_tables`, written only when the report is written into the folder).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

from benchlab.errors import DataError
from benchlab.json_types import ConfigValues, JsonObject

BENCHMARK_FILE: Final = "benchmark.json"
LEDGER_FILE: Final = "benchlab.db"
LOCK_FILE: Final = ".benchlab.lock"
REGISTRATION_FILE: Final = "preregistration.json"
RECORDS_FILE: Final = "ledger-records.json"
SOURCES_FILE: Final = "merged.json"
SEARCH_DIR: Final = "search"

#: The folder of a results folder that holds one directory per benchmark version
#: (``versions/<id>/``: ``version.json``, the spec as run in ``spec.json``, the code's diff).
VERSIONS_DIR: Final = "versions"
VERSION_FILE: Final = "version.json"
VERSION_SPEC_FILE: Final = "spec.json"
DIFF_FILE: Final = "code.diff"  # versions/<id>/: the code's uncommitted changes
PACKAGES_FILE: Final = "packages.txt"  # versions/<id>/: the installed packages
DATASET_CACHE: Final = "dataset-hashes.json"  # versions/: dataset hashes, kept between versions

REPORT_FILE: Final = "BENCHMARK_REPORT.md"
BENCHMARKS_FILE: Final = "BENCHMARKS.md"
RESULTS_CSV: Final = "results.csv"
REPORT_HTML: Final = "report.html"
PLOTS_DIR: Final = "plots"
REPORT_TABLES_FILE: Final = "report-tables.json"
#: The report's files at the top of the folder, in the order ``benchlab export`` lists them.
REPORT_FILES: Final = (REPORT_FILE, BENCHMARKS_FILE, RESULTS_CSV, REPORT_HTML, REPORT_TABLES_FILE)


def write_text_atomic(path: Path, text: str) -> None:
    """Write ``text`` (UTF-8) to ``path`` whole or not at all: through a file of this process beside
    it and one rename (atomic within a folder), so a reader never sees half a file and two writers
    at once never mix."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


@dataclass(frozen=True)
class SavedSpec:
    """The spec a benchmark was run with, as kept beside its ledger: ``benchmark.json`` (the
    folder's last run) and ``versions/<id>/spec.json`` (each version's)."""

    spec: JsonObject  # the spec as JSON (``Spec.model_dump(mode="json", by_alias=True, exclude_none=True)``)
    spec_path: str | None = None  # where the spec file was when it was run
    overrides: ConfigValues = field(default_factory=dict)  # the run's ``-s key=value``

    def write(self, path: Path) -> None:
        """Write the record to ``path``, whole or not at all (a temporary file renamed over it)."""
        write_text_atomic(path, json.dumps({"spec": self.spec, "spec_path": self.spec_path,
                                            "overrides": self.overrides}, indent=1, default=str))

    @classmethod
    def read(cls, path: Path) -> SavedSpec | None:
        """The record in ``path``; None when there is no such file. A file written before a key
        existed reads with that key's default (``spec`` has always been written), and keys this
        release does not know are ignored. Raises :class:`~benchlab.errors.DataError`, naming the
        file and the field, when the file is not such a record."""
        try:
            text = path.read_text()
        except (FileNotFoundError, NotADirectoryError):
            return None
        try:
            data = json.loads(text)
        except ValueError as e:
            raise DataError(f"{path}: not JSON ({e}); `benchlab run` writes it again from the spec") from None
        if not isinstance(data, dict) or not isinstance(data.get("spec"), dict):
            raise DataError(f"{path}: field 'spec': expected the spec as a JSON object, "
                            f"got {type(data.get('spec') if isinstance(data, dict) else data).__name__}")
        spec_path, overrides = data.get("spec_path"), data.get("overrides")
        return cls(data["spec"], spec_path if isinstance(spec_path, str) else None,
                   dict(overrides) if isinstance(overrides, dict) else {})


def benchmark_file(results: Path) -> Path:
    """Where the results folder ``results`` keeps its :class:`SavedSpec` (``benchmark.json``)."""
    return results / BENCHMARK_FILE


def report_tables_file(results: Path) -> Path:
    """Where the results folder ``results`` keeps the report's tables for the dashboard
    (:mod:`benchlab.names.report_tables`)."""
    return results / REPORT_TABLES_FILE


def version_spec_file(results: Path, version_id: str) -> Path:
    """Where version ``version_id`` of ``results`` keeps the spec as it resolved it (a :class:`SavedSpec`)."""
    return results / VERSIONS_DIR / version_id / VERSION_SPEC_FILE


__all__ = [
    "BENCHMARKS_FILE", "BENCHMARK_FILE", "DATASET_CACHE", "DIFF_FILE", "LEDGER_FILE", "LOCK_FILE",
    "PACKAGES_FILE", "PLOTS_DIR", "RECORDS_FILE", "REGISTRATION_FILE", "REPORT_FILE", "REPORT_FILES",
    "REPORT_HTML", "REPORT_TABLES_FILE", "RESULTS_CSV", "SEARCH_DIR", "SOURCES_FILE", "VERSIONS_DIR",
    "VERSION_FILE", "VERSION_SPEC_FILE", "SavedSpec", "benchmark_file", "report_tables_file", "version_spec_file",
]
