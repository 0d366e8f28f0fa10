"""A pruner's settings in the spec (`pruner: {name: asha, min_steps: 10}`), as Optuna applies them."""

from __future__ import annotations

import optuna
import pytest
from optuna.distributions import FloatDistribution
from optuna.trial import TrialState, create_trial
from searchkit import SEARCH_SPEC, write_search_bench

from benchlab.errors import SpecError
from benchlab.search import SearchRun
from benchlab.search.study import make_pruner, open_study, read_study
from benchlab.spec import json_schema, load_spec, parse_spec
from benchlab_testing import run_cli

X = {"x": FloatDistribution(-1, 1)}


def _search(pruner: str):
    spec = parse_spec(SEARCH_SPEC % {"budget": 6, "pruner": pruner})
    assert spec.search is not None
    return spec.search


def _study_with(pruner: str, completed: list[list[float]]) -> optuna.Study:
    """An in-memory study with the spec's pruner and completed trials with these curves."""
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study = optuna.create_study(direction="maximize", pruner=make_pruner(_search(pruner)))
    for curve in completed:
        study.add_trial(create_trial(params={"x": 0.0}, distributions=X, value=curve[-1],
                                     intermediate_values=dict(enumerate(curve)), state=TrialState.COMPLETE))
    return study


def _prunes_at(study: optuna.Study, curve: list[float]) -> int | None:
    """The first step at which the pruner stops a trial with this curve (None: never)."""
    trial = study.ask(X)
    for step, value in enumerate(curve):
        trial.report(value, step)
        if trial.should_prune():
            study.tell(trial, state=TrialState.PRUNED)
            return step
    study.tell(trial, curve[-1])
    return None


def test_median_start_up_trials_are_the_spec_s_not_the_default():
    good, bad = [1.0] * 20, [0.0] * 20
    # Two completed trials: with startup_trials 3 the median pruner waits for a third.
    assert _prunes_at(_study_with("{name: median, startup_trials: 3}", [good, good]), bad) is None
    assert _prunes_at(_study_with("{name: median, startup_trials: 2}", [good, good]), bad) == 0
    # The default waits for min(5, budget // 4) = 1 completed trial at a budget of 6.
    assert _prunes_at(_study_with("median", [good]), bad) == 0


def test_median_warm_up_steps_hold_pruning_off_until_that_step():
    good, bad = [1.0] * 20, [0.0] * 20
    assert _prunes_at(_study_with("{name: median, startup_trials: 1, warmup_steps: 7}", [good]), bad) == 7


def test_asha_min_steps_and_reduction_factor_set_its_rungs():
    # Rungs at min_steps * reduction_factor**k: 8, 24, 72 for min_steps 8, reduction factor 3.
    curves = [[1.0 + i] * 100 for i in range(3)]
    study = _study_with("{name: asha, min_steps: 8, reduction_factor: 3}", [])
    for curve in curves:  # three trials through every rung, so that a rung has values to compare with
        assert _prunes_at(study, curve) is None
    # Optuna promotes from a rung the best len(values) // reduction_factor (at least one).
    assert _prunes_at(study, [0.5] * 100) == 8
    # The best at rungs 8 and 24 goes on until rung 72, the first check after its fall at step 30.
    assert _prunes_at(study, [3.5] * 30 + [0.0] * 70) == 72


def test_a_setting_of_another_pruner_is_refused_with_file_line_and_field(tmp_path):
    spec = write_search_bench(tmp_path, pruner="{name: median, min_steps: 10}")
    proc = run_cli("validate", str(spec), cwd=tmp_path)
    assert proc.returncode == 2
    line = next(i for i, text in enumerate(spec.read_text().splitlines(), 1) if "pruner:" in text)
    assert (f"bench.yaml:{line} search.pruner: min_steps is a setting of the asha pruner; the median pruner takes: "
            "startup_trials, warmup_steps") in proc.stderr
    assert "Traceback" not in proc.stderr


@pytest.mark.parametrize(("pruner", "field", "message"), [
    ("hyperband", "search.pruner", "expected one of median, asha, none, or a mapping with name: and its settings"),
    ("{name: asha, min_steps: 0}", "search.pruner.min_steps", "expected at least 1, got 0"),
    ("{name: asha, reduction_factor: 1}", "search.pruner.reduction_factor", "expected at least 2, got 1"),
    ("{name: none, warmup_steps: 3}", "search.pruner", "warmup_steps is a setting of the median pruner"),
    ("{name: asha, grace: 3}", "search.pruner", "unknown field 'grace'"),
])
def test_bad_pruner_settings_name_the_field(pruner, field, message):
    with pytest.raises(SpecError) as err:
        parse_spec(SEARCH_SPEC % {"budget": 6, "pruner": pruner}, file="s.yaml")
    by_field = {p.field: p.message for p in err.value.problems}
    assert field in by_field, by_field
    assert message in by_field[field]


def test_a_pruner_without_settings_keeps_the_study_key_of_a_plain_name(tmp_path):
    """A study made while `pruner` was a name only goes on after the upgrade: the key is unchanged."""
    plain = _search("median").model_dump(mode="json", by_alias=True)
    assert plain["pruner"] == "median"
    set_ = _search("{name: asha, min_steps: 4}").model_dump(mode="json", by_alias=True)
    assert set_["pruner"] == {"name": "asha", "min_steps": 4}
    # and a changed setting is another search: its study is refused
    spec = load_spec(write_search_bench(tmp_path, pruner="{name: asha, min_steps: 4}"))
    open_study(spec, tmp_path / "study", "final")
    other = load_spec(write_search_bench(tmp_path, pruner="{name: asha, min_steps: 5}"))
    with pytest.raises(Exception, match="made by another search section"):
        open_study(other, tmp_path / "study", "final")


def test_the_json_schema_takes_a_name_or_a_mapping_with_settings():
    jsonschema = pytest.importorskip("jsonschema")
    schema = json_schema()
    pruner = schema["$defs"]["Search"]["properties"]["pruner"]
    for good in ("asha", {"name": "asha", "min_steps": 10, "reduction_factor": 4}):
        jsonschema.validate(good, {**pruner, "$defs": schema["$defs"]})
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate("hyperband", {**pruner, "$defs": schema["$defs"]})


@pytest.mark.slow
def test_a_search_with_asha_min_steps_prunes_at_that_rung_and_no_sooner(tmp_path):
    """Real subprocess trials: a bad trial after a good one is stopped at the first rung: at
    step 100 with min_steps 100, at step 10 with min_steps 10."""
    stopped = {}
    for min_steps in (100, 10):
        root = tmp_path / str(min_steps)
        root.mkdir()
        path = write_search_bench(root, budget=2, pruner=f"{{name: asha, min_steps: {min_steps}, reduction_factor: 2}}",
                                  params='{x: 0.0, steps: 400, nap: 0.002, child: ""}')
        spec = load_spec(path)
        results = root / "results" / "tune"
        study = open_study(spec, results / "search" / "search", "final")
        study.enqueue_trial({"x": 0.3})
        study.enqueue_trial({"x": -1.0})
        del study
        result = SearchRun(spec, results, jobs=1).run()
        assert result.completed == 1 and result.pruned == 1 and result.failed == 0
        trials = read_study(results / "search" / "search").trials
        good = next(t for t in trials if t.params["x"] == 0.3)
        bad = next(t for t in trials if t.params["x"] == -1.0)
        assert bad.state == TrialState.PRUNED
        stopped[min_steps] = max(bad.intermediate_values)
        # Each trial entered each rung with its value at the rung's own step, however late its
        # curve was read: rungs at min_steps * 2**k.
        rungs = [min_steps * 2**k for k in range(10) if min_steps * 2**k <= 399]
        assert [good.system_attrs.get(f"completed_rung_{k}") for k in range(len(rungs))] == [
            good.intermediate_values[r] for r in rungs]
        assert bad.system_attrs.get("completed_rung_0") == bad.intermediate_values[min_steps]
    # stopped at the first rung, not at the step where its curve happened to be read
    assert stopped == {100: 100, 10: 10}
    summary = run_cli("search", str(tmp_path / "100" / "bench.yaml"), "--report", cwd=tmp_path / "100")
    assert summary.returncode == 0, summary.stderr
    report = (tmp_path / "100" / "results" / "tune" / "search" / "search" / "report" / "SEARCH_REPORT.md").read_text()
    assert "pruner asha (min_steps 100, reduction_factor 2)" in report
