"""`benchlab serve` and `benchlab eval` as users run them: real subprocesses."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
from evalsvc_testkit import free_port, write_config

SRC = str(Path(__file__).resolve().parents[2] / "src")


def benchlab(
    *args: str, env: dict[str, str] | None = None, timeout: float = 120
) -> subprocess.CompletedProcess:
    base = {k: v for k, v in os.environ.items() if k != "BENCHLAB_EVAL_TOKEN"}
    full_env = {**base, "PYTHONPATH": SRC, **(env or {})}
    return subprocess.run(
        [sys.executable, "-c", "from benchlab.cli import main; main()", *args],
        capture_output=True,
        text=True,
        env=full_env,
        timeout=timeout,
    )


def test_serve_refuses_a_public_address_without_a_token(tmp_path):
    result = benchlab("serve", "--host", "0.0.0.0", "--config", str(write_config(tmp_path)))
    assert result.returncode == 2
    assert "without a token" in result.stderr and "BENCHLAB_EVAL_TOKEN" in result.stderr
    result = benchlab(
        "serve", "--host", "0.0.0.0", "--no-auth", "--config", str(write_config(tmp_path))
    )
    assert result.returncode == 2 and "--no-auth is only allowed on a loopback" in result.stderr


@pytest.mark.parametrize("token,why", [
    (" ", "only whitespace"),
    ("\t\n   \t", "only whitespace"),
    ("short-token", "11 characters, fewer than 16"),
    ("x" * 15, "15 characters, fewer than 16"),
])
def test_serve_refuses_a_weak_token_at_start_up(tmp_path, token, why):
    result = benchlab(
        "serve", "--host", "0.0.0.0", "--port", str(free_port()), "--config", str(write_config(tmp_path)),
        env={"BENCHLAB_EVAL_TOKEN": token}, timeout=60,
    )
    assert result.returncode == 2, result.stderr
    assert why in result.stderr and "$BENCHLAB_EVAL_TOKEN" in result.stderr
    assert "Traceback" not in result.stderr
    assert token.strip() == "" or token not in result.stderr  # the token itself is not echoed


def test_create_app_refuses_a_weak_token_too(tmp_path):
    from benchlab.errors import UserError
    from benchlab.evaluate.config import load_config
    from benchlab.evaluate.server import create_app

    config = load_config(write_config(tmp_path))
    with pytest.raises(UserError, match="fewer than 16"):
        create_app(config, token="0123456789abcde")
    assert create_app(config, token="0123456789abcdef") is not None  # 16 characters are enough


def test_serve_needs_a_token_or_no_auth_even_on_loopback(tmp_path):
    result = benchlab("serve", "--config", str(write_config(tmp_path)))
    assert result.returncode == 2 and "--no-auth" in result.stderr


def test_eval_rejects_unknown_benchmarks_listing_the_known_ones(tmp_path):
    result = benchlab(
        "eval",
        "--model-url",
        "http://127.0.0.1:9",
        "--benchmarks",
        "arith,nope",
        "--config",
        str(write_config(tmp_path)),
    )
    assert result.returncode == 2
    assert "nope" in result.stderr and "known: arith, instruct, mcq, pyfunc, words" in result.stderr


def _wait_for(url: str, proc: subprocess.Popen, seconds: float = 30) -> None:
    deadline = time.monotonic() + seconds
    while True:
        try:
            httpx.get(url, timeout=1)
            return
        except httpx.HTTPError:
            assert proc.poll() is None and time.monotonic() < deadline, "server did not start"
            time.sleep(0.1)


@pytest.mark.slow
def test_serve_on_loopback_answers_health_with_its_warnings(tmp_path):
    port = free_port()
    server = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "from benchlab.cli import main; main()",
            "serve",
            "--no-auth",
            "--port",
            str(port),
            "--config",
            str(write_config(tmp_path)),
            "--state-dir",
            str(tmp_path / "state"),
        ],
        env={**os.environ, "PYTHONPATH": SRC},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        _wait_for(f"http://127.0.0.1:{port}/health", server)
        health = httpx.get(f"http://127.0.0.1:{port}/health", timeout=5).json()
        listed = httpx.get(f"http://127.0.0.1:{port}/benchmarks", timeout=5).json()
    finally:
        server.terminate()
        _, stderr = server.communicate(timeout=20)
    assert health["status"] == "ok" and health["auth"] is False
    assert "authentication is off (--no-auth)" in health["warnings"]
    assert "arith" in {b["name"] for b in listed["benchmarks"]}
    assert "authentication is off" in stderr
    assert (tmp_path / "state" / "jobs.sqlite").is_file()


@pytest.mark.slow
def test_serve_takes_nemo_skills_flags_for_the_model_name_and_concurrency(tmp_path):
    from evalsvc_testkit import ServerThread

    from benchlab.evaluate.config import load_config
    from benchlab.evaluate.stub import StubSettings, create_stub_app

    config = write_config(tmp_path)
    stub = ServerThread(create_stub_app(load_config(config), StubSettings(seed=1))).start()
    port = free_port()
    server = subprocess.Popen(
        [sys.executable, "-c", "from benchlab.cli import main; main()", "serve", "--no-auth", "--port", str(port),
         "--config", str(config), "--openai-model-name", "served-policy", "--max-concurrent-requests", "3"],
        env={**os.environ, "PYTHONPATH": SRC}, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
    )
    try:
        _wait_for(f"http://127.0.0.1:{port}/health", server)
        body = httpx.post(f"http://127.0.0.1:{port}/evaluate", timeout=60, json={
            "rollout_id": 1, "router_url": stub.url, "benchmarks": [{"name": "words"}]}).json()
        sent = httpx.get(f"{stub.url}/stats", timeout=5).json()["sampling"]
    finally:
        server.terminate()
        server.communicate(timeout=20)
        stub.stop()
    assert body["status"] == "completed"
    assert {s["model"] for s in sent} == {"served-policy"}
    assert "--model served-policy" in body["command"]
    refused = benchlab("serve", "--no-auth", "--max-concurrent-requests", "0", "--config", str(config))
    assert refused.returncode == 2 and "--max-concurrent-requests" in refused.stderr


@pytest.mark.slow
def test_eval_against_the_stub_writes_flat_metrics_into_the_run_dir(tmp_path):
    config = write_config(tmp_path)
    port = free_port()
    stub = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "benchlab.evaluate.stub",
            "--port",
            str(port),
            "--config",
            str(config),
            "--p-correct",
            "1.0",
            "--p-no-answer",
            "0.0",
        ],
        env={**os.environ, "PYTHONPATH": SRC},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        _wait_for(f"http://127.0.0.1:{port}/v1/models", stub)
        run_dir = tmp_path / "run"
        result = benchlab(
            "eval",
            "--model-url",
            f"http://127.0.0.1:{port}/v1",
            "--model",
            "m",
            "--benchmarks",
            "arith,instruct",
            "--n-samples",
            "2",
            "--config",
            str(config),
            env={"BENCHLAB_RUN_DIR": str(run_dir)},
        )
    finally:
        stub.terminate()
        stub.wait(10)
    assert result.returncode == 0, result.stderr
    metrics = json.loads((run_dir / "metrics.json").read_text())
    # A stub that is always right scores 1.0 everywhere; 16 and 8 prompts.
    assert metrics["arith/pass@1[avg-of-2]/accuracy"] == 1.0
    assert metrics["instruct/pass@2/accuracy"] == 1.0
    assert metrics["arith/majority@2/num_entries"] == 16.0
    assert metrics["instruct/pass@1[avg-of-2]/num_entries"] == 8.0
    assert (
        json.loads((run_dir / "raw_metrics.json").read_text())["arith"]["pass@2"]["accuracy"] == 1.0
    )
    assert (run_dir / "arith.jsonl").is_file()
    assert json.loads(result.stdout) == metrics


def test_eval_against_an_unreachable_endpoint_fails_with_one_line(tmp_path):
    config = write_config(tmp_path, model={"max_retries": 0})
    result = benchlab(
        "eval",
        "--model-url",
        f"http://127.0.0.1:{free_port()}",
        "--benchmarks",
        "mcq",
        "--config",
        str(config),
        "--out",
        str(tmp_path / "out"),
    )
    assert result.returncode == 1
    assert "every model request failed" in result.stderr and "Traceback" not in result.stderr
    assert not (tmp_path / "out" / "metrics.json").exists()


@pytest.mark.slow
def test_eval_of_a_judged_benchmark_writes_win_rates_and_reruns_from_the_judge_cache(tmp_path):
    from benchlab.evaluate.config import DEFAULT_CONFIG

    port = free_port()
    arena = {"dataset": str(DEFAULT_CONFIG.parent / "arena.jsonl"), "scorer": "llm_judge",
             "judge": {"mode": "pairwise"}}
    # One stub serves as model and as judge: judge prompts are no dataset item, so it judges them.
    config = write_config(tmp_path, benchmarks_extra={"arena": arena},
                          judge={"url": f"http://127.0.0.1:{port}", "name": "j"})
    stub = subprocess.Popen(
        [sys.executable, "-m", "benchlab.evaluate.stub", "--port", str(port), "--config", str(config),
         "--p-correct", "1.0", "--p-no-answer", "0.0"],
        env={**os.environ, "PYTHONPATH": SRC}, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    run_dir = tmp_path / "run"
    args = ("eval", "--model-url", f"http://127.0.0.1:{port}", "--model", "m", "--benchmarks", "arena",
            "--config", str(config), "--out", str(run_dir))
    try:
        _wait_for(f"http://127.0.0.1:{port}/v1/models", stub)
        first = benchlab(*args)
        judged = httpx.get(f"http://127.0.0.1:{port}/stats", timeout=5).json()["judge_requests"]
        second = benchlab(*args)
        again = httpx.get(f"http://127.0.0.1:{port}/stats", timeout=5).json()["judge_requests"]
    finally:
        stub.terminate()
        stub.wait(10)
    assert first.returncode == 0 and second.returncode == 0, first.stderr + second.stderr
    metrics = json.loads((run_dir / "metrics.json").read_text())
    # Always the reference answer: it beats the baseline in both positions of all 8 prompts.
    assert metrics["arena/judge/win_rate"] == 1.0 and metrics["arena/judge/wins"] == 16.0
    assert metrics["arena/judge/malformed"] == 0.0
    assert judged == 16 and again == judged  # the second run asked the judge nothing


@pytest.mark.slow
def test_serve_without_a_token_answers_only_its_own_host_names_and_logs_each_kind_of_refusal_once(tmp_path):
    port = free_port()
    log = tmp_path / "serve.log"
    with log.open("wb") as out:
        server = subprocess.Popen(
            [sys.executable, "-c", "from benchlab.cli import main; main()", "serve", "--no-auth", "--port", str(port),
             "--config", str(write_config(tmp_path))],
            env={**os.environ, "PYTHONPATH": SRC}, stdout=out, stderr=subprocess.STDOUT,
        )
    url = f"http://127.0.0.1:{port}"
    try:
        _wait_for(f"{url}/health", server)
        # A page of another site whose name resolves to 127.0.0.1 (DNS rebinding): its name is in Host.
        for path in ("/health", "/benchmarks", "/openapi.json"):
            refused = httpx.get(f"{url}{path}", headers={"Host": f"attacker.example:{port}"}, timeout=5)
            assert refused.status_code == 400 and refused.json()["detail"].startswith(
                f"Invalid host header: 'attacker.example:{port}'"), path
        posted = httpx.post(f"{url}/evaluate", headers={"Host": "rebound.example"}, timeout=5, json={
            "rollout_id": 1, "router_url": "http://127.0.0.1:1", "benchmarks": [{"name": "words"}]})
        assert posted.status_code == 400 and "Invalid host header" in posted.json()["detail"]
        for host in (f"127.0.0.1:{port}", f"localhost:{port}", "localhost"):
            assert httpx.get(f"{url}/benchmarks", headers={"Host": host}, timeout=5).status_code == 200, host
        # Refusals: one line each, naming the field; in the log once per kind however many come.
        for _ in range(40):
            missing = httpx.get(f"{url}/status/{'0' * 32}", timeout=5)
            invalid = httpx.post(f"{url}/evaluate", json={"rollout_id": "x"}, timeout=5)
        assert missing.status_code == 404 and missing.json()["detail"] == f"no job {'0' * 32!r}"
        assert invalid.status_code == 400 and invalid.json()["detail"].startswith("invalid request: rollout_id: ")
    finally:
        server.terminate()
        server.wait(20)
    lines = log.read_text(errors="replace").splitlines()
    # Once per 10 s window (the next line counts those left out): 40 of each kind in a few seconds.
    for kind in ("refused with HTTP 404", "refused with HTTP 400"):
        assert 1 <= sum(kind in line for line in lines) <= 3, lines
