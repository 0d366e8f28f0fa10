"""The ledger's ``meta`` table: the benchmark record and the records other modules keep there,
each read and written through its own method, never by its key."""

from __future__ import annotations

import json
from typing import Any

from benchlab.benchmark_info import BenchmarkInfo
from benchlab.ledger.connection import LedgerConnection
from benchlab.ledger.records import (
    FLAGGED_KEY,
    HARDWARE_KEY,
    REGISTRATION_KEY,
    SEARCH_KEY,
    SEQUENTIAL_KEY,
    VERSIONS_KEY,
    Registration,
)


class MetaRecords(LedgerConnection):
    """A ledger's ``meta`` records: what :class:`~benchlab.ledger.Store` reads and writes there."""

    def set_meta(self, **values: Any) -> None:
        with self.transaction() as c:
            c.executemany("INSERT OR REPLACE INTO meta VALUES (?, ?)",
                          [(k, json.dumps(v, default=str)) for k, v in values.items()])

    def meta(self) -> dict[str, Any]:
        return {k: json.loads(v) for k, v in self.conn.execute("SELECT key, value FROM meta")}

    def set_benchmark(self, info: BenchmarkInfo) -> None:
        """Record the benchmark this ledger holds (replacing what was recorded)."""
        self.set_meta(**info.to_meta())

    def benchmark(self) -> BenchmarkInfo | None:
        """The benchmark this ledger holds; None before ``benchlab run`` recorded one."""
        return BenchmarkInfo.from_meta(self.meta())

    # ------------------------------------------------------------------ records kept in meta

    def _meta_value(self, key: str) -> Any:
        row = self.conn.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return None if row is None else json.loads(row[0])

    def versions(self) -> list[dict[str, Any]]:
        """The benchmark's versions on record (code, spec, packages at each change), oldest first."""
        return list(self._meta_value(VERSIONS_KEY) or [])

    def set_versions(self, versions: list[dict[str, Any]]) -> None:
        self.set_meta(**{VERSIONS_KEY: versions})

    def hardware(self) -> dict[str, Any]:
        """The hosts the runs ran on, by host name (empty when none was recorded)."""
        return dict(self._meta_value(HARDWARE_KEY) or {})

    def set_hardware(self, hosts: dict[str, Any]) -> None:
        self.set_meta(**{HARDWARE_KEY: hosts})

    def sequential(self) -> dict[str, Any] | None:
        """``run --until-decided``'s design and each pair's state at its last look (``{"design",
        "baseline", "pairs"}``); None when the results were not run that way."""
        return self._meta_value(SEQUENTIAL_KEY) or None

    def set_sequential(self, record: dict[str, Any]) -> None:
        self.set_meta(**{SEQUENTIAL_KEY: record})

    def set_flagged(self, flagged: list[dict[str, Any]]) -> None:
        """The (task, config) pairs whose every run failed, as the sweep's end found them."""
        self.set_meta(**{FLAGGED_KEY: flagged})

    def search_record(self) -> dict[str, Any] | None:
        """What a search recorded of its study in the study's ledger; None in a benchmark's ledger."""
        found = self._meta_value(SEARCH_KEY)
        return None if found is None else dict(found)

    def set_search_record(self, record: dict[str, Any]) -> None:
        self.set_meta(**{SEARCH_KEY: record})

    def registration(self) -> Registration | None:
        """The pre-registered analysis plan (:mod:`benchlab.preregistration`), or None."""
        found = self._meta_value(REGISTRATION_KEY)
        return Registration.from_json(found) if found else None

    def set_registration(self, record: Registration) -> None:
        self.set_meta(**{REGISTRATION_KEY: record.to_json()})
