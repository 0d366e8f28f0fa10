"""What every import shares, on runs as a reader hands them over (SourceRun): naming, refusals,
and a folder that keeps what it holds."""

from __future__ import annotations

import numpy as np
import pytest

from benchlab.collect.importers import Naming, SourceRun, import_runs
from benchlab.errors import DataError


def _run(source_id: str, seed: object, acc: float | None = 0.5, **params: object) -> SourceRun:
    finals = {} if acc is None else {"acc": acc}
    return SourceRun("mlflow", source_id, "", {"seed": seed, **params}, finals=finals,
                     series={"acc": (np.array([0.0, 1.0]), np.array([0.1, acc or 0.0]))}, default_task="exp")


def test_configs_are_named_by_the_keys_given_or_by_every_other_param(tmp_path):
    runs = [_run("r1", 0, opt="adam", lr=0.1, wd=0), _run("r2", 1, opt="adam", lr=0.1, wd=0)]
    named = import_runs(runs, tmp_path / "a", naming=Naming(config=("opt", "lr")), primary="acc")
    assert named.added == ["exp/opt=adam,lr=0.1/s0", "exp/opt=adam,lr=0.1/s1"]
    every = import_runs(runs, tmp_path / "b", naming=Naming(), primary="acc")
    assert every.added == ["exp/lr=0.1,opt=adam,wd=0/s0", "exp/lr=0.1,opt=adam,wd=0/s1"]


@pytest.mark.parametrize(("seed", "why"), [
    (3.5, "its seed seed=3.5 is not an integer"),
    ("x", "its seed seed='x' is not an integer"),
    (True, "its seed seed=True is not an integer"),
])
def test_a_seed_must_be_an_integer(tmp_path, seed, why):
    done = import_runs([_run("r1", seed, opt="a"), _run("r2", "4", opt="a")], tmp_path, naming=Naming(config=("opt",)),
                       primary="acc")
    assert [str(s) for s in done.skipped] == [f"mlflow run r1: {why}"]
    assert done.added == ["exp/a/s4"]


def test_a_run_claiming_coordinates_the_folder_holds_is_left_out_and_the_held_run_kept(tmp_path):
    import benchlab

    naming = Naming(config=("opt",))
    import_runs([_run("r1", 0, acc=0.5, opt="a")], tmp_path, naming=naming, primary="acc")
    later = import_runs([_run("r9", 0, acc=0.9, opt="a"), _run("r2", 1, opt="a")], tmp_path, naming=naming,
                        primary="acc")
    assert [str(s) for s in later.skipped] == [
        "mlflow run r9: claims exp/a/s0, which this results folder holds already from another run; not imported"]
    table = benchlab.load(tmp_path, series=False)
    assert sorted(zip(table.seed, table.value, strict=True)) == [(0, 0.5), (1, 0.5)]


def test_a_folder_of_a_spec_or_of_another_primary_metric_is_not_imported_into(tmp_path):
    (tmp_path / "ran").mkdir()
    (tmp_path / "ran" / "benchmark.json").write_text("{}")
    with pytest.raises(DataError, match="holds the runs of a spec"):
        import_runs([_run("r1", 0, opt="a")], tmp_path / "ran", naming=Naming(), primary="acc")
    import_runs([_run("r1", 0, opt="a")], tmp_path / "imp", naming=Naming(), primary="acc")
    with pytest.raises(DataError, match="primary metric 'acc', not 'loss'"):
        import_runs([_run("r2", 1, opt="a")], tmp_path / "imp", naming=Naming(), primary="loss")


def test_a_non_finite_primary_value_is_one_line(tmp_path):
    done = import_runs([_run("r1", 0, acc=float("nan"), opt="a")], tmp_path, naming=Naming(), primary="acc")
    assert [str(s) for s in done.skipped] == ["mlflow run r1: its 'acc' is not finite (nan)"]
    assert done.added == []
