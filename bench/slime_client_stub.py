"""slime v0.2.1's own delegate client against `benchlab serve` in front of the stub model.

The OpenAI-compatible server here is benchlab's stub model (``python -m benchlab.evaluate.stub``),
the one that runs on a machine without a GPU; ``bench/real_server_n.py`` does the same with
``transformers serve``. slime is not on PyPI (the name there is another project), so its client is
imported from its source at tag v0.2.1 (``git clone --branch v0.2.1 https://github.com/THUDM/slime``),
through the driver of ``real_server_n.py`` (SGLang's and Megatron's part of a rollout replaced by
stand-ins). It needs omegaconf and requests.

Two evaluations, as a trainer runs them:

1. rollout 7 against a model that answers every question right;
2. rollout 7 again after the weights changed in place (the stub restarted on the same port, same
   model name, every answer wrong): it must be evaluated again, not served the first result.

It exits 1 when the second evaluation is the first one's result.

    PYTHONPATH=src python bench/slime_client_stub.py --slime slime

With ``--real-python`` the model server is a real one instead: ``transformers serve`` with the
tiny random chat model of ``real_server_n.py`` (its environment, built as that script says). The
weights change in place by writing the model again with another seed into the same folder and
restarting the server on the same port. A random model answers garbage, so both accuracies are 0:
the second evaluation is shown to be a new one by its job id and by the chat requests the
restarted server received (a served old result asks it nothing). Then, with the model server
stopped, rollout 8 is sent with ``async`` and ``/status`` is polled: the job must end ``failed``,
its error naming the model, never ``completed``.

    PYTHONPATH=src python bench/slime_client_stub.py --slime slime --real-python venv-real/bin/python
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx
import yaml
from real_server_n import (
    N_SAMPLES,
    SLIME_DRIVER,
    benchlab_config,
    build_model,
    chat_requests,
    free_port,
    slime_config,
    stop,
    transformers_serve,
    wait_up,
)

BENCHMARKS = ("arith", "words")


def _stub(port: int, p_correct: float, log: Path) -> subprocess.Popen[bytes]:
    with open(log, "ab") as out:
        return subprocess.Popen([sys.executable, "-m", "benchlab.evaluate.stub", "--port", str(port),
                                 "--p-correct", str(p_correct), "--p-no-answer", "0", "--seed", "1"],
                                stdout=out, stderr=subprocess.STDOUT, start_new_session=True)


def _config(work: Path) -> Path:
    from benchlab.evaluate.config import DEFAULT_CONFIG

    data = yaml.safe_load(DEFAULT_CONFIG.read_text())
    data["benchmarks"] = {name: data["benchmarks"][name] for name in BENCHMARKS}
    for bench in data["benchmarks"].values():
        bench["dataset"] = str(DEFAULT_CONFIG.parent / bench["dataset"])
    data["server"]["state_dir"] = str(work / "state")
    path = work / "eval.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def _slime(slime: Path, eval_config: Path, router_port: int, rollout_id: int, max_len: int = 64) -> dict:
    started = time.monotonic()
    client = subprocess.run([sys.executable, "-c", SLIME_DRIVER, str(slime.absolute()), str(eval_config),
                             "127.0.0.1", str(router_port), str(rollout_id), str(max_len)],
                            capture_output=True, text=True, timeout=1800)
    if client.returncode != 0:
        raise SystemExit(f"slime's client failed:\n{client.stdout}\n{client.stderr[-3000:]}")
    received = json.loads(client.stdout.strip().splitlines()[-1])
    response = received["raw_response"]["skills"]
    summary = {"rollout_id": rollout_id, "secs": round(time.monotonic() - started, 1), "job_id": response["job_id"],
               "status": response["status"], "samples": f"{response['samples_scored']}/{response['samples_asked']}",
               "model_errors": sum(run.get("model_errors") or 0 for run in response.get("runs", [])),
               "prompts": sum(run["num_prompts"] for run in response.get("runs", [])),
               "metrics": {k: v for k, v in received["metrics"].items() if k.endswith("accuracy")}}
    print(json.dumps(summary))
    return summary


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--slime", required=True, type=Path, help="slime's source at tag v0.2.1")
    parser.add_argument("--real-python",
                        help="interpreter with transformers[serving]: a real model server instead of the stub")
    parser.add_argument("--work", type=Path, help="folder for configs and logs (default: a new temporary one)")
    args = parser.parse_args()
    if args.real_python:
        return _real(args.slime, str(Path(args.real_python).absolute()),
                     args.work or Path(tempfile.mkdtemp(prefix="slime-client-real-")))
    work = Path(tempfile.mkdtemp(prefix="slime-client-"))
    stub_port, serve_port = free_port(), free_port()
    token = secrets.token_hex(16)
    procs: list[subprocess.Popen[bytes]] = []
    try:
        procs.append(_stub(stub_port, 1.0, work / "stub.log"))
        wait_up(f"http://127.0.0.1:{stub_port}/v1/models", procs[-1], work / "stub.log")
        with open(work / "serve.log", "wb") as log:
            procs.append(subprocess.Popen(
                [sys.executable, "-m", "benchlab", "serve", "--config", str(_config(work)), "--port", str(serve_port)],
                stdout=log, stderr=subprocess.STDOUT, env={**os.environ, "BENCHLAB_EVAL_TOKEN": token},
                start_new_session=True))
        wait_up(f"http://127.0.0.1:{serve_port}/health", procs[-1], work / "serve.log")
        eval_config = slime_config(work, f"http://127.0.0.1:{serve_port}/evaluate", token)
        first = _slime(args.slime, eval_config, stub_port, 7)
        stop(procs[0])  # the weights change in place: same address, same model name
        procs[0] = _stub(stub_port, 0.0, work / "stub.log")
        wait_up(f"http://127.0.0.1:{stub_port}/v1/models", procs[0], work / "stub.log")
        again = _slime(args.slime, eval_config, stub_port, 7)
    finally:
        for proc in reversed(procs):
            stop(proc)
    fresh = again["job_id"] != first["job_id"] and again["metrics"] != first["metrics"]
    print("rollout 7 after the weights changed:", "evaluated again" if fresh else "SERVED THE OLD RESULT")
    return 0 if fresh and first["status"] == again["status"] == "completed" else 1


def _real(slime: Path, real_python: str, work: Path) -> int:
    work.mkdir(parents=True, exist_ok=True)
    model_dir = work / "tiny-chat-model"
    print(f"model: {model_dir} seed 0 (vocabulary, parameters: {build_model(real_python, model_dir, 0)})")
    tf_port, serve_port = free_port(), free_port()
    token = secrets.token_hex(16)
    headers = {"Authorization": f"Bearer {token}"}
    logs = [work / "transformers-serve-1.log", work / "transformers-serve-2.log"]
    procs: list[subprocess.Popen[bytes]] = []
    try:
        procs.append(transformers_serve(real_python, tf_port, logs[0])[0])
        wait_up(f"http://127.0.0.1:{tf_port}/v1/models", procs[-1], logs[0])
        with open(work / "serve.log", "wb") as log:
            procs.append(subprocess.Popen(
                [sys.executable, "-m", "benchlab", "serve", "--config", str(benchlab_config(work, str(model_dir))),
                 "--port", str(serve_port)],
                stdout=log, stderr=subprocess.STDOUT, env={**os.environ, "BENCHLAB_EVAL_TOKEN": token},
                start_new_session=True))
        serve = f"http://127.0.0.1:{serve_port}"
        wait_up(f"{serve}/health", procs[-1], work / "serve.log")
        eval_config = slime_config(work, f"{serve}/evaluate", token)
        first = _slime(slime, eval_config, tf_port, 7, 16)
        asked = first["prompts"] * N_SAMPLES
        print(f"  the model server received {chat_requests(logs[0])} chat requests ({asked} samples asked)")
        status = httpx.get(f"{serve}/status/{first['job_id']}", headers=headers, timeout=30).json()
        print(f"  GET /status/{first['job_id']}: status {status['status']!r}, "
              f"samples {status['samples_scored']}/{status['samples_asked']}")

        # The weights change in place: same folder (the model's name), same port.
        stop(procs[0])
        print(f"model: {model_dir} seed 1 (vocabulary, parameters: {build_model(real_python, model_dir, 1)})")
        procs[0] = transformers_serve(real_python, tf_port, logs[1])[0]
        wait_up(f"http://127.0.0.1:{tf_port}/v1/models", procs[0], logs[1])
        again = _slime(slime, eval_config, tf_port, 7, 16)
        asked_again = chat_requests(logs[1])
        print(f"  the restarted model server received {asked_again} chat requests ({asked} samples asked)")

        # The model server is gone: the job fails, with the model named, and /status says so.
        stop(procs[0])
        body = {"rollout_id": 8, "router_url": f"http://127.0.0.1:{tf_port}", "async": True,
                "benchmarks": [{"name": "arith", "n_samples_per_eval_prompt": N_SAMPLES, "max_response_len": 16}]}
        queued = httpx.post(f"{serve}/evaluate", json=body, headers=headers, timeout=30)
        print(f"rollout 8, model server stopped: POST /evaluate (async) -> HTTP {queued.status_code} "
              f"{queued.json()['status']!r}")
        job_id = queued.json()["job_id"]
        deadline = time.monotonic() + 600
        while True:
            down = httpx.get(f"{serve}/status/{job_id}", headers=headers, timeout=30).json()
            if down["status"] not in ("queued", "running") or time.monotonic() > deadline:
                break
            time.sleep(1)
        print(f"  GET /status/{job_id}: " + json.dumps({k: down.get(k) for k in ("status", "error")}))
    finally:
        for proc in reversed(procs):
            stop(proc)
    problems = []
    if not first["status"] == again["status"] == "completed":
        problems.append(f"statuses {first['status']!r}, {again['status']!r}")
    if status["status"] != first["status"]:
        problems.append(f"/status says {status['status']!r}, the response {first['status']!r}")
    if again["job_id"] == first["job_id"] or asked_again < asked - again["model_errors"]:
        problems.append("rollout 7 after the weights changed was not evaluated against them")
    if down["status"] != "failed":
        problems.append(f"with no model server the job is {down['status']!r}, not 'failed'")
    for problem in problems:
        print("PROBLEM:", problem)
    print("rollout 7 after the weights changed:", "evaluated again" if not problems else "see the problems above")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
