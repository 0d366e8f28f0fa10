"""The slime delegate workflow (seeds/002) end to end: `benchlab serve` started as a user starts it,
an OpenAI-compatible model (benchlab's stub, as its own process), and a trainer's evaluation
requests sent the way slime's delegate client sends them (POST, block, re-send the whole request on
any error); then the server is restarted and the same body is sent again. slime's body names no
request, so it is evaluated again (the weights behind a fixed model name may have changed: no
result is reused on the router's word); a body with a ``request_id`` gets its finished job back as
it was, and the model is not asked again."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from journeys.journey_kit import SRC, wait_for

sys.path.insert(0, str(Path(__file__).parents[1] / "evaluate"))
from evalsvc_testkit import TOKEN, free_port, write_config  # noqa: E402

pytestmark = pytest.mark.slow

AUTH = {"Authorization": f"Bearer {TOKEN}"}


def slime_delegate(url: str, payload: dict[str, Any], *, timeout_secs: float = 120,
                   max_retries: int = 3) -> tuple[dict[str, Any], int]:
    """slime's delegate client: POST and wait; on any error wait min(2^attempt, 30) s and re-send."""
    for attempt in range(1, max_retries + 1):
        try:
            response = httpx.post(url, json=payload, headers=AUTH, timeout=timeout_secs)
            response.raise_for_status()
            return response.json(), attempt
        except httpx.HTTPError:
            if attempt == max_retries:
                raise
            time.sleep(min(2**attempt, 30))
    raise AssertionError("unreachable")


def _spawn(root: Path, *args: str) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": SRC + os.pathsep + os.environ.get("PYTHONPATH", ""),
           "BENCHLAB_EVAL_TOKEN": TOKEN}
    with open(root / f"{args[0]}.log", "a") as log:  # what it says, for a failing test's reader
        return subprocess.Popen([sys.executable, "-m", *args], cwd=root, env=env, text=True,
                                stdout=log, stderr=subprocess.STDOUT)


def _up(url: str) -> bool:
    try:
        return httpx.get(url, headers=AUTH, timeout=2).status_code == 200
    except httpx.HTTPError:
        return False


def _stop(proc: subprocess.Popen[str]) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def _right_share(config_path: Path, benchmark: str, seed: int, n: int) -> float:
    """The share of right answers the stub was told to give (its seeded plan), by hand."""
    from benchlab.evaluate.config import load_config
    from benchlab.evaluate.datasets import load_items
    from benchlab.evaluate.stub import StubSettings, plan

    settings = StubSettings(seed=seed)
    items = load_items(load_config(config_path).benchmarks[benchmark])
    right = sum(plan(seed, it.id, i, settings.p_correct, settings.p_no_answer) == "correct"
                for it in items for i in range(n))
    return right / (len(items) * n)


def test_slime_delegate_journey(tmp_path):
    config = write_config(tmp_path)
    model_port, port = free_port(), free_port()
    model = _spawn(tmp_path, "benchlab.evaluate.stub", "--port", str(model_port), "--config", str(config),
                   "--seed", "3")
    serve_args = ("benchlab", "serve", "--config", str(config), "--port", str(port), "--log-level", "warning")
    server = _spawn(tmp_path, *serve_args)
    base, model_url = f"http://127.0.0.1:{port}", f"http://127.0.0.1:{model_port}"
    try:
        wait_for(lambda: _up(f"{model_url}/stats") and _up(f"{base}/health"), within=120)
        payload = {"rollout_id": 40, "router_url": model_url,
                   "benchmarks": [{"name": "arith", "n_samples_per_eval_prompt": 2, "temperature": 0.6},
                                  {"name": "mcq"}]}
        body, tries = slime_delegate(f"{base}/evaluate", payload)
        assert tries == 1 and body["status"] == "completed"
        raw = body["raw_metrics"]
        assert raw["arith"]["pass@1[avg-of-2]"]["accuracy"] == pytest.approx(_right_share(config, "arith", 3, 2))
        assert raw["mcq"]["pass@1"]["accuracy"] == pytest.approx(_right_share(config, "mcq", 3, 1))
        asked = httpx.get(f"{model_url}/stats", timeout=5).json()["requests"]

        # A trainer that names its request: sent again, it gets the same job.
        named = {**payload, "rollout_id": 41, "request_id": "journey/rollout-41"}
        first, _ = slime_delegate(f"{base}/evaluate", named)
        assert httpx.get(f"{model_url}/stats", timeout=5).json()["requests"] == 2 * asked

        # The evaluation server restarts (a deploy, a crash); the trainer re-sends its requests.
        _stop(server)
        server = _spawn(tmp_path, *serve_args)
        wait_for(lambda: _up(f"{base}/health"), within=120)
        again, tries = slime_delegate(f"{base}/evaluate", named)
        assert tries == 1 and again["job_id"] == first["job_id"] and again["raw_metrics"] == first["raw_metrics"]
        assert httpx.get(f"{model_url}/stats", timeout=5).json()["requests"] == 2 * asked  # nothing asked again
        # slime's own body names no request: evaluated again, the same numbers from the same model.
        resent, _ = slime_delegate(f"{base}/evaluate", payload)
        assert resent["job_id"] != body["job_id"] and resent["raw_metrics"] == raw
        assert httpx.get(f"{model_url}/stats", timeout=5).json()["requests"] == 3 * asked
    finally:
        _stop(server)
        _stop(model)
