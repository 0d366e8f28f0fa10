"""Shared fixtures (a throwaway benchmark built from strings), the grouping of tests that share a
daemon when the suite runs on several workers, and the loud line for a suite of real parts skipped."""

from __future__ import annotations

import re
import textwrap
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

import benchlab_testing
from benchlab_testing import SCRIPT, Bench, stop_started


@pytest.fixture
def make_bench(tmp_path: Path) -> Callable[..., Bench]:
    """Write a spec (YAML text) and the run script into a fresh folder."""

    def make(spec_text: str, script: str = SCRIPT, name: str = "bench.yaml") -> Bench:
        (tmp_path / "run.py").write_text(script)
        spec = tmp_path / name
        spec.write_text(textwrap.dedent(spec_text).lstrip())
        return Bench(root=tmp_path, spec=spec, results=tmp_path / "out")

    return make




QUICKSTART = Path(__file__).resolve().parents[1] / "examples" / "quickstart"


def _made_once(tmp_path_factory: pytest.TempPathFactory, worker_id: str, name: str,
               make: Callable[[Path], None]) -> Path:
    """The folder ``name``, filled by ``make(folder)`` once for the whole session by whichever worker
    asks first (the others wait on a lock for it). Read it, never write it: a test that writes
    copies it."""
    import fcntl
    import shutil

    base = tmp_path_factory.getbasetemp()
    root = (base.parent if worker_id != "master" else base) / name
    with open(root.parent / f"{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
        if not (root / "done").exists():  # a worker that failed half-way left what it made: start over
            shutil.rmtree(root, ignore_errors=True)
            root.mkdir()
            make(root)
            (root / "done").touch()
    return root


@pytest.fixture(scope="session")
def shared_quickstart(tmp_path_factory: pytest.TempPathFactory, worker_id: str) -> Path:
    """The quick start run once for the whole session: its results folder,
    ``<root>/results/quickstart``, with its spec at ``<root>/quickstart/benchlab.yaml``.

    3 seeds, not 5, and 3 epochs (27 runs, not 45): every statistic the report and the dashboard
    show still has a value, and the scikit-learn runs (about 3 s of CPU each, most of it importing
    scikit-learn) are run once, not once per test that reads them."""
    import shutil

    from benchlab_testing import run_cli

    def make(root: Path) -> None:
        example = root / "quickstart"
        shutil.copytree(QUICKSTART, example)
        spec = example / "benchlab.yaml"
        assert "\nseeds: 5\n" in spec.read_text(), "the quick start's seeds line changed: update this fixture"
        spec.write_text(spec.read_text().replace("\nseeds: 5\n", "\nseeds: 3\n", 1))
        results = root / "results" / "quickstart"
        done = run_cli("run", str(spec), "-j", "2", "-s", "epochs=3", "--results", str(results),
                       cwd=root, timeout=900)
        assert done.returncode == 0, done.stderr[-2000:]
        assert (results / "BENCHMARK_REPORT.md").exists(), done.stdout[-2000:]

    return _made_once(tmp_path_factory, worker_id, "shared-quickstart", make) / "results" / "quickstart"


#: The models of benchlab's stub endpoint that examples/checkpoint-eval evaluates: each answers right
#: with this probability, so the later checkpoints rank above the earlier ones.
CHECKPOINT_MODELS = {"step-1000": 0.45, "step-2000": 0.6, "step-3000": 0.75}


@pytest.fixture(scope="session")
def shared_checkpoint_eval(tmp_path_factory: pytest.TempPathFactory, worker_id: str) -> Path:
    """examples/checkpoint-eval run once for the whole session, as its README says (its 9 runs
    against benchlab's stub endpoint, then the report): the example's folder, with the results in
    ``results/`` and the command's output in ``run.out``."""
    import shutil

    from benchlab_testing import run_cli, stub_model_server

    def make(root: Path) -> None:
        example = root / "checkpoint-eval"
        shutil.copytree(QUICKSTART.parent / "checkpoint-eval", example)
        with stub_model_server(CHECKPOINT_MODELS) as url:
            done = run_cli("run", "benchlab.yaml", "-s", f"model_url={url}", "-r", "results", "-j", "2",
                           cwd=example, timeout=600)
        assert done.returncode == 0, done.stdout + done.stderr
        (example / "run.out").write_text(done.stdout)

    return _made_once(tmp_path_factory, worker_id, "shared-checkpoint-eval", make) / "checkpoint-eval"


@pytest.fixture(autouse=True)
def _no_background_process_outlives_its_test() -> Iterator[None]:
    yield
    stop_started()

# Tests that start or share one real daemon of this machine run on one worker (pytest-xdist's
# --dist loadgroup): one Slurm (it writes the machine's munge key and its own spool), one dockerd
# (its bridge network is the machine's), one dstack server, and one Ray at a time (a Ray cluster
# wants the machine's cores and memory for itself).
_GROUP_BY_FIXTURE = {"slurm_cluster": "slurm", "docker_daemon": "docker", "sagemaker_python": "docker",
                     "dstack_server": "dstack", "ray_cluster": "ray"}
_GROUP_BY_FOLDER = {"slurm": "slurm", "ray": "ray", "launcher": "docker"}


def _group(item: pytest.Item) -> str:
    for fixture, group in _GROUP_BY_FIXTURE.items():
        if fixture in getattr(item, "fixturenames", ()):
            return group
    parts = item.path.relative_to(Path(__file__).parent).parts
    if len(parts) > 1 and parts[0] in _GROUP_BY_FOLDER:
        return _GROUP_BY_FOLDER[parts[0]]
    # Otherwise a file's tests stay together, as --dist loadfile keeps them: its module-scoped
    # fixtures (a benchmark run once for the file's assertions) are then built once, not per worker.
    return "/".join(parts)


@pytest.hookimpl(tryfirst=True)  # before pytest-xdist reads the marks (its hook suffixes node ids)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    groups = {item.nodeid: _group(item) for item in items}
    for item in items:
        item.add_marker(pytest.mark.xdist_group(groups[item.nodeid]))
    # The groups that hold slow tests (servers, clusters, journeys) go to the workers first, so
    # that the run does not end on one of them alone; within a group the order is the file's.
    # (pytest-xdist would otherwise hand out the groups by their number of tests, the files of one
    # long journey last: pyproject's addopts turn that off with --no-loadscope-reorder.)
    slow = {groups[item.nodeid] for item in items if item.get_closest_marker("slow") is not None}
    items.sort(key=lambda item: groups[item.nodeid] not in slow)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    outcome = yield
    faults = benchlab_testing._forkserver.unforked
    if faults:
        # On the report, which reaches the controller that prints the summary when several workers ran.
        outcome.get_result().user_properties.append(("unforked", list(faults)))
        faults.clear()


# A fixture that cannot start its real part skips with "NO <PART> TESTS RAN: <reason>". The reports
# reach the session that prints (the controller, when several workers ran), so the loud line is
# made from them, and a skipped suite of real parts cannot pass unseen.
_NOT_RUN = re.compile(r"NO (?P<part>[A-Z]+) TESTS? RAN: (?P<reason>.*)", re.S)


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    seen: dict[str, str] = {}
    for report in terminalreporter.stats.get("skipped", []):
        longrepr = getattr(report, "longrepr", None)
        message = longrepr[2] if isinstance(longrepr, tuple) else str(longrepr or "")
        found = _NOT_RUN.search(message)
        if found is not None:
            seen.setdefault(found["part"], found["reason"].strip())
    for part, reason in seen.items():
        terminalreporter.section(part.title(), sep="!", red=True, bold=True)
        terminalreporter.line(f"THE {part} TESTS WERE SKIPPED: {reason}", red=True, bold=True)
    # The fork server's failures cost CPU, not correctness: said once, with the tests they hit.
    unforked = [(report.nodeid, why) for reports in terminalreporter.stats.values() for report in reports
                for key, whys in getattr(report, "user_properties", ()) if key == "unforked" for why in whys]
    if unforked:
        terminalreporter.section("tests' fork server", sep="-", yellow=True)
        terminalreporter.line(f"{len(unforked)} command(s) ran as plain subprocesses through the server's fault; "
                              f"the first: {unforked[0][1]} ({unforked[0][0]})")
