"""Failures that will fail the same way next time are classed so, not retried, and reported once."""

from __future__ import annotations

import json

import pytest

from benchlab import triage

ARGPARSE_SCRIPT = '''
import argparse, json, os
parser = argparse.ArgumentParser(prog="train.py")
parser.add_argument("--steps", type=int, required=True)
args = parser.parse_args()
with open(os.path.join(os.environ["BENCHLAB_RUN_DIR"], "metrics.json"), "w") as f:
    json.dump({"score": args.steps / 100}, f)
'''

SPEC = """
name: triage
tasks: [{name: t1}, {name: t2}]
configs: [{name: a}, {name: b}]
seeds: 3
command: {command}
metrics:
  primary: {name: score, goal: max}
retries: 2
"""


def _status(bench) -> dict:
    proc = bench.cli("status", "out", "--json", check=True)
    return json.loads(proc.stdout)


def test_a_mistyped_interpreter_is_a_launch_error_and_is_not_retried(make_bench):
    bench = make_bench(SPEC.replace("{command}", "pyhton run.py"))
    proc = bench.cli("run", "bench.yaml", "-r", "out", "--no-report")
    assert proc.returncode == 1, proc.stderr
    assert "retrying" not in proc.stdout
    state = _status(bench)
    assert list(state["failures"]) == ["launch-error"]
    failures = state["failures"]["launch-error"]
    assert len(failures) == 12 and {f["attempt"] for f in failures} == {1}
    assert {f["exit_code"] for f in failures} == {127}
    # dash says `pyhton: not found`, bash `pyhton: command not found`
    assert failures[0]["error"].startswith("could not start: pyhton: ")
    assert failures[0]["error"].endswith("not found (exit 127)")


def test_an_argparse_usage_error_is_not_retried_and_status_prints_its_log_once(make_bench):
    bench = make_bench(SPEC.replace("{command}", "python run.py --steps 1e2"), script=ARGPARSE_SCRIPT)
    proc = bench.cli("run", "bench.yaml", "-r", "out", "--no-report")
    assert proc.returncode == 1
    assert "retrying" not in proc.stdout
    # The four configs failed the same way: one line names them all.
    assert proc.stdout.count("flagged") == 1
    assert "t1/a, t1/b, t2/a, t2/b failed on every seed (12 runs: 12 usage-error)" in proc.stdout
    assert "the command cannot run as written: fix it, then re-run them with --rerun-failed" in proc.stdout
    state = _status(bench)
    failures = state["failures"]["usage-error"]
    assert len(failures) == 12 and {f["attempt"] for f in failures} == {1}
    assert failures[0]["error"] == "train.py: error: argument --steps: invalid int value: '1e2'"
    [group] = state["failure_groups"]
    assert group["count"] == 12 and group["failure_class"] == "usage-error"
    assert group["flagged"] == ["t1/a", "t1/b", "t2/a", "t2/b"]

    text = bench.cli("status", "out", check=True).stdout
    assert text.count("usage: train.py [-h] --steps STEPS") == 1
    assert text.count("invalid int value") == 2  # the group's error and its log tail
    assert "12 failed: usage-error" in text
    assert "flagged: every seed of t1/a, t1/b, t2/a, t2/b failed this way" in text
    assert text.count("flagged") == 1


def test_status_keeps_different_crashes_apart_and_names_the_runs_of_each(make_bench):
    script = '''
import os, sys
seed = int(os.environ["BENCHLAB_SEED"])
print("boom: disk" if seed == 0 else "boom: network")
sys.exit(1)
'''
    bench = make_bench(SPEC.replace("{command}", "python run.py").replace("seeds: 3", "seeds: 2")
                       .replace("retries: 2", "retries: 0"), script=script)
    assert bench.cli("run", "bench.yaml", "-r", "out", "--no-report").returncode == 1
    groups = _status(bench)["failure_groups"]
    assert sorted((g["count"], g["log_tail"].splitlines()[-1]) for g in groups) == [
        (4, "boom: disk"), (4, "boom: network")]
    disk = next(g for g in groups if g["log_tail"].endswith("disk"))
    assert sorted(disk["runs"]) == ["t1/a/s0", "t1/b/s0", "t2/a/s0", "t2/b/s0"]
    text = bench.cli("status", "out", check=True).stdout
    assert text.count("4 failed: exit-code — exited with code 1") == 2
    assert "runs: t1/a/s0" in text or "runs: t1/b/s0" in text


@pytest.mark.parametrize(("exit_code", "tail", "expected"), [
    (127, "bash: line 1: pyhton: command not found", "could not start: pyhton: command not found (exit 127)"),
    (126, "/bin/sh: 1: ./train.sh: Permission denied", "could not start: ./train.sh: Permission denied (exit 126)"),
    (2, "python: can't open file '/w/trian.py': [Errno 2] No such file or directory",
     "could not start: python: can't open file '/w/trian.py': [Errno 2] No such file or directory (exit 2)"),
])
def test_commands_the_shell_cannot_run_are_launch_errors(exit_code, tail, expected):
    verdict = triage.classify(exit_code=exit_code, signal=None, timed_out=False, tail=tail)
    assert verdict == triage.Verdict(triage.LAUNCH, expected)


def test_a_usage_line_followed_by_a_traceback_is_an_exception_not_a_usage_error():
    tail = "usage: x.py [-h]\nTraceback (most recent call last):\n  File \"x.py\", line 3\nKeyError: 'lr'"
    verdict = triage.classify(exit_code=2, signal=None, timed_out=False, tail=tail)
    assert verdict == triage.Verdict(triage.EXCEPTION, "KeyError: 'lr'")
    click_tail = "Usage: train [OPTIONS]\nTry 'train --help' for help.\n\nError: No such option: --lrr"
    assert triage.classify(exit_code=2, signal=None, timed_out=False, tail=click_tail) == triage.Verdict(
        triage.USAGE, "Error: No such option: --lrr")


def test_a_log_tail_drops_colour_codes_and_the_line_cut_by_its_byte_window(tmp_path):
    from benchlab.triage import log_tail

    log = tmp_path / "out.log"
    # 30 lines of 100 bytes; a 550-byte window starts inside a line, which must not be shown.
    log.write_text("".join(f"\x1b[31mline {i:03d}\x1b[0m " + "x" * 82 + "\n" for i in range(30)))
    lines = log_tail(log, lines=100, max_bytes=550).splitlines()
    assert [line[:8] for line in lines] == [f"line {i:03d}" for i in range(25, 30)]
    assert all("\x1b" not in line for line in lines)
    assert log_tail(tmp_path / "missing.log") == ""


def test_one_crash_that_names_its_frame_and_address_is_one_group_in_status_and_dashboard(make_bench):
    from benchlab.ui.library import Benchmark
    from benchlab.ui.views import benchmark_view

    # The same crash at a different frame and address in every run, and one other crash.
    script = '''
import os, sys
seed = int(os.environ["BENCHLAB_SEED"])
if "t2" in sys.argv[1:] and seed == 1:
    print("RuntimeError: replay buffer empty")
else:
    print(f"RuntimeError: NaN in loss at frame {1000 + 137 * seed} (tensor at 0x7f{seed}a3c0)")
sys.exit(1)
'''
    bench = make_bench(SPEC.replace("{command}", "python run.py {task}").replace("seeds: 3", "seeds: 2")
                       .replace("retries: 2", "retries: 0"), script=script)
    assert bench.cli("run", "bench.yaml", "-r", "out", "--no-report").returncode == 1
    groups = _status(bench)["failure_groups"]
    assert sorted(g["count"] for g in groups) == [2, 6]
    nan = next(g for g in groups if g["count"] == 6)
    assert "NaN in loss at frame" in nan["log_tail"]
    view = benchmark_view(Benchmark("k", bench.root / "out"))
    assert sorted(len(f.runs) for f in view.failures) == [2, 6]
