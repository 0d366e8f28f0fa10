"""Throughput of the evaluation server against a model with fixed latency.

2,000 prompts, a stub model that answers each request after 100 ms, 32 requests
in flight. The theoretical ceiling is 32 / 0.1 s = 320 requests per second.

Two figures on the same work, in one run:

- anchor: a bare loop of 32 asyncio workers, each with its own httpx client,
  sending the 2,000 prompts straight to the stub (no server, no scoring):
  what the stub, httpx and this machine allow;
- benchlab: one ``POST /evaluate`` to ``benchlab serve`` (a separate process),
  which sends the same prompts, scores every answer (math, with math-verify
  for the wrong ones) and aggregates metrics.

The server's own overhead per request is reported twice: as added wall time,
(wall time x concurrency / requests) - latency, and as the CPU time the server
process and its math-verify workers spent per request (psutil), which does not
depend on what else the machine is running.

    PYTHONPATH=src python bench/eval_throughput.py [--prompts 2000] [--latency 0.1] [--concurrency 32]

With ``--judge``, every prompt is also judged: the benchmark uses the
``llm_judge`` scorer (single-answer grading), and a second stub, the judge, on
its own port, answers each judge request after the same latency. A prompt is
then two requests in a row (model, then judge), with ``concurrency`` of each
in flight: the theoretical rate is still concurrency / latency prompts per
second (two pipelined stages of that rate), now 640 requests per second in
all. The anchor is the same two-stage pipeline of bare workers (32 asking the
model, 32 asking the judge with what the model said).

    PYTHONPATH=src python bench/eval_throughput.py --judge
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import ssl
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

SRC = str(Path(__file__).resolve().parents[1] / "src")


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def write_world(folder: Path, prompts: int, concurrency: int, judge_port: int | None = None) -> Path:
    rng = random.Random(0)
    with (folder / "sums.jsonl").open("w") as f:
        for i in range(prompts):
            a, b = rng.randint(1, 10**6), rng.randint(1, 10**6)
            f.write(
                json.dumps(
                    {"id": f"s{i:05d}", "question": f"What is {a} + {b}?", "answer": str(a + b)}
                )
                + "\n"
            )
    config = folder / "eval.yaml"
    if judge_port is None:
        config.write_text(
            f"server:\n  state_dir: {folder / 'state'}\n  deadline_secs: 600\n"
            f"model:\n  concurrency: {concurrency}\n  request_timeout_secs: 30\n"
            "benchmarks:\n  sums:\n    dataset: sums.jsonl\n    scorer: math\n"
            '    prompt: "{{ question }} Put the answer in \\\\boxed{}."\n'
        )
        return config
    config.write_text(
        f"server:\n  state_dir: {folder / 'state'}\n  deadline_secs: 600\n"
        f"model:\n  concurrency: {concurrency}\n  request_timeout_secs: 30\n"
        f"judge:\n  url: http://127.0.0.1:{judge_port}\n  concurrency: {concurrency}\n"
        "  request_timeout_secs: 30\n"
        "benchmarks:\n  sums:\n    dataset: sums.jsonl\n    scorer: llm_judge\n"
        "    judge: {mode: single}\n"
        '    prompt: "{{ question }} End with Answer: <the sum>."\n'
    )
    return config


def wait_for(url: str, proc: subprocess.Popen, seconds: float = 60) -> None:
    deadline = time.monotonic() + seconds
    while True:
        try:
            httpx.get(url, timeout=1)
            return
        except httpx.HTTPError:
            if proc.poll() is not None or time.monotonic() > deadline:
                raise SystemExit(f"{url} did not come up") from None
            time.sleep(0.1)


async def anchor(stub_url: str, prompts: list[str], concurrency: int) -> float:
    """Seconds for ``concurrency`` bare workers to get every prompt answered."""
    queue: asyncio.Queue[str] = asyncio.Queue()
    for p in prompts:
        queue.put_nowait(p)

    context = ssl.create_default_context()  # once: loading CA certificates per client costs ~50 ms

    async def worker() -> None:
        limits = httpx.Limits(max_connections=1, max_keepalive_connections=1)
        async with httpx.AsyncClient(limits=limits, trust_env=False, verify=context) as client:
            while not queue.empty():
                prompt = queue.get_nowait()
                r = await client.post(
                    f"{stub_url}/v1/chat/completions",
                    timeout=30,
                    json={
                        "model": "m",
                        "messages": [{"role": "user", "content": prompt}],
                        "n": 1,
                        "max_tokens": 64,
                    },
                )
                r.raise_for_status()

    start = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return time.perf_counter() - start


async def anchor_judged(stub_url: str, judge_url: str, prompts: list[str], judge_prompts: dict[str, str],
                        concurrency: int) -> float:
    """Seconds for a two-stage pipeline of bare workers: ``concurrency`` asking the model,
    as many asking the judge with each answer."""
    todo: asyncio.Queue[str] = asyncio.Queue()
    judged: asyncio.Queue[str | None] = asyncio.Queue()
    for p in prompts:
        todo.put_nowait(p)
    context = ssl.create_default_context()

    async def ask(client: httpx.AsyncClient, url: str, content: str) -> str:
        r = await client.post(f"{url}/v1/chat/completions", timeout=30, json={
            "model": "m", "messages": [{"role": "user", "content": content}], "n": 1, "max_tokens": 64})
        r.raise_for_status()
        return r.json()["choices"][0]["message"]["content"]

    def client() -> httpx.AsyncClient:
        limits = httpx.Limits(max_connections=1, max_keepalive_connections=1)
        return httpx.AsyncClient(limits=limits, trust_env=False, verify=context)

    async def model_worker() -> None:
        async with client() as c:
            while not todo.empty():
                prompt = todo.get_nowait()
                answer = await ask(c, stub_url, prompt)
                judged.put_nowait(judge_prompts[prompt].replace("RESPONSE", answer))

    async def judge_worker() -> None:
        async with client() as c:
            while (text := await judged.get()) is not None:
                await ask(c, judge_url, text)

    start = time.perf_counter()
    judges = [asyncio.ensure_future(judge_worker()) for _ in range(concurrency)]
    await asyncio.gather(*(model_worker() for _ in range(concurrency)))
    for _ in judges:
        judged.put_nowait(None)
    await asyncio.gather(*judges)
    return time.perf_counter() - start


def cpu_secs(pid: int) -> float:
    """User + system CPU seconds of a process and its living children."""
    import psutil

    proc = psutil.Process(pid)
    total = 0.0
    for p in [proc, *proc.children(recursive=True)]:
        try:
            t = p.cpu_times()
            total += t.user + t.system
        except psutil.Error:
            pass
    return total


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--prompts", type=int, default=2000)
    parser.add_argument("--latency", type=float, default=0.1)
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--judge", action="store_true", help="judge every answer with a second stub")
    args = parser.parse_args()
    env = {**os.environ, "PYTHONPATH": SRC + os.pathsep + os.environ.get("PYTHONPATH", "")}
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        stub_port, server_port, judge_port = free_port(), free_port(), free_port()
        config = write_world(folder, args.prompts, args.concurrency, judge_port if args.judge else None)

        def start_stub(port: int) -> subprocess.Popen:
            return subprocess.Popen(
                [sys.executable, "-m", "benchlab.evaluate.stub", "--port", str(port), "--config", str(config),
                 "--latency", str(args.latency)],
                env=env,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )

        stub = start_stub(stub_port)
        judge = start_stub(judge_port) if args.judge else None
        server = subprocess.Popen(
            [
                sys.executable,
                "-c",
                "from benchlab.cli import main; main()",
                "serve",
                "--no-auth",
                "--port",
                str(server_port),
                "--config",
                str(config),
                "--log-level",
                "warning",
            ],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            stub_url, server_url = (
                f"http://127.0.0.1:{stub_port}",
                f"http://127.0.0.1:{server_port}",
            )
            judge_url = f"http://127.0.0.1:{judge_port}"
            wait_for(f"{stub_url}/v1/models", stub)
            if judge is not None:
                wait_for(f"{judge_url}/v1/models", judge)
            wait_for(f"{server_url}/health", server)
            sys.path.insert(0, SRC)
            from benchlab.evaluate.config import load_config
            from benchlab.evaluate.datasets import load_items

            items = load_items(load_config(config).benchmarks["sums"])
            prompts = [it.prompt for it in items]
            stub_before = cpu_secs(stub.pid)
            if judge is None:
                anchor_secs = asyncio.run(anchor(stub_url, prompts, args.concurrency))
            else:
                from benchlab.evaluate.judge import SINGLE_PROMPT, _env

                template = _env.from_string(SINGLE_PROMPT)
                judge_prompts = {it.prompt: template.render(**it.fields, prompt=it.prompt, response="RESPONSE")
                                 for it in items}
                anchor_secs = asyncio.run(
                    anchor_judged(stub_url, judge_url, prompts, judge_prompts, args.concurrency))
            stub_cpu = cpu_secs(stub.pid) - stub_before
            cpu_before = cpu_secs(server.pid)
            start = time.perf_counter()
            body = httpx.post(
                f"{server_url}/evaluate",
                timeout=600,
                json={"rollout_id": 0, "router_url": stub_url, "benchmarks": [{"name": "sums"}]},
            ).json()
            bench_secs = time.perf_counter() - start
            server_cpu = cpu_secs(server.pid) - cpu_before
        finally:
            for proc in (server, stub, judge):
                if proc is not None:
                    proc.terminate()
                    proc.wait(30)
    if body.get("status") != "completed":
        raise SystemExit(f"evaluation failed: {body}")
    n, c, lat = args.prompts, args.concurrency, args.latency
    ideal = c / lat
    metrics = body["raw_metrics"]["sums"]["pass@1"]
    rows = [("anchor (bare httpx loop)", anchor_secs), ("benchlab (POST /evaluate)", bench_secs)]
    unit = "prompts/s" if args.judge else "req/s"
    stages = " and the judge's, each" if args.judge else ""
    print(
        f"{n} prompts, {lat * 1000:.0f} ms model latency{stages}, concurrency {c}: theoretical {ideal:.0f} {unit}"
    )
    if args.judge:
        # The pipeline fills in one extra latency: n / ideal + lat is the least any run can take.
        print(f"  ({2 * n} requests; the least wall time is {n / ideal + lat:.2f} s)")
    for name, secs in rows:
        rps = n / secs
        overhead_ms = (secs * c / n - lat * (2 if args.judge else 1)) * 1000
        print(
            f"  {name:28s} {secs:6.2f} s  {rps:6.1f} {unit}  {rps / ideal:6.1%} of theoretical  "
            f"overhead {overhead_ms:5.1f} ms/prompt"
        )
    print(f"  ratio benchlab / anchor throughput: {anchor_secs / bench_secs:.3f}")
    per = "prompt (a model and a judge request)" if args.judge else "request"
    print(
        f"  server CPU: {server_cpu:.2f} s in all, {server_cpu / n * 1000:.2f} ms per {per} "
        f"(at {ideal:.0f} {unit} that is {server_cpu / n * ideal:.0%} of one core)"
    )
    print(f"  stub model CPU: {stub_cpu / n * 1000:.2f} ms per request (during the anchor run)")
    load = os.getloadavg()[0]
    print(f"  machine: {os.cpu_count()} CPUs, load average {load:.1f} during the run")
    print(
        f"  scored: accuracy {metrics['accuracy']:.3f}, no_answer {metrics['no_answer']:.3f}, "
        f"{int(metrics['num_entries'])} prompts"
    )
    if args.judge:
        judged = body["raw_metrics"]["sums"]["judge"]
        print(f"  judged: accuracy {judged['accuracy']:.3f}, malformed {int(judged['malformed'])}")


if __name__ == "__main__":
    main()
