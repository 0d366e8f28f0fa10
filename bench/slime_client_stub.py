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

import yaml
from real_server_n import SLIME_DRIVER, free_port, slime_config, stop, wait_up

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


def _slime(slime: Path, eval_config: Path, router_port: int, rollout_id: int) -> dict:
    started = time.monotonic()
    client = subprocess.run([sys.executable, "-c", SLIME_DRIVER, str(slime.absolute()), str(eval_config),
                             "127.0.0.1", str(router_port), str(rollout_id), "64"],
                            capture_output=True, text=True, timeout=1800)
    if client.returncode != 0:
        raise SystemExit(f"slime's client failed:\n{client.stdout}\n{client.stderr[-3000:]}")
    received = json.loads(client.stdout.strip().splitlines()[-1])
    response = received["raw_response"]["skills"]
    summary = {"rollout_id": rollout_id, "secs": round(time.monotonic() - started, 1), "job_id": response["job_id"],
               "status": response["status"], "samples": f"{response['samples_scored']}/{response['samples_asked']}",
               "metrics": {k: v for k, v in received["metrics"].items() if k.endswith("accuracy")}}
    print(json.dumps(summary))
    return summary


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--slime", required=True, type=Path, help="slime's source at tag v0.2.1")
    args = parser.parse_args()
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


if __name__ == "__main__":
    sys.exit(main())
