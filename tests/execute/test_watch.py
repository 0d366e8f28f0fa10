"""`benchlab watch`: new complete checkpoint folders become configs and are evaluated once."""

from __future__ import annotations

import json
import signal
import sqlite3
import subprocess
import sys
import time

import pytest

from benchlab.execute.watch import CheckpointWatcher, config_name

SPEC = """
name: ckpts
tasks: [{name: easy, params: {base: 0.5}}, {name: hard, params: {base: 0.2}}]
configs:
  - name: template
    params: {checkpoint: ""}
seeds: 1
command: python run.py base={base} ckpt={checkpoint}
metrics: {primary: score}
"""


def evaluated(results) -> list[tuple[str, str]]:
    con = sqlite3.connect(results / "benchlab.db")
    rows = con.execute("SELECT config, task FROM runs WHERE status = 'completed' ORDER BY config, task").fetchall()
    con.close()
    return rows


def test_marker_decides_completeness_and_each_checkpoint_runs_once(make_bench):
    bench = make_bench(SPEC)
    ckpts = bench.root / "ckpts"
    (ckpts / "step-10").mkdir(parents=True)
    (ckpts / "step-10" / "DONE").touch()
    (ckpts / "step-20").mkdir()
    (ckpts / "step-20" / "weights.bin").write_bytes(b"x" * 10)  # still being written: no marker
    first = bench.cli("watch", "ckpts", "--spec", "bench.yaml", "-r", "out", "--marker", "DONE", "--once")
    assert first.returncode == 0, first.stdout + first.stderr
    assert "new checkpoint: step-10" in first.stdout
    assert evaluated(bench.results) == [("step-10", "easy"), ("step-10", "hard")]
    (ckpts / "step-20" / "DONE").touch()
    second = bench.cli("watch", "ckpts", "--spec", "bench.yaml", "-r", "out", "--marker", "DONE", "--once")
    assert second.returncode == 0
    assert "2 of 4 runs already done" in second.stdout
    assert evaluated(bench.results) == [("step-10", "easy"), ("step-10", "hard"),
                                        ("step-20", "easy"), ("step-20", "hard")]
    log = (bench.results / "runs").glob("*/train.log")
    assert any(str(ckpts / "step-20") in p.read_text() for p in log)


@pytest.mark.slow
def test_watch_picks_up_checkpoints_written_while_it_runs(make_bench):
    bench = make_bench(SPEC)
    ckpts = bench.root / "ckpts"
    ckpts.mkdir()
    proc = subprocess.Popen([sys.executable, "-m", "benchlab", "watch", "ckpts", "--spec", "bench.yaml", "-r", "out",
                             "--marker", "DONE", "--interval", "0.2", "--max-checkpoints", "2"],
                            cwd=bench.root, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        for name in ("step-1", "step-2"):
            (ckpts / name).mkdir()
            (ckpts / name / "DONE").touch()
        out, _ = proc.communicate(timeout=120)
    finally:
        proc.kill()
    assert proc.returncode == 0, out
    assert sorted({c for c, _ in evaluated(bench.results)}) == ["step-1", "step-2"]


def test_without_marker_a_checkpoint_counts_once_its_files_settle(tmp_path):
    now = [0.0]
    watcher = CheckpointWatcher(tmp_path, settle=30, clock=lambda: now[0])
    ckpt = tmp_path / "step-5"
    ckpt.mkdir()
    (ckpt / "a.bin").write_bytes(b"1")
    assert watcher.complete() == []          # first sight: not yet settled
    now[0] = 20.0
    (ckpt / "a.bin").write_bytes(b"12")      # still growing: the clock starts again
    assert watcher.complete() == []
    now[0] = 45.0
    assert watcher.complete() == []          # 25 s unchanged
    now[0] = 51.0
    assert watcher.complete() == [ckpt]      # 31 s unchanged


def test_checkpoints_are_ordered_by_step_number(tmp_path):
    for name in ("step-100", "step-20", "step-3"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "DONE").touch()
    watcher = CheckpointWatcher(tmp_path, marker="DONE")
    assert [p.name for p in watcher.complete()] == ["step-3", "step-20", "step-100"]


def test_config_names_are_safe():
    from pathlib import Path

    assert config_name(Path("/x/global step 10")) == "global-step-10"


def test_template_without_checkpoint_param_is_refused(make_bench):
    bench = make_bench(SPEC.replace('params: {checkpoint: ""}', "params: {x: 1}").replace(" ckpt={checkpoint}", ""))
    (bench.root / "ckpts").mkdir()
    proc = bench.cli("watch", "ckpts", "--spec", "bench.yaml", "--once")
    assert proc.returncode == 2 and "needs a 'checkpoint' param" in proc.stderr


def _safetensors(path, sizes: dict[str, int], cut: int = 0) -> None:
    """A safetensors file of uint8 tensors (name -> byte count), ``cut`` bytes short of whole."""
    header, offset = {}, 0
    for name, n in sizes.items():
        header[name] = {"dtype": "U8", "shape": [n], "data_offsets": [offset, offset + n]}
        offset += n
    raw = json.dumps(header).encode()
    data = len(raw).to_bytes(8, "little") + raw + b"\0" * offset
    path.write_bytes(data[: len(data) - cut])


def test_a_checkpoint_counts_only_once_its_weights_are_whole_and_match_their_index(tmp_path):
    now = [0.0]
    watcher = CheckpointWatcher(tmp_path, settle=10, clock=lambda: now[0])
    ckpt = tmp_path / "step-100"
    ckpt.mkdir()
    (ckpt / "config.json").write_text("{}")
    (ckpt / "tokenizer.json").write_text("{}")

    def look(at: float) -> list:
        now[0] = at
        return watcher.complete()

    # Config and tokenizer first, weights much later: never complete in between.
    assert look(0) == [] and look(100) == []
    assert "no weights yet" in watcher.waiting[ckpt]
    index = {"weight_map": {"a": "model-00001-of-00002.safetensors", "b": "model-00002-of-00002.safetensors"}}
    (ckpt / "model.safetensors.index.json").write_text(json.dumps(index))
    _safetensors(ckpt / "model-00001-of-00002.safetensors", {"a": 4096})
    assert look(200) == [] and look(300) == []
    assert "model-00002-of-00002.safetensors" in watcher.waiting[ckpt]
    # The second shard is there but still being written: shorter than its header says.
    _safetensors(ckpt / "model-00002-of-00002.safetensors", {"b": 8192}, cut=1000)
    assert look(400) == [] and look(500) == []
    assert "of the" in watcher.waiting[ckpt]
    _safetensors(ckpt / "model-00002-of-00002.safetensors", {"b": 8192})
    assert look(600) == []               # whole, but just changed
    assert look(611) == [ckpt]           # whole and unchanged for the settle time


def test_a_failed_checkpoint_is_evaluated_again_only_when_its_files_change(tmp_path):
    watcher = CheckpointWatcher(tmp_path, marker="DONE")
    ckpt = tmp_path / "step-1"
    ckpt.mkdir()
    (ckpt / "DONE").touch()
    (ckpt / "weights.pt").write_bytes(b"bad")
    assert watcher.due(watcher.complete()) == [ckpt]
    watcher.record(ckpt, failed=True)
    assert watcher.due(watcher.complete()) == []          # nothing changed: not again
    (ckpt / "weights.pt").write_bytes(b"good weights")
    assert watcher.due(watcher.complete()) == [ckpt]      # rewritten: again
    watcher.record(ckpt, failed=False)
    (ckpt / "weights.pt").write_bytes(b"touched after a success")
    assert watcher.due(watcher.complete()) == []          # a success is final


def test_the_templates_resources_and_command_are_kept(make_bench, tmp_path):
    from benchlab.execute.watch import spec_for_checkpoints
    from benchlab.spec import load_spec

    bench = make_bench(SPEC.replace('params: {checkpoint: ""}',
                                    'params: {checkpoint: ""}\n    resources: {gpus: 1.0, cpus: 2}'))
    spec = load_spec(bench.spec)
    clone = spec_for_checkpoints(spec, [tmp_path / "step-1", tmp_path / "step-2"])
    assert [c.name for c in clone.configs] == ["step-1", "step-2"]
    for config in clone.configs:
        assert config.resources is not None
        assert (config.resources.gpus, config.resources.cpus) == (1.0, 2)


RETRY_SCRIPT = """
import json, os, sys
args = dict(a.split("=", 1) for a in sys.argv[1:])
weights = open(os.path.join(args["ckpt"], "weights.pt")).read()
if weights != "good":
    sys.exit("cannot load the weights: " + weights)
with open(os.path.join(os.environ["BENCHLAB_RUN_DIR"], "metrics.json"), "w") as f:
    json.dump({"score": 1.0}, f)
"""


@pytest.mark.slow
def test_watch_comes_back_to_a_checkpoint_whose_evaluation_failed_once_it_changes(make_bench):
    bench = make_bench(SPEC.replace("seeds: 1", "seeds: 1\nretries: 0").replace(
        "tasks: [{name: easy, params: {base: 0.5}}, {name: hard, params: {base: 0.2}}]",
        "tasks: [{name: easy}]").replace("base={base} ", ""), script=RETRY_SCRIPT)
    ckpts = bench.root / "ckpts"
    (ckpts / "step-1").mkdir(parents=True)
    (ckpts / "step-1" / "weights.pt").write_text("truncated")
    (ckpts / "step-1" / "DONE").touch()
    proc = subprocess.Popen([sys.executable, "-m", "benchlab", "watch", "ckpts", "--spec", "bench.yaml", "-r", "out",
                             "--marker", "DONE", "--interval", "0.2"],
                            cwd=bench.root, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)

    def status() -> list:
        db = bench.results / "benchlab.db"
        if not db.exists():
            return []
        con = sqlite3.connect(db)
        try:
            return con.execute("SELECT config, status FROM runs").fetchall()
        except sqlite3.OperationalError:
            return []
        finally:
            con.close()

    def wait_for(rows: list, limit: float = 120) -> None:
        deadline = time.monotonic() + limit
        while status() != rows and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.1)

    try:
        wait_for([("step-1", "failed")])
        assert status() == [("step-1", "failed")]
        (ckpts / "step-1" / "weights.pt").write_text("good")
        wait_for([("step-1", "completed")])
        assert status() == [("step-1", "completed")]
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            out, _ = proc.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            out, _ = proc.communicate()
    assert "evaluating again: step-1" in out, out


def test_a_change_during_a_failed_evaluation_brings_the_checkpoint_back(tmp_path):
    watcher = CheckpointWatcher(tmp_path, marker="DONE")
    ckpt = tmp_path / "step-1"
    ckpt.mkdir()
    (ckpt / "DONE").touch()
    (ckpt / "weights.pt").write_bytes(b"bad")
    assert watcher.due(watcher.complete()) == [ckpt]
    (ckpt / "weights.pt").write_bytes(b"rewritten while the evaluation ran")
    watcher.record(ckpt, failed=True)
    assert watcher.due(watcher.complete()) == [ckpt]


# -- the loop as a library call ------------------------------------------------------------------


def _watch(bench, **kw):
    from benchlab.execute.watch import CheckpointWatch
    from benchlab.spec import load_spec

    events, reports = [], []

    def report(folder):
        reports.append(folder)
        return folder / "BENCHMARK_REPORT.md"

    watch = CheckpointWatch(load_spec(bench.spec), bench.root / "ckpts", bench.results, marker="DONE",
                            on_event=events.append, write_report=report, **kw)
    return watch, events, reports


def test_the_watch_loop_runs_from_python_and_says_what_it_found_and_evaluated(make_bench):
    from benchlab.execute.watch import WatchEventKind

    bench = make_bench(SPEC)
    ckpts = bench.root / "ckpts"
    (ckpts / "step-10").mkdir(parents=True)
    (ckpts / "step-10" / "DONE").touch()
    (ckpts / "step-20").mkdir()
    watch, events, reports = _watch(bench, once=True)
    outcome = watch.run()
    assert (outcome.evaluated, outcome.exit_code, outcome.stopped) == ((ckpts / "step-10",), 0, False)
    assert [(e.kind, [p.name for p in e.checkpoints], e.why) for e in events[:2]] == [
        (WatchEventKind.WAITING, ["step-20"], "no DONE yet"), (WatchEventKind.NEW, ["step-10"], "")]
    assert events[2].kind == WatchEventKind.REPORT and reports == [bench.results]
    assert evaluated(bench.results) == [("step-10", "easy"), ("step-10", "hard")]


def test_a_stopped_watch_ends_its_sweep_and_exits_130_without_recording_the_checkpoint(make_bench):
    bench = make_bench(SPEC)
    (bench.root / "ckpts" / "step-1").mkdir(parents=True)
    (bench.root / "ckpts" / "step-1" / "DONE").touch()
    watch, events, reports = _watch(bench)

    def stopped_at_once(sweep):
        watch.request_stop()  # as a SIGINT arriving while the sweep starts
        return sweep.run()

    watch.run_sweep = stopped_at_once
    outcome = watch.run()  # without once=True: only the stop ends it
    assert (outcome.exit_code, outcome.stopped, outcome.evaluated) == (130, True, ())
    assert reports == [] and evaluated(bench.results) == []


def test_a_watch_asked_to_stop_before_it_looks_runs_nothing(make_bench):
    bench = make_bench(SPEC)
    (bench.root / "ckpts" / "step-1").mkdir(parents=True)
    (bench.root / "ckpts" / "step-1" / "DONE").touch()
    watch, events, _ = _watch(bench)
    watch.request_stop()
    assert watch.run().exit_code == 130 and events == []


def test_a_template_without_checkpoint_param_is_refused_before_watching(make_bench):
    from benchlab.errors import SpecError

    bench = make_bench(SPEC.replace('params: {checkpoint: ""}', "params: {x: 1}").replace(" ckpt={checkpoint}", ""))
    with pytest.raises(SpecError, match="needs a 'checkpoint' param"):
        _watch(bench)
