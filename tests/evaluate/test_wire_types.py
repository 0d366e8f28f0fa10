"""The evaluation service's bodies are typed records, and the JSON they stand for is what it was:
the job ledger's stored request, /health, /benchmarks, the stub's answers and the OpenAPI document."""

from __future__ import annotations

import ast
import hashlib
import json
import re
import sqlite3
from pathlib import Path

import httpx
import pytest
import yaml
from evalsvc_testkit import TOKEN, server_pool, write_config

import benchlab
from benchlab.evaluate.config import load_config
from benchlab.evaluate.datasets import benchmark_digest
from benchlab.evaluate.jobs import JobStatus, JobStore
from benchlab.evaluate.model import Sampling
from benchlab.evaluate.protocol import EvaluateRequest, evaluation_key, resolve_runs

PACKAGE = Path(benchlab.__file__).parent
# The modules whose signatures carry the service's bodies, items and result files.
TYPED_MODULES = [*sorted((PACKAGE / "evaluate").glob("*.py")), PACKAGE / "evalrules.py",
                 PACKAGE / "collect" / "lm_eval.py"]
UNTYPED = re.compile(r"\b[Dd]ict\[str, Any\]")


def test_no_public_function_of_the_evaluation_service_passes_an_untyped_dict():
    found = []
    for path in TYPED_MODULES:
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) or node.name.startswith("_"):
                continue
            args = node.args
            params = [*args.posonlyargs, *args.args, *args.kwonlyargs, args.vararg, args.kwarg]
            annotations = [p.annotation for p in params if p is not None and p.annotation is not None]
            if node.returns is not None:
                annotations.append(node.returns)
            if any(UNTYPED.search(ast.unparse(a)) for a in annotations):
                found.append(f"{path.relative_to(PACKAGE)}:{node.lineno} {node.name}")
    assert found == []


# The jobs table as the server created it before a job had an owner and a heartbeat.
OLD_JOBS_TABLE = """
CREATE TABLE jobs (
    job_id TEXT PRIMARY KEY, request_key TEXT NOT NULL, status TEXT NOT NULL, request TEXT NOT NULL,
    result TEXT, error TEXT, created REAL NOT NULL, finished REAL, model_identity TEXT
)
"""


def test_a_job_stored_by_an_earlier_server_reads_back_as_its_request(tmp_path):
    path = tmp_path / "jobs.sqlite"
    with sqlite3.connect(path) as db:
        db.execute(OLD_JOBS_TABLE)
        db.execute(
            "INSERT INTO jobs VALUES ('a' || hex(zeroblob(15)), 'k', 'completed', ?, ?, NULL, 1.0, 2.0, 'm')",
            ('{"rollout_id": 12, "router_url": "http://127.0.0.1:30000", "benchmarks": [{"name": "arith", '
             '"temperature": 0.5}, {"name": "words"}], "defaults": {"n_samples_per_eval_prompt": 4}}',
             '{"job_id": "x", "status": "completed", "raw_metrics": {}}'),
        )
    store = JobStore(path)
    job = store.get("a" + "00" * 15)
    store.close()
    assert job is not None and job.status == JobStatus.COMPLETED
    request = job.request
    assert (request.rollout_id, request.router_url) == (12, "http://127.0.0.1:30000")
    assert [(b.name, b.temperature) for b in request.benchmarks] == [("arith", 0.5), ("words", None)]
    assert request.defaults is not None and request.defaults.n_samples_per_eval_prompt == 4
    assert request.run_async is False
    assert job.result == {"job_id": "x", "status": "completed", "raw_metrics": {}}


def test_a_new_job_stores_the_request_with_the_keys_it_always_had(tmp_path):
    # What the ledger held for this request before requests were typed: the client's fields
    # without "async" and without those left out, in the models' order (a benchmark's sampling
    # fields, which it shares with "defaults", come before its name).
    stored_before = ('{"rollout_id": 3, "router_url": "http://localhost:8000", '
                     '"benchmarks": [{"top_k": 20, "name": "arith"}]}')
    request = EvaluateRequest.model_validate(
        {"async": True, "benchmarks": [{"top_k": 20, "name": "arith"}], "router_url": "http://localhost:8000",
         "rollout_id": 3}
    )
    store = JobStore(tmp_path / "jobs.sqlite")
    job = store.create("key", request, "model-hash")
    again = store.get(job.job_id)
    store.close()
    with sqlite3.connect(tmp_path / "jobs.sqlite") as db:
        (raw,) = db.execute("SELECT request FROM jobs WHERE job_id = ?", (job.job_id,)).fetchone()
    assert raw == stored_before
    assert again is not None and again.request.benchmarks[0].top_k == 20 and again.request.run_async is False


def test_the_evaluation_key_hashes_the_same_fields_as_before(tmp_path):
    config = load_config(write_config(tmp_path))
    request = EvaluateRequest.model_validate(
        {"rollout_id": 5, "router_url": "http://127.0.0.1:1", "benchmarks": [{"name": "arith", "top_p": 0.9}]}
    )
    runs = resolve_runs(config, request)
    digest = benchmark_digest(config.benchmarks["arith"])
    # Written out by hand: the canonical JSON (sorted keys, no spaces) of what defines the evaluation.
    canonical = ('{"benchmarks":[{"data":"' + digest + '","name":"arith","sampling":{"max_tokens":1024,"n":1,'
                 '"temperature":0.0,"top_p":0.9}}],"model":"default","rollout_id":5,"router_url":"http://127.0.0.1:1"}')
    assert evaluation_key(request, runs, "default") == hashlib.sha256(canonical.encode()).hexdigest()


def test_sampling_sends_only_the_fields_that_are_set():
    assert Sampling(2, 0.0, None, -1, 64).body() == {"n": 2, "temperature": 0.0, "max_tokens": 64}
    assert Sampling(1, None, 0.5, 7, 8).body() == {"n": 1, "top_p": 0.5, "max_tokens": 8, "top_k": 7}


@pytest.fixture
def servers():
    yield from server_pool()


def _one_benchmark_config(tmp_path: Path) -> Path:
    dataset = tmp_path / "sums.jsonl"
    dataset.write_text('{"id": "a", "question": "1+1", "answer": "2"}\n{"id": "b", "question": "2+2", "answer": "4"}\n')
    path = write_config(tmp_path)
    data = yaml.safe_load(path.read_text())
    data["benchmarks"] = {"sums": {"description": "Two sums.", "dataset": str(dataset), "scorer": "exact",
                                   "api": "completions", "prompt": "{{ question }} =",
                                   "defaults": {"temperature": 0.5, "max_response_len": 256}}}
    path.write_text(yaml.safe_dump(data))
    return path


@pytest.mark.slow
def test_health_and_benchmarks_answer_the_same_json_and_document_it(tmp_path, servers):
    from benchlab.evaluate.server import create_app

    server = servers(create_app(load_config(_one_benchmark_config(tmp_path)), token=TOKEN))
    listed = httpx.get(f"{server.url}/benchmarks", headers={"Authorization": f"Bearer {TOKEN}"}, timeout=10)
    assert listed.json() == {"benchmarks": [{
        "name": "sums", "scorer": "exact", "api": "completions", "num_prompts": 2, "description": "Two sums.",
        "defaults": {"n_samples_per_eval_prompt": 1, "temperature": 0.5, "top_p": 1.0, "top_k": -1,
                     "max_response_len": 256},
    }]}
    defaults = listed.json()["benchmarks"][0]["defaults"]
    assert [type(defaults[k]) for k in ("n_samples_per_eval_prompt", "top_k", "top_p")] == [int, int, float]
    health = httpx.get(f"{server.url}/health", timeout=10).json()
    assert set(health) == {"status", "sandbox", "auth", "warnings"}
    assert (health["status"], health["auth"]) == ("ok", True) and isinstance(health["sandbox"], dict)

    document = httpx.get(f"{server.url}/openapi.json", headers={"Authorization": f"Bearer {TOKEN}"},
                         timeout=10).json()
    schemas = document["components"]["schemas"]

    def body_schema(path: str) -> dict:
        return document["paths"][path]["get"]["responses"]["200"]["content"]["application/json"]["schema"]

    assert body_schema("/health") == {"$ref": "#/components/schemas/HealthBody"}
    assert body_schema("/benchmarks") == {"$ref": "#/components/schemas/BenchmarksBody"}
    assert set(schemas["HealthBody"]["required"]) == set(health)
    assert set(schemas["BenchmarkInfo"]["required"]) == set(listed.json()["benchmarks"][0])


@pytest.mark.slow
def test_the_stub_answers_openai_shaped_bodies_and_counts_sampling_as_sent(tmp_path, servers):
    from benchlab.evaluate.stub import create_stub_app

    stub = servers(create_stub_app(load_config(_one_benchmark_config(tmp_path)), model="ckpt-1"))
    assert httpx.get(f"{stub.url}/v1/models", timeout=10).json() == {
        "object": "list", "data": [{"id": "ckpt-1", "object": "model"}]}
    chat = httpx.post(f"{stub.url}/v1/chat/completions", timeout=10, json={
        "model": "ckpt-1", "n": 2, "temperature": 0, "max_tokens": 5,
        "messages": [{"role": "system", "content": "be brief"}, {"role": "user", "content": "hello"}]}).json()
    assert (chat["object"], chat["model"], chat["id"]) == ("chat.completion", "ckpt-1", "chatcmpl-1")
    assert chat["choices"] == [
        {"index": i, "message": {"role": "assistant", "content": "I do not know."}, "finish_reason": "stop"}
        for i in range(2)]
    text = httpx.post(f"{stub.url}/v1/completions", timeout=10,
                      json={"model": "ckpt-1", "prompt": "1+1 =", "temperature": 0.5}).json()
    assert text["object"] == "text_completion" and [set(c) for c in text["choices"]] == [
        {"index", "text", "finish_reason"}]
    stats = httpx.get(f"{stub.url}/stats", timeout=10)
    # The temperature comes back as it was sent, 0 and not 0.0.
    assert '{"max_tokens":5,"model":"ckpt-1","n":2,"temperature":0}' in stats.text
    assert json.loads(stats.text) == {
        "requests": 2, "judge_requests": 0, "judge_malformed": 0, "failures_injected": 0,
        "sampling": [{"max_tokens": 5, "model": "ckpt-1", "n": 2, "temperature": 0},
                     {"model": "ckpt-1", "temperature": 0.5}],
        "distinct_prompts": 2,
    }


def test_an_lm_eval_results_file_flattens_into_typed_metrics_and_provenance(tmp_path):
    from benchlab.collect.lm_eval import LmEvalProvenance, flatten, read_results

    path = tmp_path / "results_2024-05-01T10-00-00.json"
    path.write_text(json.dumps({
        "results": {"gsm8k": {"alias": "gsm8k", "exact_match,strict-match": 0.25,
                              "exact_match_stderr,strict-match": "N/A"}},
        "n-samples": {"gsm8k": {"effective": 40, "original": 1319}},
        "config": {"model": "hf", "model_args": "pretrained=tiny", "limit": 40, "random_seed": 0, "batch_size": 8},
        "lm_eval_version": "0.4.8", "date": 1714557600.0,
    }))
    found = flatten(read_results(path))
    assert found.values["gsm8k/exact_match,strict-match"] == 0.25
    assert set(found.values) == {"gsm8k/exact_match,strict-match", "gsm8k/exact_match_stderr,strict-match"}
    assert found.partial == {"gsm8k": (40, 1319)}
    provenance = found.provenance
    assert set(provenance) <= set(LmEvalProvenance.__annotations__)
    assert provenance["run_config"] == {"random_seed": 0, "batch_size": 8, "gen_kwargs": None}
    assert provenance["partial"] == {"gsm8k": {"effective": 40, "original": 1319}}
    assert (provenance["model"], provenance["model_args"], provenance["lm_eval_version"]) == (
        "hf", "pretrained=tiny", "0.4.8")
