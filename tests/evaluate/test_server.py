"""The evaluation server over real HTTP: a uvicorn server, the stub model, and a client that
speaks the delegate protocol of slime's eval client (POST, block, retry the whole request)."""

from __future__ import annotations

import json
import os
import sqlite3
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
from evalsvc_testkit import TOKEN, ServerThread, free_port, server_pool, write_config

from benchlab.evaluate.config import load_config
from benchlab.evaluate.datasets import load_items
from benchlab.evaluate.server import create_app
from benchlab.evaluate.stub import StubSettings, create_stub_app, plan

pytestmark = pytest.mark.slow


@pytest.fixture
def servers():
    yield from server_pool()


AUTH = {"Authorization": f"Bearer {TOKEN}"}


def delegate(
    url: str,
    payload: dict[str, Any],
    *,
    headers: dict[str, str],
    timeout_secs: float = 3600,
    max_retries: int = 3,
) -> tuple[dict[str, Any], int]:
    """What slime's delegate client does: POST, wait, on any error sleep min(2^attempt, 30) and re-send."""
    last: Exception | None = None
    for attempt in range(1, max_retries + 1):
        try:
            response = httpx.post(url, json=payload, headers=headers, timeout=timeout_secs)
            response.raise_for_status()
            return response.json(), attempt
        except httpx.HTTPError as exc:
            last = exc
            if attempt < max_retries:
                time.sleep(min(2**attempt, 30))
    assert last is not None
    raise last


def numeric_metrics(raw: dict[str, Any]) -> dict[str, float]:
    # slime keeps only the numeric leaves of raw_metrics.
    return {
        f"{b}/{m}/{k}": v
        for b, modes in raw.items()
        for m, vals in modes.items()
        for k, v in vals.items()
        if isinstance(v, int | float)
    }


def expected_accuracy(config, bench: str, n: int, settings: StubSettings) -> float:
    """pass@1 averaged over samples, from what the stub was told to answer (its plan)."""
    items = load_items(config.benchmarks[bench])
    right = sum(
        plan(settings.seed, it.id, i, settings.p_correct, settings.p_no_answer) == "correct"
        for it in items
        for i in range(n)
    )
    return right / (len(items) * n)


def start_pair(tmp_path: Path, servers, stub: StubSettings | None = None, **overrides: Any):
    overrides.setdefault("model", {}).update({"backoff_secs": 0.01, "max_backoff_secs": 0.05})
    config = load_config(write_config(tmp_path, **overrides))
    stub_settings = stub or StubSettings(seed=3)
    stub_server = servers(create_stub_app(config, stub_settings))
    eval_server = servers(create_app(config, token=TOKEN))
    return config, stub_settings, stub_server, eval_server


def stub_requests(stub_server: ServerThread) -> int:
    return httpx.get(f"{stub_server.url}/stats", timeout=5).json()["requests"]


def evaluate(
    server: ServerThread, router_url: str, benchmark: str, *, rollout_id: int, timeout: float
) -> httpx.Response:
    """POST a blocking evaluation of one benchmark, all its sampling values left to the config."""
    return httpx.post(
        f"{server.url}/evaluate",
        headers=AUTH,
        timeout=timeout,
        json={"rollout_id": rollout_id, "router_url": router_url, "benchmarks": [{"name": benchmark}]},
    )


def test_health_benchmarks_and_api_docs_behind_the_token(tmp_path, servers):
    config, _, _, server = start_pair(tmp_path, servers)
    health = httpx.get(f"{server.url}/health", timeout=5).json()
    assert health["status"] == "ok" and health["auth"] is True
    assert health["sandbox"]["network_isolated"] == (not health["warnings"])
    listed = httpx.get(f"{server.url}/benchmarks", headers=AUTH, timeout=5).json()["benchmarks"]
    assert {b["name"] for b in listed} == set(config.benchmarks)
    assert next(b for b in listed if b["name"] == "arith")["num_prompts"] == 16
    for path in ("/docs", "/redoc", "/openapi.json"):
        refused = httpx.get(f"{server.url}{path}", timeout=5)
        assert refused.status_code == 401 and "Authorization" in refused.json()["detail"], path
        assert httpx.get(f"{server.url}{path}", headers=AUTH, timeout=5).status_code == 200, path
    assert "/evaluate" in httpx.get(f"{server.url}/openapi.json", headers=AUTH, timeout=5).json()["paths"]


def test_health_reports_how_the_sandbox_confines_writes(tmp_path, servers):
    config, _, _, server = start_pair(
        tmp_path, servers, sandbox={"max_files": 77, "tmpfs_mb": 9}
    )
    sandbox = httpx.get(f"{server.url}/health", timeout=5).json()["sandbox"]
    if sandbox["mode"] == "none":
        assert sandbox["filesystem"] == "none" and sandbox["max_files"] is None
        return
    assert sandbox["filesystem"] in ("readonly", "cover")
    assert (sandbox["max_files"], sandbox["writable_mb"]) == (77, 9)
    if sandbox["filesystem"] == "cover":
        assert "/tmp" in sandbox["covered"]


def test_delegate_request_gets_raw_metrics_that_match_the_stub(tmp_path, servers):
    config, settings, stub, server = start_pair(tmp_path, servers)
    payload = {
        "rollout_id": 7,
        "router_url": stub.url,
        "benchmarks": [
            {
                "name": "arith",
                "n_samples_per_eval_prompt": 4,
                "temperature": 0.6,
                "top_p": 0.95,
                "top_k": -1,
                "max_response_len": 512,
            },
            {"name": "mcq", "top_k": 40, "max_response_len": 100},
        ],
        "defaults": {"ignored": True},
    }
    body, attempts = delegate(f"{server.url}/evaluate", payload, headers=AUTH, timeout_secs=60)
    assert attempts == 1 and body["status"] == "completed"
    metrics = numeric_metrics(body["raw_metrics"])
    assert metrics["arith/pass@1[avg-of-4]/accuracy"] == pytest.approx(
        expected_accuracy(config, "arith", 4, settings)
    )
    assert metrics["mcq/pass@1/accuracy"] == pytest.approx(
        expected_accuracy(config, "mcq", 1, settings)
    )
    assert {"arith/majority@4/accuracy", "arith/pass@2/accuracy", "arith/pass@4/accuracy"} <= set(
        metrics
    )
    assert [r["benchmark"] for r in body["runs"]] == ["arith", "mcq"]
    assert body["runs"][0]["sampling"] == {
        "n": 4,
        "temperature": 0.6,
        "top_p": 0.95,
        "max_tokens": 512,
    }
    assert (Path(body["output_dir"]) / "arith.jsonl").is_file()
    assert "done in" in Path(body["log_path"]).read_text()
    assert body["command"].startswith("benchlab eval --model-url")
    assert stub_requests(stub) == 16 + 10  # one request per prompt: n samples come back together
    # What reached the model: OpenAI names, top_k only when not -1, no top_p where nothing set it
    # (mcq's config sets none), the temperature always.
    seen = httpx.get(f"{stub.url}/stats", timeout=5).json()["sampling"]
    assert sorted(seen, key=lambda b: b["n"]) == [
        {
            "model": "default",
            "n": 1,
            "temperature": 0.0,
            "top_k": 40,
            "max_tokens": 100,
        },
        {"model": "default", "n": 4, "temperature": 0.6, "top_p": 0.95, "max_tokens": 512},
    ]


def test_a_retry_after_a_client_timeout_joins_the_running_job(tmp_path, servers):
    _, _, stub, server = start_pair(
        tmp_path, servers, StubSettings(seed=1, latency_secs=0.25), model={"concurrency": 8}
    )
    payload = {"rollout_id": 1, "router_url": stub.url, "benchmarks": [{"name": "arith"}]}
    # 16 prompts at 8 in flight and 0.25 s each take ~0.5 s: the first read times out, the retry
    # comes while the evaluation still runs.
    with pytest.raises(httpx.ReadTimeout):
        httpx.post(f"{server.url}/evaluate", json=payload, headers=AUTH, timeout=0.3)
    body = httpx.post(f"{server.url}/evaluate", json=payload, headers=AUTH, timeout=60).json()
    assert body["raw_metrics"]["arith"]["pass@1"]["num_entries"] == 16
    assert stub_requests(stub) == 16  # the retry did not evaluate again


def test_async_request_is_polled_until_completed(tmp_path, servers):
    config, settings, stub, server = start_pair(tmp_path, servers)
    payload = {
        "rollout_id": 2,
        "router_url": stub.url,
        "benchmarks": [{"name": "words"}],
        "async": True,
    }
    queued = httpx.post(f"{server.url}/evaluate", json=payload, headers=AUTH, timeout=10)
    assert queued.status_code == 202
    job = queued.json()
    assert job["status"] == "queued" and job["status_url"] == f"/status/{job['job_id']}"
    deadline = time.monotonic() + 30
    while True:
        status = httpx.get(f"{server.url}{job['status_url']}", headers=AUTH, timeout=10).json()
        if status["status"] in ("completed", "failed") or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    assert status["status"] == "completed"
    assert status["raw_metrics"]["words"]["pass@1"]["accuracy"] == pytest.approx(
        expected_accuracy(config, "words", 1, settings)
    )


def test_finished_jobs_survive_a_restart_and_a_resent_request_id_is_not_rerun(tmp_path, servers):
    config = load_config(write_config(tmp_path))
    stub = servers(create_stub_app(config, StubSettings(seed=5)))
    first = ServerThread(create_app(config, token=TOKEN)).start()
    payload = {"rollout_id": 3, "router_url": stub.url, "benchmarks": [{"name": "mcq"}], "request_id": "run-a/3"}
    try:
        done = httpx.post(f"{first.url}/evaluate", json=payload, headers=AUTH, timeout=60).json()
    finally:
        first.stop()
    second = servers(create_app(load_config(write_config(tmp_path)), token=TOKEN))
    again = httpx.get(f"{second.url}/status/{done['job_id']}", headers=AUTH, timeout=10).json()
    assert again["status"] == "completed" and again["raw_metrics"] == done["raw_metrics"]
    repeat = httpx.post(f"{second.url}/evaluate", json=payload, headers=AUTH, timeout=60).json()
    assert repeat["job_id"] == done["job_id"]
    assert stub_requests(stub) == 10
    # Another request id is another request.
    other = httpx.post(
        f"{second.url}/evaluate", json={**payload, "rollout_id": 4, "request_id": "run-a/4"}, headers=AUTH,
        timeout=60,
    ).json()
    assert other["job_id"] != done["job_id"] and stub_requests(stub) == 20


def test_a_different_model_behind_the_same_router_is_evaluated_not_served_from_the_cache(tmp_path, servers):
    config = load_config(write_config(tmp_path, server={"reuse_results_secs": 3600}))  # the opt-in
    port = free_port()
    first_model = ServerThread(create_stub_app(config, StubSettings(seed=5, p_correct=1.0, p_no_answer=0.0),
                                               model="/ckpt/run-a/step-0"), port=port).start()
    server = servers(create_app(config, token=TOKEN))
    payload = {"rollout_id": 0, "router_url": first_model.url, "benchmarks": [{"name": "mcq"}]}
    try:
        first = httpx.post(f"{server.url}/evaluate", json=payload, headers=AUTH, timeout=60).json()
        assert httpx.post(f"{server.url}/evaluate", json=payload, headers=AUTH,
                          timeout=60).json()["job_id"] == first["job_id"]  # the same model: a repeat
    finally:
        first_model.stop()
    # A new training run: rollout ids start at 0 again, another checkpoint is served on the same address.
    second_model = ServerThread(create_stub_app(config, StubSettings(seed=5, p_correct=0.0, p_no_answer=0.0),
                                                model="/ckpt/run-b/step-0"), port=port).start()
    try:
        second = httpx.post(f"{server.url}/evaluate", json=payload, headers=AUTH, timeout=60).json()
        assert second["job_id"] != first["job_id"] and stub_requests(second_model) == 10
        assert first["raw_metrics"]["mcq"]["pass@1"]["accuracy"] == 1.0
        assert second["raw_metrics"]["mcq"]["pass@1"]["accuracy"] == 0.0
    finally:
        second_model.stop()


def test_repeats_are_evaluated_again_when_reuse_is_off_or_the_sampling_differs(tmp_path, servers):
    _, _, stub, server = start_pair(tmp_path, servers, server={"reuse_results_secs": 0})
    payload = {"rollout_id": 7, "router_url": stub.url, "benchmarks": [{"name": "mcq"}]}
    first = httpx.post(f"{server.url}/evaluate", json=payload, headers=AUTH, timeout=60).json()
    again = httpx.post(f"{server.url}/evaluate", json=payload, headers=AUTH, timeout=60).json()
    assert again["job_id"] != first["job_id"] and stub_requests(stub) == 20
    (tmp_path / "reuse").mkdir()
    _, _, stub, server = start_pair(tmp_path / "reuse", servers, server={"reuse_results_secs": 3600})
    payload["router_url"] = stub.url
    first = httpx.post(f"{server.url}/evaluate", json=payload, headers=AUTH, timeout=60).json()
    hotter = {**payload, "benchmarks": [{"name": "mcq", "temperature": 1.3}]}
    other = httpx.post(f"{server.url}/evaluate", json=hotter, headers=AUTH, timeout=60).json()
    assert other["job_id"] != first["job_id"] and stub_requests(stub) == 20
    # The same parameters spelt through the request's defaults are the same evaluation.
    spelt = {**payload, "defaults": {"temperature": 1.3}}
    assert httpx.post(f"{server.url}/evaluate", json=spelt, headers=AUTH,
                      timeout=60).json()["job_id"] == other["job_id"]


def test_a_job_whose_server_died_is_failed_then_rerun(tmp_path, servers):
    from benchlab.evaluate.jobs import JobStore
    from benchlab.evaluate.protocol import EvaluateRequest, evaluation_key, resolve_runs

    config = load_config(write_config(tmp_path, model={"concurrency": 8}))
    stub = servers(create_stub_app(config, StubSettings(seed=5)))
    payload = {"rollout_id": 9, "router_url": stub.url, "benchmarks": [{"name": "words"}]}
    req = EvaluateRequest.model_validate(payload)
    # What a server killed mid-job leaves: a running job whose heartbeat stopped long ago.
    dead = JobStore(config.server.state_dir / "jobs.sqlite", owner="killed-server")
    job = dead.create(evaluation_key(req, resolve_runs(config, req), config.model.name), req)
    dead.set_running(job.job_id)
    with sqlite3.connect(dead.path) as db:
        db.execute("UPDATE jobs SET heartbeat = heartbeat - 60 WHERE job_id = ?", (job.job_id,))
    dead.close()
    second = servers(create_app(config, token=TOKEN))
    status = httpx.get(f"{second.url}/status/{job.job_id}", headers=AUTH, timeout=10).json()
    assert status["status"] == "failed" and "stopped" in status["error"]
    rerun = httpx.post(f"{second.url}/evaluate", json=payload, headers=AUTH, timeout=60).json()
    assert rerun["status"] == "completed" and rerun["job_id"] != job.job_id


def test_after_a_graceful_restart_the_new_server_hands_on_the_job_the_old_one_finishes(tmp_path, servers):
    config = load_config(write_config(tmp_path, model={"concurrency": 1}))
    stub = servers(create_stub_app(config, StubSettings(seed=5, latency_secs=0.3)))
    old = ServerThread(create_app(config, token=TOKEN)).start()
    # With a request id: the same request gets the job whether it is still running or has just finished.
    payload = {"rollout_id": 9, "router_url": stub.url, "benchmarks": [{"name": "words"}], "async": True,
               "request_id": "run-1/step-9"}
    job = httpx.post(f"{old.url}/evaluate", json=payload, headers=AUTH, timeout=10).json()
    deadline = time.monotonic() + 10
    while stub_requests(stub) == 0 and time.monotonic() < deadline:  # the old server is at it
        time.sleep(0.05)
    stopping = threading.Thread(target=old.stop)  # a graceful stop: it finishes its job first
    stopping.start()
    new = servers(create_app(load_config(write_config(tmp_path, model={"concurrency": 1})), token=TOKEN))
    assert httpx.get(f"{new.url}/status/{job['job_id']}", headers=AUTH,
                     timeout=10).json()["status"] in ("queued", "running")
    handed = httpx.post(f"{new.url}/evaluate", json={**payload, "async": False}, headers=AUTH, timeout=60)
    stopping.join(30)
    assert handed.status_code == 200
    body = handed.json()
    assert body["job_id"] == job["job_id"] and body["status"] == "completed"
    assert stub_requests(stub) == 10  # every prompt once: the new server started nothing


def test_a_job_stopped_by_the_deadline_is_partial_an_error_to_the_client_and_never_reused(tmp_path, servers):
    _, _, stub, server = start_pair(
        tmp_path,
        servers,
        StubSettings(seed=2, latency_secs=0.3),
        model={"concurrency": 1, "request_timeout_secs": 1.0, "max_retries": 0},
        server={"deadline_secs": 1.5},
    )
    response = evaluate(server, stub.url, "arith", rollout_id=5, timeout=30)
    body = response.json()
    assert response.status_code == 504 and body["status"] == "partial"
    evaluated = body["raw_metrics"]["arith"]["pass@1"]["num_entries"]
    assert 1 <= evaluated < 16
    assert (body["samples_scored"], body["samples_asked"]) == (evaluated, 16)
    assert "did not finish" in body["error"] and f"{int(evaluated)} of 16 samples scored" in body["error"]
    # slime's delegate client raises on it (raise_for_status) instead of logging partial numbers.
    payload = {"rollout_id": 5, "router_url": stub.url, "benchmarks": [{"name": "arith"}]}
    served = stub_requests(stub)
    with pytest.raises(httpx.HTTPStatusError):
        delegate(f"{server.url}/evaluate", payload, headers=AUTH, timeout_secs=30, max_retries=1)
    assert stub_requests(stub) > served  # the repeat evaluated again: a partial job is no cached result
    polled = httpx.get(f"{server.url}/status/{body['job_id']}", headers=AUTH, timeout=10).json()
    assert polled["status"] == "partial" and polled["error"] == body["error"]


def test_a_hung_model_server_fails_the_job_within_the_deadline(tmp_path, servers):
    _, _, stub, server = start_pair(
        tmp_path,
        servers,
        StubSettings(seed=2, latency_secs=60),
        model={"request_timeout_secs": 0.5, "max_retries": 1},
        server={"deadline_secs": 20},
    )
    response = evaluate(server, stub.url, "arith", rollout_id=5, timeout=60)
    body = response.json()
    assert response.status_code == 502 and body["status"] == "failed"
    assert "every model request failed" in body["error"] and "no answer within 0.5s" in body["error"]
    assert body["raw_metrics"] == {}


def test_retries_that_outlast_the_deadline_are_refused_in_the_config(tmp_path):
    from benchlab.errors import SpecError

    path = write_config(tmp_path, model={"request_timeout_secs": 600, "max_retries": 4})
    with pytest.raises(SpecError, match=r"model.request_timeout_secs.*5 tries of 600s.*3000s"):
        load_config(path)
    load_config(write_config(tmp_path, model={"request_timeout_secs": 600, "max_retries": 3}))
    assert load_config().model.worst_case_secs() <= load_config().server.deadline_secs


def test_a_model_server_that_ignores_n_gets_each_missing_sample_asked_for(tmp_path, servers):
    settings = StubSettings(seed=6, ignore_n=True)
    config, _, stub, server = start_pair(tmp_path, servers, settings)
    payload = {"rollout_id": 8, "router_url": stub.url,
               "benchmarks": [{"name": "words", "n_samples_per_eval_prompt": 4}]}
    body, _ = delegate(f"{server.url}/evaluate", payload, headers=AUTH, timeout_secs=60)
    assert body["status"] == "completed"
    run = body["runs"][0]
    assert (run["samples_scored"], run["samples_asked"], run["model_errors"]) == (40, 40, 0)
    assert body["raw_metrics"]["words"]["pass@1[avg-of-4]"]["accuracy"] == pytest.approx(
        expected_accuracy(config, "words", 4, settings)
    )
    assert stub_requests(stub) == 40  # one request of n=4 and three of n=1 per prompt


def test_flaky_model_endpoint_is_retried_to_the_same_metrics(tmp_path, servers):
    settings = StubSettings(seed=4, rate_429=0.2, rate_500=0.2)
    config, _, stub, server = start_pair(tmp_path, servers, settings,
                                         model={"max_retries": 12, "request_timeout_secs": 30})
    body = evaluate(server, stub.url, "words", rollout_id=6, timeout=60).json()
    stats = httpx.get(f"{stub.url}/stats", timeout=5).json()
    assert stats["failures_injected"] > 0
    assert body["runs"][0]["model_errors"] == 0
    assert body["raw_metrics"]["words"]["pass@1"]["accuracy"] == pytest.approx(
        expected_accuracy(config, "words", 1, settings)
    )


def test_evaluations_over_the_running_cap_get_429_until_one_finishes(tmp_path, servers):
    _, _, stub, server = start_pair(
        tmp_path,
        servers,
        StubSettings(seed=0, latency_secs=0.3),
        server={"max_running_jobs": 1},
        model={"concurrency": 4},
    )
    first = {
        "rollout_id": 1,
        "router_url": stub.url,
        "benchmarks": [{"name": "mcq"}],
        "async": True,
    }
    job = httpx.post(f"{server.url}/evaluate", json=first, headers=AUTH, timeout=10).json()
    busy = httpx.post(
        f"{server.url}/evaluate", json={**first, "rollout_id": 2}, headers=AUTH, timeout=10
    )
    assert busy.status_code == 429 and "max_running_jobs" in busy.json()["error"]
    # The same request again is not a new evaluation: it joins the running one.
    again = httpx.post(f"{server.url}/evaluate", json=first, headers=AUTH, timeout=10).json()
    assert again["job_id"] == job["job_id"]
    done = httpx.post(
        f"{server.url}/evaluate", json={**first, "async": False}, headers=AUTH, timeout=30
    )
    assert done.json()["status"] == "completed"
    later = httpx.post(
        f"{server.url}/evaluate", json={**first, "rollout_id": 2}, headers=AUTH, timeout=30
    )
    assert later.status_code == 202


def test_a_model_slower_than_the_request_timeout_is_retried_then_reported(tmp_path, servers):
    # benchlab's own count of tries is what the user reads. The stub counts a request only when its
    # handler starts, and on a loaded machine a retry can time out before that (both servers share
    # this process): it sees every first try, and up to every second one.
    _, _, stub, server = start_pair(
        tmp_path,
        servers,
        StubSettings(seed=0, latency_secs=3.0),
        model={"request_timeout_secs": 1.0, "max_retries": 1},
    )
    response = evaluate(server, stub.url, "mcq", rollout_id=1, timeout=30)
    assert response.status_code == 502
    assert "failed after 2 tries: no answer within 1s" in response.json()["error"]
    assert 10 <= stub_requests(stub) <= 2 * 10


def test_an_unreachable_router_fails_the_job_with_a_json_error(tmp_path, servers):
    _, _, _, server = start_pair(tmp_path, servers, model={"max_retries": 1})
    response = evaluate(server, f"http://127.0.0.1:{free_port()}", "mcq", rollout_id=8, timeout=30)
    assert response.status_code == 502
    assert (
        response.json()["status"] == "failed"
        and "every model request failed" in response.json()["error"]
    )


def test_request_defaults_fill_what_a_benchmark_leaves_out(tmp_path, servers):
    config, _, stub, server = start_pair(tmp_path, servers)
    payload = {
        "rollout_id": 11,
        "router_url": stub.url,
        # NeMo-Skills' precedence: the benchmark's own field, then the request's defaults,
        # then the benchmark config's defaults (mcq's config sets no top_p: none is sent).
        "defaults": {"temperature": 0.3, "max_response_len": 77, "n_samples_per_eval_prompt": 2},
        "benchmarks": [{"name": "mcq", "temperature": 0.9}, {"name": "words"}],
    }
    body, _ = delegate(f"{server.url}/evaluate", payload, headers=AUTH)
    sampling = {run["benchmark"]: run["sampling"] for run in body["runs"]}
    assert sampling["mcq"] == {"n": 2, "temperature": 0.9, "max_tokens": 77}
    assert sampling["words"] == {"n": 2, "temperature": 0.3, "max_tokens": 77}
    seen = httpx.get(f"{stub.url}/stats", timeout=5).json()["sampling"]
    assert {(s["temperature"], s["max_tokens"], s["n"]) for s in seen} == {(0.9, 77, 2), (0.3, 77, 2)}
    # The defaults are part of what defines the job: other defaults are another evaluation.
    again, _ = delegate(
        f"{server.url}/evaluate", {**payload, "defaults": {"temperature": 0.4}}, headers=AUTH
    )
    assert again["job_id"] != body["job_id"]
    assert {r["benchmark"]: r["sampling"]["temperature"] for r in again["runs"]} == {"mcq": 0.9, "words": 0.4}


def test_a_model_servers_error_reaches_the_client_and_only_set_sampling_fields_are_sent(tmp_path, servers):
    _, _, stub, server = start_pair(tmp_path, servers, StubSettings(seed=1, strict_fields=True))
    payload = {"rollout_id": 11, "router_url": stub.url, "benchmarks": [{"name": "words", "top_k": 40}]}
    refused = httpx.post(f"{server.url}/evaluate", json=payload, headers=AUTH, timeout=60)
    assert refused.status_code == 502
    assert "HTTP 422: Unexpected fields {'top_k'}" in refused.json()["error"]
    payload["benchmarks"] = [{"name": "words"}]
    done = httpx.post(f"{server.url}/evaluate", json=payload, headers=AUTH, timeout=60)
    assert done.status_code == 200 and done.json()["status"] == "completed"
    sent = httpx.get(f"{stub.url}/stats", timeout=5).json()["sampling"]
    # The words benchmark sets no top_p or top_k: neither is sent, the server's defaults hold.
    assert sent and all(set(s) == {"model", "n", "temperature", "max_tokens"} for s in sent), sent


def test_requests_without_the_token_are_refused(tmp_path, servers):
    _, _, stub, server = start_pair(tmp_path, servers)
    payload = {"rollout_id": 1, "router_url": stub.url, "benchmarks": [{"name": "mcq"}]}
    for headers in ({}, {"Authorization": "Bearer nope"}, {"Authorization": TOKEN}):
        r = httpx.post(f"{server.url}/evaluate", json=payload, headers=headers, timeout=10)
        assert r.status_code == 401 and "bearer token" in r.json()["error"]
    assert httpx.get(f"{server.url}/benchmarks", timeout=10).status_code == 401
    assert stub_requests(stub) == 0


def test_bad_requests_get_json_errors_without_server_paths(tmp_path, servers):
    config, _, stub, server = start_pair(tmp_path, servers)
    url = f"{server.url}/evaluate"

    def post(body: Any, **kw: Any) -> httpx.Response:
        return httpx.post(url, headers=AUTH, timeout=10, json=body, **kw)

    base = {"rollout_id": 1, "router_url": stub.url}
    cases = {
        "unknown": post({**base, "benchmarks": [{"name": "aime99"}]}),
        "bad_name": post({**base, "benchmarks": [{"name": "../etc/passwd"}]}),
        "too_many_samples": post(
            {**base, "benchmarks": [{"name": "mcq", "n_samples_per_eval_prompt": 65}]}
        ),
        "too_long": post({**base, "benchmarks": [{"name": "mcq", "max_response_len": 10**6}]}),
        "foreign_router": post(
            {**base, "router_url": "http://169.254.169.254", "benchmarks": [{"name": "mcq"}]}
        ),
        "no_benchmarks": post({**base, "benchmarks": []}),
        "twice": post({**base, "benchmarks": [{"name": "mcq"}, {"name": "mcq", "top_k": 5}]}),
        "not_json": httpx.post(
            url, headers={**AUTH, "content-type": "application/json"}, content=b"{nope", timeout=10
        ),
    }
    # 403: the server will not call that host; 409: one benchmark asked for twice; 400 the rest.
    expected = {"foreign_router": 403, "twice": 409}
    for name, r in cases.items():
        assert r.status_code == expected.get(name, 400), name
        error = r.json()["error"]
        assert str(tmp_path) not in error and "Traceback" not in error, name
    assert "known: arith, instruct, mcq, pyfunc, words" in cases["unknown"].json()["error"]
    assert "allowlist" in cases["foreign_router"].json()["error"]
    # A body without a JSON content type (as `curl -d` sends it) gets a hint.
    form = httpx.post(url, headers=AUTH, timeout=10, content=b'{"rollout_id": 1}')
    assert form.status_code == 400 and "Content-Type: application/json" in form.json()["error"]
    big = httpx.post(
        url,
        headers={**AUTH, "content-type": "application/json"},
        timeout=10,
        content=json.dumps({**base, "benchmarks": [{"name": "mcq", "pad": "x" * 70000}]}),
    )
    assert big.status_code == 413 and "error" in big.json()

    def chunks(total: int, name: str = "mcq"):
        body = json.dumps({**base, "benchmarks": [{"name": name, "pad": "x" * total}]}).encode()
        for i in range(0, len(body), 4096):
            yield body[i : i + 4096]

    headers = {**AUTH, "content-type": "application/json"}
    streamed = httpx.post(url, headers=headers, timeout=10, content=chunks(70000))
    assert streamed.status_code == 413 and "error" in streamed.json()
    # A small streamed body is read whole: the unknown name inside it is found.
    small = httpx.post(url, headers=headers, timeout=10, content=chunks(10, name="nope"))
    assert small.status_code == 400 and "unknown benchmark 'nope'" in small.json()["error"]
    missing = httpx.get(f"{server.url}/status/{'0' * 32}", headers=AUTH, timeout=10)
    assert missing.status_code == 404 and "error" in missing.json()
    assert stub_requests(stub) == 0


def test_hostile_code_from_the_model_is_scored_failed_and_the_server_lives_on(tmp_path, servers):
    escaped = str(tmp_path / "escaped")
    hostile = [
        "while True:\n    pass",
        "import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass",
        "x = [bytearray(2**26) for _ in range(10**4)]",
        # stderr: the harness sends the answer's stdout to /dev/null, so a flood there is only slow.
        "import sys\nfor _ in range(2**14):\n    sys.stderr.write('y' * 2**16)",
        "import os\nassert 'BENCHLAB_EVAL_TOKEN' in os.environ or 'HOME' in os.environ",
    ]
    if (
        os.geteuid() == 0
    ):  # without root the program shares the server's uid and files (see the docs)
        hostile.append(
            f"open({escaped!r}, 'w').write('x')\nimport os\nassert os.path.exists({escaped!r})"
        )
    dataset = tmp_path / "hostile.jsonl"
    dataset.write_text(
        "".join(
            json.dumps(
                {"id": f"h{i}", "question": f"task {i}", "tests": "assert True", "reference": code}
            )
            + "\n"
            for i, code in enumerate(hostile)
        )
    )
    extra = {"hostile": {"dataset": str(dataset), "scorer": "code", "prompt": "{{ question }}"}}
    _, _, stub, server = start_pair(
        tmp_path,
        servers,
        StubSettings(seed=0, p_correct=1.0, p_no_answer=0.0),
        benchmarks_extra=extra,
        sandbox={"concurrency": 3},
    )
    body = evaluate(server, stub.url, "hostile", rollout_id=1, timeout=90).json()
    assert body["raw_metrics"]["hostile"]["pass@1"] == {
        "accuracy": 0.0,
        "no_answer": 0.0,
        "num_entries": float(len(hostile)),
    }
    assert not (tmp_path / "escaped").exists()
    assert httpx.get(f"{server.url}/health", timeout=5).json()["status"] == "ok"
    # ... and it still scores honest code.
    body = evaluate(server, stub.url, "pyfunc", rollout_id=2, timeout=90).json()
    assert body["raw_metrics"]["pyfunc"]["pass@1"]["accuracy"] == 1.0


def test_a_broken_dataset_stops_the_server_from_starting(tmp_path):
    from benchlab.errors import DataError

    broken = tmp_path / "broken.jsonl"
    broken.write_text('{"id": "a", "question": "q", "answer": "1"}\n{"id": "b", "question": \n')
    extra = {"broken": {"dataset": str(broken), "scorer": "math", "prompt": "{{ question }}"}}
    config = load_config(write_config(tmp_path, benchmarks_extra=extra))
    with pytest.raises(DataError, match=r"broken.jsonl:2: not valid JSON"):
        create_app(config, token=TOKEN)


def test_a_dataset_broken_while_serving_fails_the_job_without_naming_server_files(
    tmp_path, servers
):
    dataset = tmp_path / "mine.jsonl"
    dataset.write_text('{"id": "a", "question": "q", "answer": "1"}\n')
    extra = {"mine": {"dataset": str(dataset), "scorer": "math", "prompt": "{{ question }}"}}
    _, _, stub, server = start_pair(tmp_path, servers, benchmarks_extra=extra)
    dataset.write_text('{"id": "a", "question": "q", "answer": "1"}\nnot json\n')
    response = evaluate(server, stub.url, "mine", rollout_id=1, timeout=30)
    assert response.status_code == 502
    assert "could not be read" in response.json()["error"] and str(tmp_path) not in response.text


def test_a_broken_sandbox_stops_the_start_only_when_code_benchmarks_need_it(tmp_path):
    from benchlab.errors import EvaluationError

    sandbox = {"python": str(tmp_path / "no-such-python")}
    with pytest.raises(EvaluationError, match="set sandbox.python"):
        create_app(load_config(write_config(tmp_path, sandbox=sandbox)), token=TOKEN)
    config = load_config(write_config(tmp_path, sandbox=sandbox))
    config.benchmarks = {k: v for k, v in config.benchmarks.items() if v.scorer != "code"}
    app = create_app(config, token=TOKEN)
    assert any("no code sandbox" in w for w in app.state.bench.warnings)
