"""`benchlab serve` keeps each job's per-question records where `benchlab compare` reads them, so
two checkpoints a trainer evaluated through the service compare question by question."""

from __future__ import annotations

import json

import pytest
from evalsvc_testkit import server_pool
from test_server import AUTH, delegate, start_pair

from benchlab.collect.samples import read_samples
from benchlab.evaluate.stub import StubSettings, create_stub_app
from benchlab_testing import run_cli

pytestmark = pytest.mark.slow


@pytest.fixture
def servers():
    yield from server_pool()


def _job(server, stub_url: str, rollout: int) -> dict:
    payload = {"rollout_id": rollout, "router_url": stub_url, "benchmarks": [{"name": "mcq"}]}
    body, _ = delegate(f"{server.url}/evaluate", payload, headers=AUTH, timeout_secs=60)
    assert body["status"] == "completed"
    return body


def _verdicts(job_dir) -> dict[str, float]:
    lines = (job_dir / "mcq.jsonl").read_text().splitlines()
    return {str(r["id"]): float(r["correct"][0]) for r in map(json.loads, lines) if r["correct"]}


def test_two_jobs_of_the_service_compare_question_by_question(tmp_path, servers):
    config, _, stub_a, server = start_pair(tmp_path, servers, StubSettings(seed=1))
    stub_b = servers(create_stub_app(config, StubSettings(seed=2)))
    a = _job(server, stub_a.url, 20)
    b = _job(server, stub_b.url, 40)
    jobs = config.server.state_dir / "jobs"
    va, vb = _verdicts(jobs / a["job_id"]), _verdicts(jobs / b["job_id"])
    assert set(va) == set(vb) and len(va) == 10

    table, _ = read_samples(jobs)
    got = table[table["config"] == a["job_id"]].set_index("question")["value"].to_dict()
    assert {str(k): float(v) for k, v in got.items()} == va
    assert table["metric"].unique().tolist() == ["correct"]

    proc = run_cli("compare", str(jobs), "--baseline", a["job_id"], "--candidate", b["job_id"], "--json",
                   timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    out = json.loads(proc.stdout)
    row = next(r for r in out["comparisons"] if r["task"] == "mcq")
    # By hand: the mean paired difference and the discordant questions.
    diff = sum(vb[q] - va[q] for q in va) / len(va)
    better = sum(1 for q in va if vb[q] > va[q])
    worse = sum(1 for q in va if vb[q] < va[q])
    assert row["mean_diff"] == pytest.approx(diff)
    assert (row["better"], row["worse"]) == (better, worse)
