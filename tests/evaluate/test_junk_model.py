"""A model endpoint answering junk costs only the samples it answered, each a model error with its reason.

A real HTTP server on 127.0.0.1 answers each prompt of a benchmark with one kind of junk (a
content that is no string, invalid JSON, an event stream nobody asked for, NUL bytes, a lone
surrogate, a 24 MiB answer, an HTML 500) or with a plain answer. The job completes, its other
samples scored; the server's memory stays bounded while 24 MiB answers stream in.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import httpx
import pytest
from evalsvc_testkit import TOKEN, free_port, server_pool, write_config

from benchlab.evaluate.config import load_config
from benchlab.evaluate.server import create_app

AUTH = {"Authorization": f"Bearer {TOKEN}"}
BIG = 24 * 1024 * 1024
KINDS = {
    # kind: the reason the server must count it under (None: a plain answer, scored)
    "number": "content is a int, not a string",
    "parts": "content is a list, not a string",
    "truncated": "invalid JSON",
    "stream": "an event stream, not the JSON reply asked for",
    "nul": "text with NUL bytes",
    "surrogate": "text with lone surrogates (not Unicode)",
    "big": "reply over 4194304 bytes (model.max_reply_bytes)",
    "html500": "HTTP 500",
    "plain": None,
}


def _chat(content: object) -> bytes:
    return json.dumps({"id": "x", "object": "chat.completion", "created": 0, "model": "m",
                       "choices": [{"index": 0, "finish_reason": "stop",
                                    "message": {"role": "assistant", "content": content}}]}).encode()


class _Junk(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args: object) -> None:
        pass

    def _send(self, status: int, body: bytes, content_type: str = "application/json") -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:
        self._send(200, json.dumps({"object": "list", "data": [{"id": "m", "object": "model"}]}).encode())

    def do_POST(self) -> None:
        request = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        kind = request["messages"][-1]["content"].split(":")[0]
        if kind == "number":
            self._send(200, _chat(42))
        elif kind == "parts":
            self._send(200, _chat([{"type": "text", "text": "paris"}]))
        elif kind == "truncated":
            self._send(200, _chat("paris")[:25])
        elif kind == "stream":
            chunk = json.dumps({"choices": [{"index": 0, "delta": {"content": "paris"}}]})
            self._send(200, f"data: {chunk}\n\ndata: [DONE]\n\n".encode(), "text/event-stream")
        elif kind == "nul":
            self._send(200, _chat("par\u0000is"))
        elif kind == "surrogate":
            self._send(200, _chat("par\ud800is"))  # json.dumps writes it as the escape \ud800
        elif kind == "big":
            head, tail = _chat("").split(b'"content": ""')
            body_len = len(head) + len(b'"content": "') + BIG + len(b'"') + len(tail)
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(body_len))
            self.end_headers()
            try:
                self.wfile.write(head + b'"content": "')
                for _ in range(BIG // (1024 * 1024)):
                    self.wfile.write(b"a" * (1024 * 1024))
                self.wfile.write(b'"' + tail)
            except OSError:
                pass  # the server stopped reading at its cap
        elif kind == "html500":
            self._send(500, b"<html><body><h1>500 Internal Server Error</h1></body></html>", "text/html")
        else:
            self._send(200, _chat("paris"))


@pytest.fixture
def junk_model():
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Junk)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def _junk_config(tmp_path: Path, kinds: list[str], **model: object) -> Path:
    dataset = tmp_path / "junk.jsonl"
    dataset.write_text("".join(json.dumps({"id": f"q{i:02d}", "question": f"{kind}: capital of France?",
                                           "answer": "paris"}) + "\n" for i, kind in enumerate(kinds)))
    return write_config(tmp_path, model={"backoff_secs": 0.01, "max_backoff_secs": 0.02, **model},
                        benchmarks_extra={"junk": {"dataset": str(dataset), "scorer": "exact"}})


@pytest.fixture
def servers():
    yield from server_pool()


@pytest.mark.slow
def test_each_junk_reply_is_a_model_error_with_its_reason_and_the_job_completes(tmp_path, servers, junk_model):
    kinds = [*KINDS, "plain", "plain"]
    server = servers(create_app(load_config(_junk_config(tmp_path, kinds)), token=TOKEN))
    response = httpx.post(f"{server.url}/evaluate", headers=AUTH, timeout=120, json={
        "rollout_id": 1, "router_url": junk_model, "benchmarks": [{"name": "junk"}]})
    assert response.status_code == 200, response.text
    body = response.json()
    run = body["runs"][0]
    junk = [k for k in kinds if KINDS[k] is not None]
    assert (run["samples_asked"], run["samples_scored"], run["model_errors"]) == (len(kinds), 3, len(junk))
    assert run["model_error_reasons"] == {KINDS[k]: 1 for k in junk}
    assert body["raw_metrics"]["junk"]["pass@1"]["accuracy"] == 1.0  # the three plain answers
    assert "8 of 11 samples got no response" in body["warning"]
    records = {r["id"]: r for r in map(json.loads, Path(body["output_dir"], "junk.jsonl").read_text().splitlines())}
    assert "content is a int" in records["q00"]["error"] and records["q00"]["responses"] == []
    assert "HTTP 500: <html>" in records["q07"]["error"]


def _peak_rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no VmHWM")


@pytest.mark.slow
def test_memory_stays_bounded_while_24_mib_answers_stream_in(tmp_path, junk_model):
    config = _junk_config(tmp_path, ["big"] * 18 + ["plain"] * 2)
    port = free_port()
    env = {**os.environ, "BENCHLAB_EVAL_TOKEN": TOKEN}
    with (tmp_path / "serve.log").open("wb") as log:
        proc = subprocess.Popen([sys.executable, "-m", "benchlab", "serve", "--port", str(port), "--config",
                                 str(config), "--log-level", "warning"], stdout=log, stderr=subprocess.STDOUT, env=env)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            assert proc.poll() is None and time.monotonic() < deadline, "the server did not start"
            try:
                httpx.get(f"{url}/health", timeout=2)
                break
            except httpx.HTTPError:
                time.sleep(0.2)
        before = _peak_rss_mib(proc.pid)
        response = httpx.post(f"{url}/evaluate", headers=AUTH, timeout=120, json={
            "rollout_id": 1, "router_url": junk_model, "benchmarks": [{"name": "junk"}]})
        after = _peak_rss_mib(proc.pid)
    finally:
        proc.terminate()
        proc.wait(30)
    assert response.status_code == 200, response.text
    run = response.json()["runs"][0]
    assert (run["samples_scored"], run["model_errors"]) == (2, 18)
    # 18 answers of 24 MiB at once (432 MiB): each is dropped at its 4 MiB cap as it streams in.
    print(f"peak RSS before the job {before:.0f} MiB, after {after:.0f} MiB")
    assert after - before < 120, (before, after)  # 18 x the 4 MiB cap is 72 MiB
