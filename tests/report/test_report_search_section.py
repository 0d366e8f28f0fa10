"""report.html shows a search kept in the results folder in its own section, apart from the benchmark.

A real benchmark and a real search (Optuna, subprocess trials, median pruning) share one results
folder; the page is checked as text and in headless Chromium.
"""

from __future__ import annotations

import base64
import json
import re
import textwrap
from pathlib import Path

import pytest
from optuna.trial import TrialState
from report_world import build_store_world, png_size
from test_report_html_chromium import PROBE, _browser

from benchlab.report import write_report
from benchlab.search.study import read_study
from benchlab_testing import run_cli

SCRIPT = '''
import sys, time
from benchlab import log, summary
x = float(sys.argv[1])
final = -(x - 0.3) ** 2
for s in range(20):
    val = final - (19 - s) / 20
    log(step=s, val=val, test=val + 0.001)
    time.sleep(0.02)
summary(val=final, test=final + 0.001)
'''

SPEC = """
name: tune
tasks: [{name: t}]
configs:
  - {name: base, params: {x: 0.0}}
  - {name: other, params: {x: -0.5}}
seeds: 2
command: python run.py {x}
metrics:
  primary: {name: test, goal: max}
  secondary: [val]
search:
  metric: val
  base_config: base
  space:
    x: {uniform: [-1, 1]}
  seeds: [7]
  budget: 6
  pruner: median
"""


@pytest.fixture(scope="module")
def shared(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A results folder holding a benchmark and a search, and its report."""
    root = tmp_path_factory.mktemp("searched")
    (root / "run.py").write_text(SCRIPT)
    (root / "bench.yaml").write_text(textwrap.dedent(SPEC).lstrip())
    for command in (("run", "bench.yaml", "-j", "2", "-r", "shared"),
                    ("search", "bench.yaml", "-j", "2", "-r", "shared")):
        done = run_cli(*command, cwd=root, timeout=300)
        assert done.returncode == 0, done.stdout + done.stderr
    write_report(root / "shared")
    return root / "shared"


def _section(page: str) -> tuple[str, str]:
    """The page before the search section, and the section."""
    head, mark, section = page.partition("<h2>Search: tune:search</h2>")
    assert mark, "no search section in report.html"
    return head, section


@pytest.mark.slow
def test_the_search_gets_its_own_section_and_its_trials_stay_out_of_the_benchmark(shared: Path):
    page = (shared / "report.html").read_text()
    bench, section = _section(page)
    assert "trial=" not in bench  # the benchmark's tables and plots hold no trial
    markdown = (shared / "BENCHMARK_REPORT.md").read_text()
    assert "trial=" not in markdown and "Search:" not in markdown
    assert "trial=" not in (shared / "BENCHMARKS.md").read_text()

    study = read_study(shared / "search" / "search")
    trials = study.get_trials(deepcopy=False)
    best = study.best_trial
    # The best trial, its value and param and its runs (the trial's config on the search seed).
    found = re.search(r"Trial (\d+): <strong>val = ([-\d.e]+)</strong> with x=([-\d.e]+)\.", section)
    assert found, section[:2000]
    assert int(found.group(1)) == best.number
    assert float(found.group(2)) == pytest.approx(best.value, rel=1e-3)
    assert float(found.group(3)) == pytest.approx(best.params["x"], rel=1e-3)
    runs = re.search(r"Its runs: (.*?)\.</p>", section)
    assert runs and f"base[trial={best.number}]" in runs.group(1) and "7" in runs.group(1)

    # One row per trial in the trials table, each with its state.
    table = section[section.index("<h3>Trials</h3>"):]
    rows = re.findall(r"<tr>\s*<td[^>]*>(\d+)</td>\s*<td[^>]*>(\w+)</td>", table)
    state = {TrialState.COMPLETE: "completed", TrialState.PRUNED: "pruned", TrialState.FAIL: "failed"}
    assert sorted((int(n), s) for n, s in rows) == sorted((t.number, state[t.state]) for t in trials)

    pruned = sum(t.state == TrialState.PRUNED for t in trials)
    if pruned:
        assert re.search(rf"{pruned} of {len(trials)} trials were pruned, saving [\d.]+ run-steps", section)
    else:
        assert "0 of" in section or "pruned; the saving" in section

    # The history, importances and slice figures, embedded, each a real PNG.
    images = re.findall(r'<img src="data:image/png;base64,([^"]+)" alt="([^"]+)"', section)
    assert {alt for _, alt in images} >= {"history", "importances", "slice"}
    for data, alt in images:
        png = shared / f"{alt}.check.png"
        png.write_bytes(base64.b64decode(data))
        width, height = png_size(png)
        assert width > 100 and height > 100, alt
    assert {p.name for p in (shared / "plots" / "search-search").glob("*.png")} >= {
        "history.png", "importances.png", "slice.png"}


@pytest.mark.slow
def test_the_search_section_renders_in_headless_chromium(shared: Path, tmp_path: Path):
    page = shared / "report.html"
    probe = tmp_path / "probe.html"
    probe.write_text(page.read_text().replace("<head>", "<head>\n" + PROBE, 1))
    done = _browser(tmp_path, "--virtual-time-budget=5000", "--dump-dom", probe.as_uri())
    found = re.search(r'<pre id="probe">(.*?)</pre>', done.stdout)
    assert found, f"no probe output; chromium said:\n{done.stderr[-2000:]}"
    result = json.loads(found.group(1))
    _, section = _section(page.read_text())
    in_section = section.count("<img ")
    assert in_section >= 3
    assert result["errors"] == [] and result["loaded"] == result["images"] >= in_section
    assert "<h2>Search: tune:search</h2>" in done.stdout and "<h3>Trials</h3>" in done.stdout


def test_a_results_folder_without_a_search_has_no_search_section(tmp_path: Path):
    folder = build_store_world(tmp_path / "res", {("walk", "a"): [0.1, 0.2], ("walk", "b"): [0.3, 0.4]})
    write_report(folder, plots=False)
    assert "Search:" not in (folder / "report.html").read_text()


def test_a_study_that_cannot_be_read_is_named_with_the_reason_and_the_report_stands(tmp_path: Path):
    from benchlab.ledger import Store

    folder = build_store_world(tmp_path / "res", {("walk", "a"): [0.1, 0.2], ("walk", "b"): [0.3, 0.4]})
    with Store.create(folder / "search" / "early"):
        pass  # a search's ledger, before its study was written
    write_report(folder, plots=False)
    page = (folder / "report.html").read_text()
    bench, mark, section = page.partition("<h2>Search: early</h2>")
    assert mark and "<h2>" in bench  # the benchmark's sections come first, whole
    assert "Not shown:" in section and "holds no search study yet" in section
