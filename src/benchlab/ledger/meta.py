"""The ledger's ``meta`` table: the benchmark record and the records other modules keep there,
each read and written through its own method as a typed record (:mod:`benchlab.ledger.records`),
never by its key. The JSON kept under each key is the record's ``to_json``: the layout earlier
releases wrote, so an older ledger reads into the same records."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, TypeVar

from benchlab.errors import StoreError
from benchlab.ledger.connection import LedgerConnection
from benchlab.ledger.records import (
    FLAGGED_KEY,
    HARDWARE_KEY,
    REGISTRATION_KEY,
    SEARCH_KEY,
    SEQUENTIAL_KEY,
    VERSIONS_KEY,
    FlaggedPair,
    HostRecord,
    Registration,
    SearchRecord,
    SequentialRecord,
    VersionRecord,
)
from benchlab.names.benchmark_info import BenchmarkInfo

_R = TypeVar("_R")


class MetaRecords(LedgerConnection):
    """A ledger's ``meta`` records: what :class:`~benchlab.ledger.Store` reads and writes there."""

    def _set_meta(self, **values: Any) -> None:
        with self.transaction() as c:
            c.executemany("INSERT OR REPLACE INTO meta VALUES (?, ?)",
                          [(k, json.dumps(v, default=str)) for k, v in values.items()])

    def _meta(self) -> dict[str, Any]:
        return {k: json.loads(v) for k, v in self.conn.execute("SELECT key, value FROM meta")}

    def set_benchmark(self, info: BenchmarkInfo) -> None:
        """Record the benchmark this ledger holds (replacing what was recorded)."""
        self._set_meta(**info.to_meta())

    def benchmark(self) -> BenchmarkInfo | None:
        """The benchmark this ledger holds; None before ``benchlab run`` recorded one."""
        return BenchmarkInfo.from_meta(self._meta())

    # ------------------------------------------------------------------ records kept in meta

    def _meta_value(self, key: str) -> Any:
        row = self.conn.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return None if row is None else json.loads(row[0])

    def _meta_record(self, key: str, convert: Callable[[Any], _R]) -> _R:
        """``convert`` of the JSON kept under ``key``; a value no release wrote (a hand edit, a
        torn copy) is a StoreError naming the ledger, the record and the way out, not a traceback
        from whichever reader met it first."""
        try:
            return convert(self._meta_value(key))
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            raise StoreError(
                f"{self.path}: the ledger's {key!r} record cannot be read ({type(exc).__name__}: {exc}); "
                f"`benchlab collect --rebuild {self.path.parent}` recreates the ledger from the run directories"
            ) from None

    def versions(self) -> list[VersionRecord]:
        """The benchmark's versions on record (code, spec, packages at each change), oldest first."""
        return self._meta_record(VERSIONS_KEY, lambda found: [VersionRecord.from_json(v) for v in found or []])

    def set_versions(self, versions: list[VersionRecord]) -> None:
        self._set_meta(**{VERSIONS_KEY: [v.to_json() for v in versions]})

    def hardware(self) -> dict[str, HostRecord]:
        """The hosts the runs ran on, by host name (empty when none was recorded)."""
        return self._meta_record(HARDWARE_KEY, lambda found: {
            str(host): HostRecord.from_json(facts or {}) for host, facts in (found or {}).items()})

    def set_hardware(self, hosts: dict[str, HostRecord]) -> None:
        self._set_meta(**{HARDWARE_KEY: {host: facts.to_json() for host, facts in hosts.items()}})

    def sequential(self) -> SequentialRecord | None:
        """``run --until-decided``'s design and each pair's state at its last look; None when the
        results were not run that way."""
        return self._meta_record(SEQUENTIAL_KEY, lambda found: SequentialRecord.from_json(found) if found else None)

    def set_sequential(self, record: SequentialRecord) -> None:
        self._set_meta(**{SEQUENTIAL_KEY: record.to_json()})

    def flagged(self) -> list[FlaggedPair]:
        """The (task, config) pairs whose every run failed, as the last sweep's end found them."""
        return self._meta_record(FLAGGED_KEY, lambda found: [FlaggedPair.from_json(f) for f in found or []])

    def set_flagged(self, flagged: list[FlaggedPair]) -> None:
        """Record the (task, config) pairs whose every run failed, as the sweep's end found them."""
        self._set_meta(**{FLAGGED_KEY: [f.to_json() for f in flagged]})

    def search_record(self) -> SearchRecord | None:
        """What a search recorded of its study in the study's ledger; None in a benchmark's ledger."""
        return self._meta_record(SEARCH_KEY, lambda found: None if found is None else SearchRecord.from_json(found))

    def set_search_record(self, record: SearchRecord) -> None:
        self._set_meta(**{SEARCH_KEY: record.to_json()})

    def registration(self) -> Registration | None:
        """The pre-registered analysis plan (:mod:`benchlab.history.preregistration`), or None."""
        return self._meta_record(REGISTRATION_KEY, lambda found: Registration.from_json(found) if found else None)

    def set_registration(self, record: Registration) -> None:
        self._set_meta(**{REGISTRATION_KEY: record.to_json()})
