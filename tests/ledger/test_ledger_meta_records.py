"""The records other modules keep in the ledger's ``meta`` table read into typed records, from the
JSON that earlier releases wrote there, and written back they keep that layout, key for key."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from benchlab.ledger import (
    DB_NAME,
    DatasetSum,
    FlaggedPair,
    HostRecord,
    PlanProgress,
    SearchRecord,
    SequentialDesignRecord,
    SequentialPairRecord,
    SequentialRecord,
    Store,
)
from benchlab.secrets import Fingerprint

# Each value as `benchlab run`, `run --until-decided`, `benchlab search` and the sweep's end wrote
# it before the records were typed: spelt out here, not produced by the code under test.
VERSION_NOW = (
    '{"id": "a1b2c3d4e5f6", "recorded_at": "2026-03-01T10:00:00+00:00", "commit": "0123456789abcdef0123", '
    '"dirty": true, "diff_sha256": "feedbeefcafe0000", "tree_sha256": "77aa", "interpreter": "/usr/bin/python3", '
    '"packages_of": "command", "env": {"HF_TOKEN": "sha256:00112233aabbccdd", "DATA_DIR": null}, '
    '"datasets": [{"name": "gsm8k", "path": "data/gsm8k.jsonl", "sha256": "5e5e5e5e5e5e5e5e", "bytes": 2048, '
    '"files": 1}], "spec_sha256": "abcd", "secret_fingerprints": [{"name": "$HF_TOKEN", "salt": "0f0f", '
    '"sha256": "9999", "length": 37}], "packages_count": 212, "changes": ["dataset \'gsm8k\' at data/gsm8k.jsonl '
    '(sha256 1111 -> 5e5e)"]}')
# A version from before tree hashes and secret fingerprints were recorded.
VERSION_OLDER = (
    '{"id": "000000000001", "recorded_at": "2025-12-24T08:30:00+00:00", "commit": "fedcba9876543210fedc", '
    '"dirty": false, "diff_sha256": null, "interpreter": "/usr/bin/python3", "packages_of": "benchlab", '
    '"env": {}, "datasets": [], "spec_sha256": "0000", "packages_count": 10, "changes": []}')
HARDWARE = ('{"node-a": {"cpu": "AMD EPYC 7763 64-Core Processor", "cores": 128, '
            '"gpus": {"0": "NVIDIA H100 80GB HBM3", "1": "NVIDIA H100 80GB HBM3"}}, '
            '"laptop": {"cpu": null, "cores": 8, "gpus": {}}}')
SEQUENTIAL = (
    '{"design": {"alpha": 0.05, "pairs": 2, "pair_alpha": 0.025, "correction": "bonferroni", '
    '"spending": "obrien-fleming", "margin": null, "looks": [4, 8], "bounds": [2.797, null]}, '
    '"baseline": "base", "pairs": [{"task": "t1", "config": "far", "seeds": 4, "status": "better", '
    '"reason": "decided: better than the baseline", "mean_diff": 1.5, "rci": [0.25, 2.75], "failed": 0}, '
    '{"task": "t1", "config": "same", "seeds": 8, "status": "max-seeds", "reason": "undecided at --max-seeds", '
    '"mean_diff": null, "rci": [null, null], "failed": 1}]}')
FLAGGED = '[{"task": "t", "config": "broken", "failures": 3, "classes": {"exception": 2, "timeout": 1}}]'
SEARCH = ('{"study": "lr-study", "spec_name": "bench", "metric": "val_acc", "goal": "max", "summary": "final", '
          '"budget": 20, "sampler": "tpe", "pruner": "median", "base_config": "mlp", '
          '"allow_primary_reason": null, "pruning_blind": null, "spec_path": "/home/u/bench.yaml"}')
PLAN_RECORDING = '{"runs": 5000, "started": 1767225600.5}'


def _ledger_with(folder: Path, rows: dict[str, str]) -> Path:
    """A ledger whose meta rows are ``rows`` (key -> JSON text), written with sqlite3 itself."""
    Store.create(folder).close()
    with sqlite3.connect(folder / DB_NAME) as db:
        db.executemany("INSERT OR REPLACE INTO meta VALUES (?, ?)", list(rows.items()))
    db.close()
    return folder


def _raw(folder: Path, key: str) -> object:
    with sqlite3.connect(folder / DB_NAME) as db:
        (value,) = db.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
    db.close()
    return json.loads(value)


@pytest.fixture
def earlier(tmp_path: Path) -> Path:
    return _ledger_with(tmp_path / "results", {
        "versions": f"[{VERSION_OLDER}, {VERSION_NOW}]", "hardware": HARDWARE, "sequential": SEQUENTIAL,
        "flagged": FLAGGED, "search": SEARCH, "plan_recording": PLAN_RECORDING})


def test_versions_written_by_an_earlier_release_read_into_version_records(earlier: Path):
    with Store.open(earlier) as store:
        older, now = store.versions()
    assert (older.id, older.commit, older.dirty, older.tree_sha256, older.secret_fingerprints) == (
        "000000000001", "fedcba9876543210fedc", False, None, ())
    assert now.id == "a1b2c3d4e5f6" and now.recorded_at == "2026-03-01T10:00:00+00:00"
    assert (now.dirty, now.diff_sha256, now.tree_sha256, now.packages_count) == (True, "feedbeefcafe0000", "77aa", 212)
    assert now.env == {"HF_TOKEN": "sha256:00112233aabbccdd", "DATA_DIR": None}
    assert now.datasets == (DatasetSum("gsm8k", "data/gsm8k.jsonl", "5e5e5e5e5e5e5e5e", 2048, 1),)
    assert now.secret_fingerprints == (Fingerprint("$HF_TOKEN", "0f0f", "9999", 37),)
    assert now.changes == ("dataset 'gsm8k' at data/gsm8k.jsonl (sha256 1111 -> 5e5e)",)


def test_hosts_sequential_flags_search_and_plan_progress_of_an_earlier_release_read_typed(earlier: Path):
    with Store.open(earlier) as store:
        hosts = store.hardware()
        sequential = store.sequential()
        flagged = store.flagged()
        search = store.search_record()
        progress = store.plan_recording()
    assert hosts == {"node-a": HostRecord("AMD EPYC 7763 64-Core Processor", 128,
                                          {"0": "NVIDIA H100 80GB HBM3", "1": "NVIDIA H100 80GB HBM3"}),
                     "laptop": HostRecord(None, 8, {})}
    assert sequential == SequentialRecord(
        SequentialDesignRecord(0.05, 2, 0.025, "bonferroni", "obrien-fleming", None, (4, 8), (2.797, None)), "base",
        (SequentialPairRecord("t1", "far", 4, "better", "decided: better than the baseline", 1.5, (0.25, 2.75), 0),
         SequentialPairRecord("t1", "same", 8, "max-seeds", "undecided at --max-seeds", None, (None, None), 1)))
    assert flagged == [FlaggedPair("t", "broken", 3, {"exception": 2, "timeout": 1})]
    assert search == SearchRecord(study="lr-study", spec_name="bench", metric="val_acc", goal="max", summary="final",
                                  budget=20, sampler="tpe", pruner="median", base_config="mlp",
                                  spec_path="/home/u/bench.yaml")
    # No plan is being recorded into the next table here: how many are recorded cannot be told.
    assert progress == PlanProgress(runs=5000, recorded=None, started=1767225600.5)


def test_typed_records_written_back_keep_the_stored_layout_key_for_key(earlier: Path, tmp_path: Path):
    with Store.open(earlier) as store:
        versions, hosts, sequential = store.versions(), store.hardware(), store.sequential()
        flagged, search = store.flagged(), store.search_record()
    assert sequential is not None and search is not None
    copy = _ledger_with(tmp_path / "copy", {})
    with Store.open(copy) as store:
        store.set_versions(versions)
        store.set_hardware(hosts)
        store.set_sequential(sequential)
        store.set_flagged(flagged)
        store.set_search_record(search)
    # The newer record is written as it was read: the same keys in the same order, the same values.
    older, now = _raw(copy, "versions")  # type: ignore[misc]
    assert list(now.items()) == list(json.loads(VERSION_NOW).items())
    # The older one gains the keys added since, empty: a reader takes them as it took them missing.
    assert {**json.loads(VERSION_OLDER), "tree_sha256": None, "secret_fingerprints": []} == older
    for key, text in (("hardware", HARDWARE), ("sequential", SEQUENTIAL), ("flagged", FLAGGED), ("search", SEARCH)):
        assert json.dumps(_raw(copy, key)) == json.dumps(json.loads(text)), key
    # And what was written reads back into the same records.
    with Store.open(copy) as store:
        assert (store.versions(), store.hardware(), store.sequential(), store.flagged(), store.search_record()) == (
            versions, hosts, sequential, flagged, search)


def test_a_ledger_without_meta_records_reads_as_nothing_recorded(tmp_path: Path):
    with Store.open(_ledger_with(tmp_path / "fresh", {})) as store:
        assert store.versions() == [] and store.hardware() == {} and store.flagged() == []
        assert store.sequential() is None and store.search_record() is None and store.plan_recording() is None


def test_a_resume_compares_the_version_as_an_earlier_release_recorded_it(earlier: Path):
    from benchlab.execute.version import BenchmarkVersion, changes_since

    with Store.open(earlier) as store:
        older, then = store.versions()
    # Now: the same commit and tree, no uncommitted diff any more, gsm8k changed and a dataset added.
    now = BenchmarkVersion(
        id="b0b0b0b0b0b0", recorded_at="2026-03-02T10:00:00+00:00", commit="0123456789abcdef0123", dirty=False,
        diff_sha256=None, tree_sha256="77aa", interpreter="/usr/bin/python3", packages_of="command", packages=[],
        env={}, datasets=[DatasetSum("gsm8k", "data/gsm8k.jsonl", "6f6f6f6f6f6f6f6f", 4096, 1),
                          DatasetSum("math", "data/math.jsonl", "7a7a", 10, 1)])
    assert changes_since(then, now, lambda since: [f"files since {since}"]) == [
        "the code's uncommitted diff (diff feedbeef -> no diff), in files since 0123456789abcdef0123",
        "dataset 'gsm8k' at data/gsm8k.jsonl (sha256 5e5e5e5e5e5e -> 6f6f6f6f6f6f)",
        "dataset 'math' (added)"]
    # The older record has no tree hash: a new commit is a change of the code even with the same files.
    assert changes_since(older, now) == ["the code's commit (fedcba9876 -> 0123456789)", "dataset 'gsm8k' (added)",
                                         "dataset 'math' (added)"]


@pytest.mark.parametrize(("key", "text", "read"), [
    ("versions", '[{"nope": 1}]', "versions"),
    ("hardware", '{"node-a": "a string, not a host"}', "hardware"),
    ("preregistration", '{"hash": "x"}', "registration"),
    ("flagged", '[{"task": "t"}]', "flagged"),
    ("versions", "not json at all", "versions"),
])
def test_a_damaged_record_is_a_store_error_naming_the_ledger_the_record_and_the_way_out(
        tmp_path: Path, key: str, text: str, read: str) -> None:
    # A record no release wrote (a hand edit, a torn copy) used to surface as a KeyError or an
    # AttributeError from whichever reader met it first, as a traceback out of `benchlab report`.
    from benchlab.errors import StoreError

    db = _ledger_with(tmp_path, {key: text}) / DB_NAME
    with Store(db) as store, pytest.raises(StoreError) as raised:
        getattr(store, read)()
    said = str(raised.value)
    assert said.startswith(f"{db}: the ledger's {key!r} record cannot be read (")
    assert said.endswith(f"`benchlab collect --rebuild {tmp_path}` recreates the ledger from the run directories")
