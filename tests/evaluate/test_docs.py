"""The examples of docs/evaluation-service.md run: its config loads, its request is answered as shown."""

from __future__ import annotations

import json
import re
from pathlib import Path

import httpx
import pytest
import yaml
from evalsvc_testkit import TOKEN, server_pool

from benchlab.evaluate.config import load_config
from benchlab.evaluate.server import create_app
from benchlab.evaluate.stub import StubSettings, create_stub_app

DOC = Path(__file__).resolve().parents[2] / "docs" / "evaluation-service.md"


@pytest.fixture
def servers():
    yield from server_pool()


def example(name: str) -> str:
    """The fenced block that follows ``<!-- example: NAME -->`` in the doc."""
    match = re.search(
        rf"<!-- example: {re.escape(name)} -->\s*```\w*\n(.*?)```", DOC.read_text(), re.DOTALL
    )
    assert match, f"no example {name!r} in {DOC.name}"
    return match.group(1)


def write_doc_world(tmp_path: Path) -> Path:
    config = yaml.safe_load(example("config"))
    config["server"]["state_dir"] = str(tmp_path / "state")  # the doc's /var/lib path is not ours
    (tmp_path / "my_math.jsonl").write_text(example("dataset my_math.jsonl"))
    path = tmp_path / "eval.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


def test_the_documented_config_and_dataset_load(tmp_path):
    config = load_config(write_doc_world(tmp_path))
    bench = config.benchmarks["my-math"]
    assert bench.scorer == "math" and bench.defaults.n_samples_per_eval_prompt == 4
    assert config.server.max_samples_per_prompt == 64
    assert "slime-main" in config.server.allowed_router_hosts


@pytest.mark.slow
def test_the_documented_request_gets_the_documented_response_shape(tmp_path, servers):
    config = load_config(write_doc_world(tmp_path))
    stub = servers(create_stub_app(config, StubSettings(seed=0)))
    server = servers(create_app(config, token=TOKEN))
    request = json.loads(example("request"))
    request["router_url"] = stub.url
    response = httpx.post(
        f"{server.url}/evaluate",
        json=request,
        headers={"Authorization": f"Bearer {TOKEN}"},
        timeout=60,
    )
    assert response.status_code == 200
    body, documented = response.json(), json.loads(example("response"))
    assert set(body) == set(documented)
    assert set(body["raw_metrics"]["my-math"]) == set(documented["raw_metrics"]["my-math"])
    assert set(body["runs"][0]) == set(documented["runs"][0])
    assert body["runs"][0]["sampling"] == documented["runs"][0]["sampling"]
    assert body["raw_metrics"]["my-math"]["pass@1[avg-of-4]"]["num_entries"] == 2.0


def test_the_documented_judge_config_loads(tmp_path, monkeypatch):
    from benchlab.evaluate.config import DEFAULT_CONFIG

    config = yaml.safe_load(example("judge config"))
    for name in ("arena", "hle"):
        (tmp_path / f"{name}.jsonl").write_text((DEFAULT_CONFIG.parent / f"{name}.jsonl").read_text())
    path = tmp_path / "eval.yaml"
    path.write_text(yaml.safe_dump(config))
    loaded = load_config(path)
    assert loaded.judge is not None and loaded.judge.url == "http://127.0.0.1:30001"
    assert loaded.benchmarks["arena"].judge.mode == "pairwise"
    assert "<correct_answer>" in loaded.benchmarks["hle"].judge.prompt
    from benchlab.evaluate.datasets import load_items

    assert len(load_items(loaded.benchmarks["hle"])) == 8
