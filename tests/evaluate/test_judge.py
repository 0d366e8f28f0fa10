"""Judge-scored benchmarks end to end: slime's delegate request to the evaluation server, which asks the
stub model, then the stub judge (a second server on 127.0.0.1) in both positions, and answers win rates."""

from __future__ import annotations

import httpx
import numpy as np
import pytest
from evalsvc_testkit import TOKEN, ServerThread, free_port, server_pool, write_config
from scipy import stats as scipy_stats

from benchlab.evaluate.config import DEFAULT_CONFIG, load_config
from benchlab.evaluate.datasets import load_items
from benchlab.evaluate.judge import parse_grade, parse_verdict
from benchlab.evaluate.server import create_app
from benchlab.evaluate.stub import StubSettings, create_stub_app, plan

pytestmark = pytest.mark.slow

AUTH = {"Authorization": f"Bearer {TOKEN}"}
JUDGED = {
    "arena": {"dataset": str(DEFAULT_CONFIG.parent / "arena.jsonl"), "scorer": "llm_judge",
              "judge": {"mode": "pairwise"}},
    "hle": {"dataset": str(DEFAULT_CONFIG.parent / "hle.jsonl"), "scorer": "llm_judge",
            "judge": {"mode": "single"}, "prompt": "{{ question }} End with 'Answer: <answer>'."},
}


@pytest.fixture
def servers():
    yield from server_pool()


def start(tmp_path, servers, judge: StubSettings | None = None):
    """The model stub, the judge stub (its own server) and the evaluation server."""
    judge_port = free_port()
    config = load_config(write_config(
        tmp_path, benchmarks_extra=JUDGED,
        judge={"url": f"http://127.0.0.1:{judge_port}", "name": "stub-judge", "backoff_secs": 0.01},
    ))
    model_settings = StubSettings(seed=5)
    model = servers(create_stub_app(config, model_settings))
    judge_server = ServerThread(create_stub_app(config, judge or StubSettings(seed=9)), port=judge_port).start()
    server = servers(create_app(config, token=TOKEN))
    return config, model_settings, model, judge_server, server


def post(server, model, names, rollout_id=1):
    body = {"rollout_id": rollout_id, "router_url": model.url, "benchmarks": [{"name": n} for n in names]}
    response = httpx.post(f"{server.url}/evaluate", json=body, headers=AUTH, timeout=120)
    assert response.status_code == 200, response.text
    return response.json()


def judge_stats(judge_server):
    return httpx.get(f"{judge_server.url}/stats", timeout=5).json()


def planned(config, settings, bench):
    return [plan(settings.seed, it.id, 0, settings.p_correct, settings.p_no_answer) == "correct"
            for it in load_items(config.benchmarks[bench])]


def test_verdict_and_grade_parsing():
    assert parse_verdict("reasons... [[B>A]]") == "B>A"
    assert parse_verdict("[[A>B]] or maybe [[B>A]]") is None  # conflicting labels: malformed
    assert parse_verdict("A is better") is None
    assert parse_grade("extracted_final_answer: 12\nreasoning: same\ncorrect: yes") == (True, "12")
    assert parse_grade("extracted_final_answer: None\ncorrect: no") == (False, None)
    assert parse_grade("I think it is right") is None


def test_pairwise_win_rate_with_bootstrap_ci_through_the_delegate_protocol(tmp_path, servers):
    config, settings, model, judge_server, server = start(tmp_path, servers)
    try:
        body = post(server, model, ["arena"])
        stats_after = judge_stats(judge_server)
    finally:
        judge_server.stop()
    judged = body["raw_metrics"]["arena"]["judge"]
    wins = planned(config, settings, "arena")
    # A right answer (the reference) beats the baseline in both positions, a wrong one loses both.
    assert judged["win_rate"] == pytest.approx(sum(wins) / len(wins))
    assert (judged["wins"], judged["losses"], judged["ties"]) == (2 * sum(wins), 2 * (len(wins) - sum(wins)), 0)
    assert judged["malformed"] == 0 and judged["num_entries"] == len(wins)
    # Two judge calls per prompt, one per position.
    assert stats_after["judge_requests"] == 2 * len(wins)
    # The CI is a percentile bootstrap over prompts: close to scipy's on the same per-prompt scores.
    ref = scipy_stats.bootstrap((np.array(wins, dtype=float),), np.mean, n_resamples=20000,
                                method="percentile", confidence_level=0.95, random_state=1).confidence_interval
    assert judged["win_rate_ci_low"] == pytest.approx(ref.low, abs=0.13)
    assert judged["win_rate_ci_high"] == pytest.approx(ref.high, abs=0.13)
    assert judged["win_rate_ci_low"] <= judged["win_rate"] <= judged["win_rate_ci_high"]


def test_a_position_biased_judge_scores_a_tie_not_a_win(tmp_path, servers):
    _, _, model, judge_server, server = start(tmp_path, servers, StubSettings(seed=9, judge_bias=True))
    try:
        judged = post(server, model, ["arena"])["raw_metrics"]["arena"]["judge"]
    finally:
        judge_server.stop()
    # The judge always prefers position A: the model wins when it is A and loses when it is B.
    assert judged["win_rate"] == 0.5
    assert judged["wins"] == judged["losses"] == 8 and judged["ties"] == 0


@pytest.mark.parametrize("rate", [0.5, 1.0])
def test_malformed_judge_replies_are_counted_and_never_wins(tmp_path, servers, rate):
    config, settings, model, judge_server, server = start(
        tmp_path, servers, StubSettings(seed=9, judge_malformed_rate=rate))
    try:
        body = post(server, model, ["arena", "hle"])
        stub = judge_stats(judge_server)
    finally:
        judge_server.stop()
    arena, hle = body["raw_metrics"]["arena"]["judge"], body["raw_metrics"]["hle"]["judge"]
    assert arena["malformed"] + hle["malformed"] == stub["judge_malformed"] > 0
    assert arena["wins"] + arena["ties"] + arena["losses"] + arena["malformed"] == 2 * 8
    if rate == 1.0:
        assert "win_rate" not in arena and arena["wins"] == 0 and arena["num_entries"] == 0
        assert body["raw_metrics"]["arena"]["pass@1"]["accuracy"] == 0.0
        assert hle["accuracy"] == 0.0 and hle["malformed"] == 8
    else:
        # Only well-formed games count: every win the server reports is a planned right answer's.
        wins = planned(config, settings, "arena")
        assert arena["wins"] <= 2 * sum(wins)
        assert hle["accuracy"] <= sum(planned(config, settings, "hle")) / 8


def test_single_answer_grading_and_a_retry_pays_no_judge_call_twice(tmp_path, servers):
    config, settings, model, judge_server, server = start(tmp_path, servers)
    try:
        first = post(server, model, ["hle"], rollout_id=1)
        paid = judge_stats(judge_server)["judge_requests"]
        # Another rollout id is another job: the model is asked again, the judge only through its cache.
        second = post(server, model, ["hle"], rollout_id=2)
        again = judge_stats(judge_server)["judge_requests"]
    finally:
        judge_server.stop()
    right = planned(config, settings, "hle")
    assert first["raw_metrics"]["hle"]["judge"]["accuracy"] == pytest.approx(sum(right) / len(right))
    assert first["raw_metrics"]["hle"]["pass@1"]["accuracy"] == pytest.approx(sum(right) / len(right))
    assert paid == len(right) and again == paid
    assert second["raw_metrics"] == first["raw_metrics"] and second["job_id"] != first["job_id"]


def test_a_judge_url_off_the_allowlist_is_a_config_error(tmp_path):
    from benchlab.errors import SpecError

    with pytest.raises(SpecError, match="judge.url.*allowed_router_hosts"):
        load_config(write_config(tmp_path, benchmarks_extra=JUDGED, judge={"url": "http://10.9.9.9:8000"}))
    with pytest.raises(SpecError, match="need a top-level 'judge' section"):
        load_config(write_config(tmp_path, benchmarks_extra=JUDGED))
