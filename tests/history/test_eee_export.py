"""`benchlab export --format eee`: Every Eval Ever records that the schema's own validator accepts,
with the report's numbers: the mean over seeds, and the standard error over questions."""

from __future__ import annotations

import json
import math
import subprocess
import sys

import numpy as np
import pytest
from scipy import stats
from statsmodels.stats.proportion import proportion_confint

from benchlab_testing import run_cli

# Each run answers 30 questions (3 groups of 10); config `good` gets more right. A question is
# right when a hash of (question, seed, skill) falls under the skill.
SCRIPT = '''
import hashlib, json, os, sys
args = dict(a.split("=", 1) for a in sys.argv[1:])
run_dir, seed, skill = os.environ["BENCHLAB_RUN_DIR"], int(os.environ["BENCHLAB_SEED"]), float(args["skill"])
def right(q):
    h = int(hashlib.sha256(f"{q}-{seed}-{skill}".encode()).hexdigest()[:8], 16) / 16**8
    return h < skill
out = os.path.join(run_dir, "eval-results", args["task"])
os.makedirs(out)
with open(os.path.join(out, "output-rs0.jsonl"), "w") as f:
    for q in range(30):
        f.write(json.dumps({"problem": f"question {q}", "expected_answer": "1", "predicted_answer": "1",
                            "symbolic_correct": right(q)}) + "\\n")
with open(os.path.join(run_dir, "metrics.json"), "w") as f:
    json.dump({"symbolic_correct": sum(right(q) for q in range(30)) / 30}, f)
'''

SPEC = """
name: ckpt-eval
tasks: [{name: math}]
configs:
  - {name: base, params: {skill: 0.4, model: acme/base-7b}}
  - {name: good, params: {skill: 0.7, model: acme/good-7b}}
seeds: [0]
command: python run.py task={task} skill={skill}
metrics:
  primary: {name: symbolic_correct, goal: max, range: [0, 1]}
baseline: base
"""


def _right(q: int, seed: int, skill: float) -> bool:
    import hashlib

    return int(hashlib.sha256(f"{q}-{seed}-{skill}".encode()).hexdigest()[:8], 16) / 16**8 < skill


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    root = tmp_path_factory.mktemp("eee")
    (root / "run.py").write_text(SCRIPT)
    (root / "bench.yaml").write_text(SPEC)
    run_cli("run", "bench.yaml", "--results", "res", "--no-report", cwd=root, check=True, timeout=300)
    out = run_cli("export", "res", str(root / "pub"), "--format", "eee", "--organization", "Acme Lab",
                  "--relationship", "first_party", cwd=root, check=True)
    files = sorted((root / "pub").rglob("*.json"))
    return root, files, out


def test_one_record_per_config_at_the_datastores_path(exported):
    root, files, out = exported
    rel = sorted(str(f.relative_to(root / "pub")) for f in files)
    assert [r.rsplit("/", 1)[0] for r in rel] == ["data/ckpt-eval/acme/base-7b", "data/ckpt-eval/acme/good-7b"]
    assert "wrote 2 Every Eval Ever records" in out.stdout


def test_every_record_passes_the_schemas_own_validator(exported):
    root, files, _ = exported
    pytest.importorskip("every_eval_ever", reason="the validator: pip install --no-deps every-eval-ever")
    proc = subprocess.run([sys.executable, "-m", "every_eval_ever", "validate", *map(str, files)],
                          capture_output=True, text=True, cwd=root / "pub")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    from every_eval_ever.validator import validate_file

    for f in files:
        report = validate_file(f, repo_path=str(f.relative_to(root / "pub")))
        assert report.valid, report.errors


def test_the_score_is_the_seed_mean_and_the_uncertainty_is_over_questions(exported):
    _, files, _ = exported
    for f in files:
        record = json.loads(f.read_text())
        skill = {"base": 0.4, "good": 0.7}[record["model_info"]["name"]]
        (result,) = record["evaluation_results"]
        # by hand: the run's accuracy, and the standard error over its 30 questions
        per_question = np.array([_right(q, 0, skill) for q in range(30)], dtype=float)
        assert result["score_details"]["score"] == pytest.approx(per_question.mean(), abs=1e-12)
        se = per_question.std(ddof=1) / math.sqrt(30)
        unc = result["score_details"]["uncertainty"]
        assert unc["num_samples"] == 30
        assert unc["standard_error"]["value"] == pytest.approx(se, rel=1e-9)
        # right/wrong, one answer a question: the report's interval is Wilson's (statsmodels' here)
        low, high = proportion_confint(int(per_question.sum()), 30, alpha=0.05, method="wilson")
        assert unc["confidence_interval"]["lower"] == pytest.approx(low, rel=1e-9)
        assert unc["confidence_interval"]["upper"] == pytest.approx(high, rel=1e-9)
        assert unc["confidence_interval"]["method"].startswith("Wilson")
        assert result["score_details"]["details"]["seeds"] == "1"
        assert result["metric_config"]["lower_is_better"] is False
        assert (result["metric_config"]["min_score"], result["metric_config"]["max_score"]) == (0.0, 1.0)
        assert record["source_metadata"]["source_organization_name"] == "Acme Lab"


def test_exporting_again_writes_the_same_files(exported):
    root, files, _ = exported
    run_cli("export", "res", str(root / "pub"), "--format", "eee", "--organization", "Acme Lab",
            "--relationship", "first_party", cwd=root, check=True)
    assert sorted((root / "pub").rglob("*.json")) == files


def test_a_bad_relationship_is_one_line_and_exit_2(exported):
    root, _, _ = exported
    proc = run_cli("export", "res", str(root / "pub2"), "--format", "eee", "--relationship", "friend", cwd=root)
    assert proc.returncode == 2 and "--relationship friend" in proc.stderr and "Traceback" not in proc.stderr
    assert not (root / "pub2").exists()


def test_without_question_records_the_uncertainty_is_over_seeds(tmp_path):
    (tmp_path / "run.py").write_text(
        "import json, os\nseed = int(os.environ['BENCHLAB_SEED'])\n"
        "json.dump({'reward': [3.0, 5.5, 4.0, 7.25][seed]}, open(os.path.join(os.environ['BENCHLAB_RUN_DIR'], "
        "'metrics.json'), 'w'))\n")
    (tmp_path / "bench.yaml").write_text(
        "name: rl\ntasks: [{name: cartpole}]\nconfigs: [{name: ppo}]\nseeds: 4\ncommand: python run.py\n"
        "metrics: {primary: {name: reward, goal: max}}\n")
    run_cli("run", "bench.yaml", "--results", "res", "--no-report", cwd=tmp_path, check=True, timeout=300)
    run_cli("export", "res", str(tmp_path / "pub"), "--format", "eee", cwd=tmp_path, check=True)
    (f,) = sorted((tmp_path / "pub").rglob("*.json"))
    assert f.relative_to(tmp_path / "pub").parts[:4] == ("data", "rl", "local", "ppo")
    (result,) = json.loads(f.read_text())["evaluation_results"]
    x = np.array([3.0, 5.5, 4.0, 7.25])
    unc = result["score_details"]["uncertainty"]
    assert result["score_details"]["score"] == pytest.approx(x.mean())
    assert unc["num_samples"] == 4 and unc["standard_deviation"] == pytest.approx(x.std(ddof=1))
    assert unc["standard_error"]["value"] == pytest.approx(x.std(ddof=1) / 2)
    low, high = stats.t.interval(0.95, 3, loc=x.mean(), scale=x.std(ddof=1) / 2)
    assert (unc["confidence_interval"]["lower"], unc["confidence_interval"]["upper"]) == (
        pytest.approx(low), pytest.approx(high))
    # an unbounded reward says so, as the schema spells it
    assert (result["metric_config"]["min_score"], result["metric_config"]["max_score"]) == ("-Infinity", "Infinity")
