"""Promotion writes the promoted config whatever the spec's YAML layout, keeping its comments."""

from __future__ import annotations

import pytest

from benchlab.errors import SearchError
from benchlab.search.promote import promote
from benchlab.spec import load_spec
from benchlab_testing import run_cli
from search.searchkit import SEARCH_SPEC, write_search_bench

pytestmark = pytest.mark.slow

TAIL = """seeds: 2
command: python run.py x={x} steps={steps} nap={nap} child={child}
metrics:
  primary: {name: test, goal: max}
  secondary: [val]
baseline: other
search: {metric: val, base_config: base, space: {x: {uniform: [-1, 1]}}, seeds: [7], budget: 2, pruner: none}
"""

LAYOUTS = {
    "flow, one line": "name: tune  # the benchmark\ntasks: [{name: t}]\n"
                      'configs: [{name: base, params: {x: 0.0, steps: 5, nap: 0, child: ""}}, '
                      '{name: other, params: {x: -0.5, steps: 5, nap: 0, child: ""}}]\n',
    "block, indented items": """name: tune
tasks:
  - name: t
configs:
    # the config the search tunes
  - name: base
    params: {x: 0.0, steps: 5, nap: 0, child: ""}   # keep this comment
  - name: other
    params:
      x: -0.5
      steps: 5
      nap: 0
      child: ""
""",
    "block, items at the key's column": """name: tune
tasks:
- name: t
configs:
- {name: base, params: {x: 0.0, steps: 5, nap: 0, child: ""}}
- name: other  # the baseline
  params: {x: -0.5, steps: 5, nap: 0, child: ""}
""",
    "configs last, flow over lines": """name: tune
tasks: [{name: t}]
""" + TAIL + """configs: [
  {name: base, params: {x: 0.0, steps: 5, nap: 0, child: ""}},
  {name: other, params: {x: -0.5, steps: 5, nap: 0, child: ""}},
]
""",
}


@pytest.fixture(scope="module")
def searched(tmp_path_factory):
    root = tmp_path_factory.mktemp("search")
    spec = write_search_bench(root, budget=2, spec=SEARCH_SPEC % {"budget": 2, "pruner": "none"})
    proc = run_cli("search", str(spec), "-j", "2", "--results", str(root / "res"), cwd=root, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (root / "search.out").write_text(proc.stdout)
    return root


def test_search_progress_counts_trials_against_the_budget_not_a_growing_plan(searched):
    import re

    lines = (searched / "search.out").read_text().splitlines()
    counters = [m.group(0) for line in lines if (m := re.match(r"\[\s*\d+/\d+\]", line))]
    assert counters == []  # no run line counts against a total that grows with each trial
    trials = [re.search(r"\[(\d+)/(\d+)\]", line).groups() for line in lines if line.startswith("trial ")]
    assert trials == [("1", "2"), ("2", "2")]
    assert sum(" — val=" in line for line in lines) == 2  # each trial's run, reported once


@pytest.mark.parametrize("layout", list(LAYOUTS))
def test_promotion_writes_the_config_it_names_on_every_yaml_layout(searched, layout):
    text = LAYOUTS[layout] + ("" if "configs last" in layout else TAIL)
    path = searched / f"bench-{len(text)}.yaml"
    path.write_text(text)
    spec = load_spec(path)
    done = promote(spec, searched / "res", "tuned")
    written = done.path.read_text()
    new = load_spec(done.path)
    assert [c.name for c in new.configs] == ["base", "other", "tuned"]
    tuned = new.config("tuned")
    assert tuned.params["x"] == pytest.approx(done.params["x"]) and tuned.params["steps"] == 5
    assert tuned.origin is not None and tuned.origin.trial == done.trial
    assert [c.params for c in new.configs[:2]] == [c.params for c in spec.configs]
    # Every line of the original is still there, comments and all (a flow list written over
    # several lines comes back on one line).
    for line in text.splitlines():
        if "configs: [" not in line and line.strip() != "]":
            assert line.strip().rstrip(",") in written, line
    path.unlink()
    done.path.unlink()


def test_promotion_refuses_a_spec_that_would_not_hold_the_config(searched, monkeypatch):
    from benchlab.search import promote as promote_module

    path = searched / "bench-plain.yaml"
    path.write_text(LAYOUTS["block, indented items"] + TAIL)
    monkeypatch.setattr(promote_module, "_with_config", lambda text, *a, **k: text)  # an edit that loses it
    with pytest.raises(SearchError, match="does not hold config 'tuned'"):
        promote(load_spec(path), searched / "res", "tuned")
    assert not (searched / "bench-plain.tuned.yaml").exists()
