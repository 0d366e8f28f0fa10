"""A result is never served for another model: a finished evaluation is handed out again only to
the same request, one with the same ``request_id`` and the same body; anything else is evaluated.

Real servers on 127.0.0.1: the evaluation server and the stub model (restarted on the same port
with other answers under the same model name, as a router serving one fixed id does when the
trainer updates the weights in place).
"""

from __future__ import annotations

import httpx
import pytest
from evalsvc_testkit import TOKEN, ServerThread, free_port, server_pool, write_config

from benchlab.evaluate.config import load_config
from benchlab.evaluate.server import create_app
from benchlab.evaluate.stub import StubSettings, create_stub_app

AUTH = {"Authorization": f"Bearer {TOKEN}"}


@pytest.fixture
def servers():
    yield from server_pool()


def _requests(stub: ServerThread) -> int:
    return httpx.get(f"{stub.url}/stats", timeout=5).json()["requests"]


def _post(server: ServerThread, payload: dict) -> httpx.Response:
    return httpx.post(f"{server.url}/evaluate", json=payload, headers=AUTH, timeout=60)


@pytest.mark.slow
def test_a_model_updated_in_place_under_the_same_name_is_evaluated_again(tmp_path, servers):
    config = load_config(write_config(tmp_path))  # the shipped defaults: no reuse across requests
    port = free_port()
    step_n = ServerThread(create_stub_app(config, StubSettings(seed=5, p_correct=1.0, p_no_answer=0.0)),
                          port=port).start()
    server = servers(create_app(config, token=TOKEN))
    payload = {"rollout_id": 0, "router_url": step_n.url, "benchmarks": [{"name": "mcq"}]}
    try:
        first = _post(server, payload).json()
    finally:
        step_n.stop()
    # The same router, the same model id ("default"), new weights that answer every question wrong.
    step_n1 = ServerThread(create_stub_app(config, StubSettings(seed=5, p_correct=0.0, p_no_answer=0.0)),
                           port=port).start()
    try:
        second = _post(server, payload).json()
        assert _requests(step_n1) == 10  # every prompt asked of the new weights
    finally:
        step_n1.stop()
    assert first["raw_metrics"]["mcq"]["pass@1"]["accuracy"] == 1.0
    assert second["raw_metrics"]["mcq"]["pass@1"]["accuracy"] == 0.0
    assert second["job_id"] != first["job_id"]


@pytest.mark.slow
def test_the_same_request_id_and_body_get_the_same_job_and_another_body_409(tmp_path, servers):
    config = load_config(write_config(tmp_path))
    stub = servers(create_stub_app(config, StubSettings(seed=5)))
    server = servers(create_app(config, token=TOKEN))
    payload = {"request_id": "run-7/step-120", "rollout_id": 120, "router_url": stub.url,
               "benchmarks": [{"name": "mcq", "temperature": 1}]}
    first = _post(server, payload)
    assert first.status_code == 200 and _requests(stub) == 10
    # A retry: the same id and body, its keys in another order and 1 spelt 1.0.
    retry = _post(server, {"benchmarks": [{"temperature": 1.0, "name": "mcq"}], "router_url": stub.url,
                           "rollout_id": 120, "request_id": "run-7/step-120"})
    assert retry.status_code == 200 and retry.json() == first.json() and _requests(stub) == 10
    # The same id with another body is refused, naming the field; nothing is evaluated.
    conflict = _post(server, {**payload, "benchmarks": [{"name": "mcq", "temperature": 0.7}]})
    assert conflict.status_code == 409
    assert conflict.json()["detail"].startswith("request_id: 'run-7/step-120' was sent before with another body")
    assert _requests(stub) == 10
    # Another id is another request, and so is the same body with no id at all.
    assert _post(server, {**payload, "request_id": "run-7/step-121"}).json()["job_id"] != first.json()["job_id"]
    assert _requests(stub) == 20
    without = {k: v for k, v in payload.items() if k != "request_id"}
    assert _post(server, without).json()["job_id"] != first.json()["job_id"]
    assert _requests(stub) == 30


def test_the_body_hash_ignores_async_spelling_and_order_but_not_a_field_sent():
    from benchlab.evaluate.protocol import EvaluateRequest, body_hash

    base = {"rollout_id": 1, "router_url": "http://127.0.0.1:1", "benchmarks": [{"name": "a", "temperature": 1}]}
    same = {"async": True, "benchmarks": [{"temperature": 1.0, "name": "a"}], "router_url": "http://127.0.0.1:1",
            "rollout_id": 1, "request_id": "x"}
    other = {**base, "benchmarks": [{"name": "a", "temperature": 1, "top_p": 1.0}]}
    digest = body_hash(EvaluateRequest.model_validate(base))
    assert body_hash(EvaluateRequest.model_validate(same)) == digest
    assert body_hash(EvaluateRequest.model_validate(other)) != digest
