"""The failure log: every failed run with its class, error and last log lines, safely escaped."""

from __future__ import annotations

from pathlib import Path

from report_world import build_store_world

from benchlab.ledger import Store
from benchlab.report import write_report


def test_failed_run_is_listed_with_escaped_error_and_log_tail(tmp_path: Path):
    values = {("t1", "a"): [0.5, 0.6], ("t1", "b"): [0.7, 0.8]}
    folder = build_store_world(tmp_path / "res", values, baseline="a")
    with Store.open(folder) as store:
        run = next(r for r in store.runs() if r.config == "b" and r.seed == 1)
        for _ in range(2):
            attempt, _ = store.start_attempt(run.run_id, host="h")
            store.finish_attempt(attempt, run.run_id, status="failed", run_status="failed",
                                 exit_code=1, failure_class="crash",
                                 error="ValueError in <module> | bad",
                                 log_tail="line 1\nTraceback <module>\nValueError: bad")
    files = write_report(folder, tmp_path / "rep", plots=False)
    text = files.markdown.read_text()
    log = text.split("## Failure log")[1].split("## Reproduction")[0]
    row = next(ln for ln in log.splitlines() if ln.startswith("| t1/b"))
    # 3 attempts: the completed one the world recorded, then two failures.
    assert row == "| t1/b/s1 | 3 | crash | ValueError in &lt;module&gt; \\| bad |"
    assert "ValueError: bad" in log
    assert "1 run failed (see the failure log)." in text.split("## Results")[0]
    page = (tmp_path / "rep" / "report.html").read_text()
    # The error text is shown, not swallowed as an HTML tag.
    assert "ValueError in &lt;module&gt; | bad" in page
    assert "Traceback &lt;module&gt;" in page


def test_a_report_without_plots_opens_the_ledger_once(tmp_path: Path, monkeypatch):
    values = {("t1", "a"): [0.5, 0.6], ("t1", "b"): [0.7, 0.8]}
    folder = build_store_world(tmp_path / "res", values, baseline="a")
    with Store.open(folder) as store:
        run = next(r for r in store.runs() if r.config == "b" and r.seed == 1)
        attempt, _ = store.start_attempt(run.run_id, host="h")
        store.finish_attempt(attempt, run.run_id, status="failed", run_status="failed",
                             exit_code=1, failure_class="crash", error="bad", log_tail="bad")
    opened: list[object] = []
    real = Store.__init__

    def counting(self, *args, **kwargs):  # type: ignore[no-untyped-def]
        opened.append(args[0])
        real(self, *args, **kwargs)

    monkeypatch.setattr(Store, "__init__", counting)
    write_report(folder, tmp_path / "rep", plots=False, html=False)
    assert len(opened) == 1  # seeds, failures, GPU use and the table: one pass over the ledger
