"""A results folder's own files: ``benchmark.json`` written and read through one record, and
read as the previous release wrote it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchlab.collect.rebuild import rebuild_store
from benchlab.errors import DataError
from benchlab.names.results_files import SavedSpec, benchmark_file
from benchlab.results import info
from benchlab.spec import load_spec

SPEC = """\
name: kept
metrics:
  primary: {name: acc, goal: max}
  secondary:
    - {name: loss, goal: min}
tasks:
  - {name: a}
configs:
  - {name: base, params: {lr: 0.1}}
  - {name: new, params: {lr: 0.2}}
baseline: base
seeds: [0, 1]
command: echo {seed}
"""


def _previous_release_text(spec_file: Path) -> str:
    # What `results.write_benchmark_meta` wrote before the record existed, expression for expression.
    spec = load_spec(spec_file, ["configs.new.params.lr=0.3"])
    return json.dumps({"spec": spec.model_dump(mode="json", by_alias=True, exclude_none=True),
                       "spec_path": str(spec.path.resolve()) if spec.path else None,
                       "overrides": dict(spec.overrides)}, indent=1, default=str)


def test_a_benchmark_json_the_previous_release_wrote_rebuilds_the_ledger(tmp_path: Path) -> None:
    spec_file = tmp_path / "benchlab.yaml"
    spec_file.write_text(SPEC)
    folder = tmp_path / "res"
    (folder / "runs").mkdir(parents=True)
    benchmark_file(folder).write_text(_previous_release_text(spec_file))
    rebuild_store(folder)
    got = info(folder)
    assert (got.name, got.primary, got.goal) == ("kept", "acc", {"acc": "max", "loss": "min"})
    assert got.spec_path == str(spec_file.resolve())
    assert got.overrides == {"configs.new.params.lr": "0.3"}  # as written on the command line
    assert got.spec["configs"][1]["params"] == {"lr": 0.3}


def test_the_record_writes_the_bytes_the_previous_release_wrote(tmp_path: Path) -> None:
    spec_file = tmp_path / "benchlab.yaml"
    spec_file.write_text(SPEC)
    old = _previous_release_text(spec_file)
    saved = SavedSpec.read(_written(tmp_path / "old.json", old))
    assert saved is not None
    saved.write(tmp_path / "new.json")
    assert (tmp_path / "new.json").read_text() == old
    assert not list(tmp_path.glob("*.tmp"))


def _written(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


def test_keys_an_older_file_lacks_read_as_their_defaults_and_unknown_keys_are_ignored(tmp_path: Path) -> None:
    path = _written(tmp_path / "benchmark.json", '{"spec": {"name": "x"}, "written_by": "a later release"}')
    assert SavedSpec.read(path) == SavedSpec({"name": "x"}, None, {})


def test_a_folder_without_benchmark_json_has_no_record(tmp_path: Path) -> None:
    assert SavedSpec.read(benchmark_file(tmp_path)) is None


@pytest.mark.parametrize(("text", "said"), [
    ("{not json", "not JSON"),
    ('{"spec_path": "a.yaml"}', "field 'spec': expected the spec as a JSON object, got NoneType"),
    ('{"spec": ["a"]}', "field 'spec': expected the spec as a JSON object, got list"),
    ("[1, 2]", "field 'spec': expected the spec as a JSON object, got list"),
])
def test_a_file_that_is_not_the_record_is_a_data_error_naming_file_and_field(
        tmp_path: Path, text: str, said: str) -> None:
    path = _written(tmp_path / "benchmark.json", text)
    with pytest.raises(DataError) as raised:
        SavedSpec.read(path)
    assert str(raised.value).startswith(f"{path}: ") and said in str(raised.value)
