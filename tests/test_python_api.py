"""The Python API is the command line's twin: `benchlab.run` and `benchlab.compare` give what the
commands give, and docs/python.md runs as written."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

import benchlab
from benchlab_testing import BASIC_SPEC, run_cli, run_python_blocks

ROOT = Path(__file__).resolve().parents[1]


def test_the_public_names_are_pinned():
    assert sorted(benchlab.__all__) == sorted([
        "BenchlabError", "Comparison", "RunResult", "Spec", "__version__", "compare", "expand", "load",
        "load_spec", "log", "run", "summary"])
    for name in benchlab.__all__:
        assert getattr(benchlab, name) is not None


def test_run_returns_the_folder_and_each_run_by_its_state(make_bench):
    bench = make_bench(BASIC_SPEC.replace("extra={extra}", "extra={extra} fail_seed=1"))
    result = benchlab.run(bench.spec, results=bench.results, jobs=2, report=False)
    assert result.folder == bench.results
    # seed 1 fails everywhere (the script exits 3): 2 tasks x 2 configs
    assert sorted(r.name for r in result.failed) == ["t1/a/s1", "t1/b/s1", "t2/a/s1", "t2/b/s1"]
    assert sorted(r.name for r in result.completed) == ["t1/a/s0", "t1/b/s0", "t2/a/s0", "t2/b/s0"]
    assert result.exit_code == 1 and not result.pending and result.report is None
    # the command reads the same ledger: its status agrees run by run
    status = json.loads(run_cli("status", str(bench.results), "--json", cwd=bench.root).stdout)
    assert status["counts"]["completed"] == 4 and status["counts"]["failed"] == 4


def test_run_again_resumes_and_lists_the_earlier_runs(make_bench):
    bench = make_bench(BASIC_SPEC)
    first = benchlab.run(bench.spec, results=bench.results, report=False)
    mtimes = {p: p.stat().st_mtime_ns for p in bench.results.glob("runs/*/metrics.json")}
    again = benchlab.run(bench.spec, results=bench.results, report=False)
    assert len(first.completed) == len(again.completed) == 8 and again.exit_code == 0
    assert {p: p.stat().st_mtime_ns for p in bench.results.glob("runs/*/metrics.json")} == mtimes


def test_run_takes_overrides_as_a_mapping_or_as_key_value_strings(make_bench):
    spec = BASIC_SPEC.replace("name: basic", "name: basic\nvariables: {b: 0.5}").replace(
        "params: {base: 0.5}", "params: {base: \"${b}\"}")
    bench = make_bench(spec)
    as_map = benchlab.run(bench.spec, sets={"b": 0.25}, results=bench.results / "m", report=False)
    as_list = benchlab.run(bench.spec, sets=["b=0.25"], results=bench.results / "l", report=False)
    values = [benchlab.load(r.folder, series=False) for r in (as_map, as_list)]
    t1 = [v[(v.task == "t1") & (v.metric == "score")].value.min() for v in values]
    assert t1 == [pytest.approx(0.25), pytest.approx(0.25)]


def test_a_bad_spec_raises_the_error_the_command_prints(make_bench):
    bench = make_bench(BASIC_SPEC.replace("seeds: 2", "seeds: many"))
    with pytest.raises(benchlab.BenchlabError) as caught:
        benchlab.run(bench.spec, results=bench.results)
    cli = run_cli("run", str(bench.spec), cwd=bench.root)
    assert cli.returncode == 2 and str(caught.value).splitlines()[0] in cli.stderr


def test_compare_is_what_compare_json_prints(make_bench):
    bench = make_bench(BASIC_SPEC.replace("seeds: 2", "seeds: 4"))
    benchlab.run(bench.spec, results=bench.results, report=False)
    comparison = benchlab.compare(bench.results, candidate="b", reps=500)
    cli = run_cli("compare", str(bench.results), "--candidate", "b", "--reps", "500", "--json", cwd=bench.root)
    assert cli.returncode == 0, cli.stderr
    assert cli.stdout == comparison.to_json() + "\n"
    assert comparison.level == "seeds" and comparison.seeds is not None
    rows = comparison.seeds.comparisons
    # a and b differ only in a parameter the script ignores: the same scores, seed by seed
    assert {r.task for r in rows} == {"t1", "t2"} and all(r.mean_diff == pytest.approx(0.0) for r in rows)


def test_compare_refuses_a_config_the_folder_lacks_as_the_command_does(make_bench):
    bench = make_bench(BASIC_SPEC)
    benchlab.run(bench.spec, results=bench.results, report=False)
    with pytest.raises(benchlab.BenchlabError, match="no config 'zzz'; configs are a, b"):
        benchlab.compare(bench.results, candidate="zzz")
    cli = run_cli("compare", str(bench.results), "--candidate", "zzz", cwd=bench.root)
    assert cli.returncode == 2 and "no config 'zzz'; configs are a, b" in cli.stderr


def _cells(html: str) -> list[list[str]]:
    rows = re.findall(r"<tr>(.*?)</tr>", html, flags=re.S)
    return [[re.sub(r"<[^>]+>", "", c).strip() for c in re.findall(r"<t[dh][^>]*>(.*?)</t[dh]>", r, flags=re.S)]
            for r in rows]


def test_a_comparison_shows_the_reports_words_and_numbers_in_a_notebook(make_bench):
    spec = BASIC_SPEC.replace("seeds: 2", "seeds: 8").replace("params: {extra: 2}", "params: {extra: 2, base: 0.9}")
    spec = spec.replace("params: {base: 0.5}", "params: {}").replace("params: {base: 0.7}", "params: {}")
    spec = spec.replace("params: {extra: 1}", "params: {extra: 1, base: 0.5}")
    bench = make_bench(spec)
    benchlab.run(bench.spec, results=bench.results)  # writes the report
    comparison = benchlab.compare(bench.results, candidate="b", reps=2000)
    html = comparison._repr_html_()
    report = (bench.results / "BENCHMARK_REPORT.md").read_text()
    # the report's comparison rows, as written for (t1, b): the same verdict and interval
    line = next(x for x in report.splitlines() if x.startswith("| t1 | b |"))
    md_cells = [c.strip() for c in line.strip().strip("|").split("|")]
    html_row = next(r for r in _cells(html) if r[:2] == ["t1", "b"])
    assert html_row[2:4] == [re.sub(r"[*_]", "", c) for c in md_cells[2:4]]
    assert "better" in html_row[2]  # b scores 0.4 higher on every one of 8 seeds


def test_a_run_result_shows_the_reports_summary_and_tables(make_bench):
    bench = make_bench(BASIC_SPEC)
    result = benchlab.run(bench.spec, results=bench.results)
    html = result._repr_html_()
    report = (bench.results / "BENCHMARK_REPORT.md").read_text()
    for line in report.split("## Results", 1)[1].split("\n## ", 1)[0].splitlines():
        if line.startswith("| 1 |"):  # each task's first-ranked row
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            assert any(r[:4] == cells[:4] for r in _cells(html))
    assert "8</b> completed" in html


def test_markup_in_a_config_name_never_reaches_the_notebook_as_markup(tmp_path):
    # Names in a long-format CSV are anyone's text (a spec's names are checked before they exist).
    evil = "b<script>alert(1)</script>|x"
    rows = ["task,config,seed,value"] + [f"t,a,{s},{0.5 + s / 10}" for s in range(4)] + [
        f"t,\"{evil}\",{s},{0.6 + s / 9}" for s in range(4)]
    table = tmp_path / "table.csv"
    table.write_text("\n".join(rows) + "\n")
    comparison = benchlab.compare(table, baseline="a", candidate=evil, reps=200)
    html = comparison._repr_html_()
    assert "<script>" not in html and "alert(1)" in html
    row = next(r for r in _cells(html) if r[:1] == ["t"])
    assert len(row) == len(_cells(html)[0])  # the | in the name split no cell


@pytest.mark.slow
def test_the_python_guide_runs_as_a_notebook_would(tmp_path, monkeypatch):
    # docs/python.md: its cells share one namespace, in order, as a notebook's do.
    monkeypatch.chdir(tmp_path)
    assert run_python_blocks(ROOT / "docs" / "python.md", shared=True) >= 6


def test_run_expands_the_spec_once_for_its_warnings_and_its_sweep(make_bench, monkeypatch):
    # At 100,000 runs an expansion takes a quarter of a second before the first launch; the
    # evaluation rules' warnings are read from the plan the sweep then runs.
    import benchlab.execute.sweep as sweep_module
    import benchlab.plan

    real, made = benchlab.plan.expand, []

    def counted(spec):
        made.append(spec.name)
        return real(spec)

    # Every way in: the sweep's own name for it, and the module's (imported inside functions).
    monkeypatch.setattr(sweep_module, "expand", counted)
    monkeypatch.setattr(benchlab.plan, "expand", counted)
    bench = make_bench(BASIC_SPEC)
    result = benchlab.run(bench.spec, results=bench.results, report=False)
    assert len(result.completed) == 8 and not result.warnings
    assert made == ["basic"]
    again = benchlab.run(bench.spec, results=bench.results, report=False)  # a new sweep plans again
    assert len(again.completed) == 8 and made == ["basic", "basic"]


def test_a_sweep_that_never_runs_leaves_the_collector_as_it_was(make_bench):
    # The plan is read for the warnings before the sweep runs; only run() hands it to the
    # collector's permanent generation (and back at its end), so a caller's on_sweep that stops
    # first leaves nothing frozen.
    import gc

    bench = make_bench(BASIC_SPEC)
    gc.unfreeze()

    def stop_first(sweep):
        assert len(sweep.planned()) == 8 and gc.get_freeze_count() == 0
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        benchlab.run(bench.spec, results=bench.results, report=False, on_sweep=stop_first)
    assert gc.get_freeze_count() == 0
    result = benchlab.run(bench.spec, results=bench.results, report=False)
    assert len(result.completed) == 8 and gc.get_freeze_count() == 0
