"""The flags that belong to one backend become that backend's typed options, and typed options
reach the backend the sweep builds."""

from __future__ import annotations

import inspect
import json
from dataclasses import MISSING, dataclass, fields
from pathlib import Path
from typing import IO

import pytest

from benchlab.cli.cmd_run import backend_options
from benchlab.errors import UsageError
from benchlab.execute.base import BackendOptions, Launch
from benchlab.execute.debug import Target
from benchlab.execute.local import LocalBackend, LocalOptions
from benchlab.execute.ray import RayBackend, RayOptions
from benchlab.execute.slurm import SlurmBackend, SlurmOptions
from benchlab.execute.sweep import Sweep
from benchlab.ledger import CodeState
from benchlab.spec import Spec


def test_ray_flags_become_ray_options() -> None:
    got = backend_options("ray", 6, "ray://head:10001", True, None)
    assert got == RayOptions(address="ray://head:10001", shared_fs=True, max_inflight=6)
    assert backend_options("ray", None, None, False, None) == RayOptions()


def test_a_backend_without_flags_of_its_own_has_no_options() -> None:
    assert backend_options("local", 4, None, False, None) is None


def test_flags_of_another_backend_are_a_usage_error() -> None:
    with pytest.raises(UsageError, match="--slurm needs the slurm backend"):
        backend_options("local", None, None, False, ["partition=gpu"])
    with pytest.raises(UsageError, match="--ray-address and --shared-fs need the ray backend"):
        backend_options("slurm", None, "ray://head:10001", False, None)


@pytest.mark.parametrize("options, backend", [(RayOptions, RayBackend), (SlurmOptions, SlurmBackend)])
def test_each_option_is_a_keyword_of_its_backend(options: type[BackendOptions], backend: type) -> None:
    keywords = inspect.signature(backend.__init__).parameters
    for f in fields(options):
        assert keywords[f.name].kind is inspect.Parameter.KEYWORD_ONLY, f.name


# The keywords each backend's for_sweep fills from the sweep's context itself: not options.
FROM_CONTEXT = {RayBackend: {"spec", "results_dir"}, SlurmBackend: {"spec", "results_dir"},
                LocalBackend: {"jobs", "gpu_pool", "inventory", "hide_gpus", "gpu_models"}}


@pytest.mark.parametrize("options, backend", [(RayOptions, RayBackend), (LocalOptions, LocalBackend),
                                              (SlurmOptions, SlurmBackend)])
def test_every_keyword_a_python_caller_may_set_is_an_option_with_the_backends_default(
        options: type[BackendOptions], backend: type) -> None:
    # A sweep takes a backend's options only as its typed record, so a keyword of the backend's
    # constructor that the record lacks could no longer be set at all (the Ray tests set flush_s).
    params = {name: p for name, p in inspect.signature(backend.__init__).parameters.items()
              if name != "self" and name not in FROM_CONTEXT[backend]}
    declared = {f.name: f.default for f in fields(options)}
    assert set(declared) == set(params)
    # A default given by a factory (SlurmOptions.slurm: {}) stands for the constructor's None.
    assert {n: d for n, d in declared.items() if d is not MISSING} == {
        n: p.default for n, p in params.items() if declared[n] is not MISSING}


def test_slurm_options_keep_the_flags_as_given() -> None:
    opts = SlurmOptions(jobs=8, slurm={"partition": "gpu", "array_size": "50"})
    given = {k: v for k, v in opts.keywords().items() if k in ("jobs", "slurm")}
    assert given == {"jobs": 8, "slurm": {"partition": "gpu", "array_size": "50"}}


@dataclass(frozen=True)
class DebugOptions(BackendOptions):
    """The debug backend's one option, as a backend of another package would declare its own."""

    target: Target | None = None


def test_typed_options_reach_the_backend_the_sweep_builds(tmp_path: Path) -> None:
    def scores(launch: Launch, log: IO[str]) -> int:
        (launch.run_dir / "metrics.json").write_text(json.dumps({"score": 10.0 + launch.run.seed}))
        return 0

    spec = Spec.model_validate({
        "name": "opts", "tasks": [{"name": "t"}], "configs": [{"name": "a"}], "seeds": 2, "command": "true",
        "workdir": str(tmp_path), "metrics": {"primary": {"name": "score", "goal": "max"}}})
    result = Sweep(spec, tmp_path / "results", backend="debug", backend_options=DebugOptions(target=scores),
                   jobs=1, code=CodeState(None, None, None, None)).run()
    # The default target of the debug backend runs the command ("true"), which writes no score:
    # two completed runs mean the option's target ran.
    assert (result.completed, result.failed) == (2, 0)


@pytest.mark.parametrize("command", ["run", "search"])
def test_a_backend_registered_at_run_time_is_a_choice_of_backend(command, monkeypatch, capsys) -> None:
    from benchlab.cli import main
    from benchlab.execute import base
    from benchlab.execute.debug import DebugBackend

    monkeypatch.setenv("COLUMNS", "250")
    with pytest.raises(SystemExit) as unknown:
        main([command, "bench.yaml", "--backend", "tiny-cluster"])
    assert unknown.value.code == 2
    err = capsys.readouterr().err
    assert "unknown backend 'tiny-cluster'; choose one of: debug, launcher, local, ray, slurm" in err

    monkeypatch.setitem(base._REGISTRY, "tiny-cluster", DebugBackend)  # as @register("tiny-cluster") does
    with pytest.raises(SystemExit) as shown:
        main([command, "--help"])
    assert shown.value.code == 0
    assert "debug|launcher|local|ray|slurm|tiny-cluster" in capsys.readouterr().out
    with pytest.raises(SystemExit) as chosen:
        main([command, "missing.yaml", "--backend", "tiny-cluster"])
    assert chosen.value.code == 2
    err = capsys.readouterr().err
    assert "missing.yaml" in err and "--backend" not in err  # the backend was taken; the spec was not found
