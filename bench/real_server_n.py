"""slime's own delegate client, `benchlab serve`, and a real model server that ignores ``n``.

An interoperability check, not a timing. Three real programs:

- ``transformers serve`` (Hugging Face transformers' OpenAI-compatible server) with a tiny
  random chat model built here, offline (a 2-layer Llama, hidden size 64, and a word-level
  tokenizer trained on a few lines, with a chat template). It answers one choice whatever
  ``n`` asks for; the script shows that first with a direct request;
- ``benchlab serve`` in front of it, on a config whose model is that server;
- slime v0.2.1's delegate client (``examples/eval/eval_delegate_rollout.py`` and the
  ``skills`` client it builds), imported from slime's source as it is, run through its
  ``generate_rollout(..., evaluation=True)``. Only ``slime.rollout.sglang_rollout`` and
  ``slime.rollout.base_types`` (SGLang and Megatron's side of a rollout, which the delegate
  path calls after the evaluation) are replaced by stand-ins.

The model answers garbage, so every score is 0: the point is the count. slime asks for
``n_samples_per_eval_prompt: 4``; benchlab must either get 4 samples per prompt (asking
again for each missing one) or say that samples are missing, never score a sample the
model did not write as wrong while reporting ``completed`` with ``model_errors: 0``. The
script counts the chat requests ``transformers serve`` received (its access log) and exits
1 when the response and the count disagree with what was asked.

The model server's environment is separate (torch is not a benchlab dependency):

    python3.11 -m venv venv-real && venv-real/bin/pip install 'transformers[serving]' omegaconf requests

and slime's source at tag v0.2.1 (``git clone --branch v0.2.1 https://github.com/THUDM/slime``).
Then, with benchlab's own environment:

    PYTHONPATH=src python bench/real_server_n.py --real-python venv-real/bin/python --slime slime

It prints the direct request and its answer, the response slime's client received, and
the request counts; ``--out FILE`` also writes them as JSON.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import secrets
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
import yaml

BENCHMARKS = ("arith", "words")
N_SAMPLES = 4

# Run by the model server's interpreter: a tiny random Llama and a word-level tokenizer,
# built from nothing, saved as a model folder `transformers serve` loads by its path.
BUILD_MODEL = r'''
import sys
from pathlib import Path
from tokenizers import Tokenizer, models, pre_tokenizers, trainers
from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast
import torch

out = Path(sys.argv[1])
seed = int(sys.argv[2]) if len(sys.argv) > 2 else 0
lines = ["the answer is 42", "what is the opposite of hot", "cold warm blue green red yellow",
         "jo has 36 apples and buys 6 bags", "reason step by step then put the final answer in boxed",
         "0 1 2 3 4 5 6 7 8 9 10 12 47 48 100", "user assistant system"]
tok = Tokenizer(models.WordLevel(unk_token="<unk>"))
tok.pre_tokenizer = pre_tokenizers.Whitespace()
tok.train_from_iterator(lines, trainers.WordLevelTrainer(
    special_tokens=["<unk>", "<s>", "</s>", "<pad>"], min_frequency=1))
fast = PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="<unk>", bos_token="<s>",
                               eos_token="</s>", pad_token="<pad>")
fast.chat_template = (
    "{% for m in messages %}{{ m['role'] }}: {{ m['content'] }}\n{% endfor %}"
    "{% if add_generation_prompt %}assistant:{% endif %}")
torch.manual_seed(seed)
config = LlamaConfig(vocab_size=len(fast), hidden_size=64, intermediate_size=128,
                     num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=4,
                     max_position_embeddings=2048, bos_token_id=fast.bos_token_id,
                     eos_token_id=fast.eos_token_id, pad_token_id=fast.pad_token_id)
model = LlamaForCausalLM(config)
model.generation_config.do_sample = True
model.save_pretrained(out)
fast.save_pretrained(out)
print(len(fast), sum(p.numel() for p in model.parameters()))
'''

# Run by the model server's interpreter, which has slime's few light dependencies (omegaconf,
# requests): slime's delegate rollout, imported from its source, evaluates one rollout.
SLIME_DRIVER = r'''
import json, sys, types
from argparse import Namespace

slime_src, eval_config, router_ip, router_port, rollout_id, max_len = sys.argv[1:7]
sys.path.insert(0, slime_src)

# SGLang/Megatron's part of a rollout, which the delegate path calls after the evaluation.
class _Output:
    def __init__(self):
        self.metrics = None

def _base_generate_rollout(args, rollout_id, data_buffer, evaluation=False):
    return _Output()

for name, attrs in {
    "slime.rollout": {},
    "slime.rollout.base_types": {"RolloutFnEvalOutput": _Output, "RolloutFnTrainOutput": _Output},
    "slime.rollout.sglang_rollout": {"generate_rollout": _base_generate_rollout},
}.items():
    module = types.ModuleType(name)
    module.__dict__.update(attrs)
    sys.modules[name] = module

import logging
logging.basicConfig(level=logging.INFO, stream=sys.stderr)
from examples.eval import eval_delegate_rollout as rollout

# slime only logs the raw response; a copy is kept (its own function still runs) to print it.
captured = {}
_log = rollout._log_delegate_metrics
def _capture(args, rollout_id, metrics, raw_response):
    captured["raw_response"] = raw_response
    return _log(args, rollout_id, metrics, raw_response)
rollout._log_delegate_metrics = _capture

# A trainer's arguments: slime's defaults, the sampling of its Qwen3-4B delegate launcher, and
# --eval-max-response-len; a delegate dataset takes what it does not set from these.
args = Namespace(eval_config=eval_config, sglang_router_ip=router_ip, sglang_router_port=int(router_port),
                 n_samples_per_prompt=8, n_samples_per_eval_prompt=1, rollout_temperature=0.8,
                 rollout_top_p=1.0, rollout_top_k=-1, rollout_max_response_len=8192,
                 eval_temperature=None, eval_top_p=None, eval_top_k=None, eval_max_response_len=int(max_len))
try:
    result = rollout.generate_rollout(args, int(rollout_id), None, evaluation=True)
except Exception as exc:  # what slime's trainer would see
    print(json.dumps({"error": f"{type(exc).__name__}: {exc}",
                      "cause": repr(exc.__cause__)}))
    sys.exit(3)
print(json.dumps({"metrics": result.metrics, "raw_response": captured.get("raw_response")}))
'''


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_up(url: str, proc: subprocess.Popen[bytes], log: Path, seconds: float = 300) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"{proc.args!r} exited with {proc.returncode}:\n{log.read_text()[-3000:]}")
        try:
            if httpx.get(url, timeout=2).status_code < 500:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.5)
    raise SystemExit(f"{url} did not answer within {seconds:.0f}s:\n{log.read_text()[-3000:]}")


def stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def build_model(real_python: str, model_dir: Path, seed: int = 0) -> list[str]:
    """The tiny random chat model, written to ``model_dir``; its vocabulary and parameter counts."""
    built = subprocess.run([real_python, "-c", BUILD_MODEL, str(model_dir), str(seed)], check=True,
                           capture_output=True, text=True)
    return built.stdout.split()


def transformers_serve(real_python: str, port: int, log: Path) -> tuple[subprocess.Popen[bytes], list[str]]:
    """``transformers serve`` on ``port``, offline (models are asked for by their folder)."""
    # Its console script sits beside its interpreter.
    cmd = [str(Path(real_python).parent / "transformers"), "serve", "--host", "127.0.0.1", "--port", str(port),
           "--log-level", "info"]
    env = offline_env()
    with open(log, "ab") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True)
    return proc, cmd


def offline_env() -> dict[str, str]:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    env.pop("PYTHONPATH", None)
    return env


def chat_requests(log: Path) -> int:
    """Chat completion requests the model server logged (uvicorn's access log)."""
    return len(re.findall(r'"POST /v1/chat/completions HTTP/1\.1" 200', log.read_text()))


def benchlab_config(work: Path, model_name: str) -> Path:
    from benchlab.evaluate.config import DEFAULT_CONFIG

    data = yaml.safe_load(DEFAULT_CONFIG.read_text())
    data["benchmarks"] = {name: data["benchmarks"][name] for name in BENCHMARKS}
    for bench in data["benchmarks"].values():
        bench["dataset"] = str(DEFAULT_CONFIG.parent / bench["dataset"])
    data["server"]["state_dir"] = str(work / "state")
    # A CPU model on a small machine: a few requests at a time, each well within its timeout.
    data["model"].update(name=model_name, concurrency=4, request_timeout_secs=120, max_retries=1)
    data["server"]["deadline_secs"] = 1200
    path = work / "eval.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def slime_config(work: Path, evaluate_url: str, token: str) -> Path:
    """slime's --eval-config, in the form of its examples/eval/scripts/multi_tasks.yaml.

    The rest of the sampling comes from the trainer's arguments (see SLIME_DRIVER): in v0.2.1 a
    delegate dataset does not read ``eval.defaults``, only its own keys, its delegate's
    ``defaults`` and the arguments."""
    data = {"eval": {
        "delegate": [{
            "name": "skills", "url": evaluate_url, "timeout_secs": 1800, "max_retries": 2,
            "headers": {"Authorization": f"Bearer {token}"},
            "datasets": [{"name": name, "n_samples_per_eval_prompt": N_SAMPLES} for name in BENCHMARKS],
        }],
    }}
    path = work / "slime_eval.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--real-python", required=True,
                        help="interpreter with transformers[serving], omegaconf, requests")
    parser.add_argument("--slime", required=True, type=Path, help="slime's source at tag v0.2.1")
    parser.add_argument("--max-tokens", type=int, default=16, help="the trainer's --eval-max-response-len")
    parser.add_argument("--rollout-id", type=int, default=7)
    parser.add_argument("--out", type=Path, help="also write the evidence as JSON here")
    parser.add_argument("--work", type=Path,
                        help="folder for the model, configs and logs (default: a new temporary one)")
    args = parser.parse_args()

    work = args.work or Path(tempfile.mkdtemp(prefix="real-server-n-"))
    work.mkdir(parents=True, exist_ok=True)
    real_python = str(Path(args.real_python).absolute())
    model_dir = work / "tiny-chat-model"
    print(f"model: {model_dir} (vocabulary, parameters: {build_model(real_python, model_dir)})")

    evidence: dict[str, Any] = {"work": str(work)}
    procs: list[subprocess.Popen[bytes]] = []
    try:
        tf_port = free_port()
        tf_log = work / "transformers-serve.log"
        proc, tf_cmd = transformers_serve(real_python, tf_port, tf_log)
        procs.append(proc)
        env = offline_env()
        router = f"http://127.0.0.1:{tf_port}"
        wait_up(f"{router}/v1/models", procs[-1], tf_log)
        evidence["transformers_serve"] = " ".join(tf_cmd)

        direct = {"model": str(model_dir), "n": N_SAMPLES, "max_tokens": 8, "temperature": 1.0,
                  "messages": [{"role": "user", "content": "What is the opposite of hot?"}]}
        answer = httpx.post(f"{router}/v1/chat/completions", json=direct, timeout=300)
        body = answer.json()
        evidence["direct_request"] = direct
        evidence["direct_response"] = {"status": answer.status_code, "body": body}
        choices = len(body.get("choices", []))
        print(f"direct request with n={N_SAMPLES}: HTTP {answer.status_code}, {choices} choice(s)")
        print(json.dumps(body)[:800])
        before = chat_requests(tf_log)

        # benchlab serve in front of it.
        token = secrets.token_hex(16)
        config = benchlab_config(work, str(model_dir))
        bl_port = free_port()
        bl_log = work / "benchlab-serve.log"
        with open(bl_log, "wb") as log:
            procs.append(subprocess.Popen(
                [sys.executable, "-m", "benchlab", "serve", "--config", str(config), "--port", str(bl_port)],
                stdout=log, stderr=subprocess.STDOUT, env={**os.environ, "BENCHLAB_EVAL_TOKEN": token},
                start_new_session=True))
        wait_up(f"http://127.0.0.1:{bl_port}/health", procs[-1], bl_log)

        # slime's delegate client, as a trainer runs it at evaluation time.
        eval_config = slime_config(work, f"http://127.0.0.1:{bl_port}/evaluate", token)
        started = time.monotonic()
        client = subprocess.run(
            [real_python, "-c", SLIME_DRIVER, str(args.slime.absolute()), str(eval_config),
             "127.0.0.1", str(tf_port), str(args.rollout_id), str(args.max_tokens)],
            capture_output=True, text=True, env=env, timeout=3600)
        evidence["slime_client_secs"] = round(time.monotonic() - started, 1)
        evidence["slime_client_log"] = client.stderr[-4000:]
        if client.returncode != 0:
            print(client.stdout, client.stderr[-4000:], sep="\n")
            raise SystemExit(f"slime's client failed (exit {client.returncode})")
        received = json.loads(client.stdout.strip().splitlines()[-1])
        evidence["slime_received"] = received
        evidence["model_chat_requests"] = chat_requests(tf_log) - before
    finally:
        for proc in reversed(procs):
            stop(proc)

    response = received["raw_response"]["skills"]
    print(f"slime's client got, in {evidence['slime_client_secs']}s:")
    print(json.dumps({k: response.get(k) for k in
                      ("status", "samples_asked", "samples_scored", "warning", "error")}, indent=1))
    for run in response.get("runs", []):
        print(json.dumps({k: run.get(k) for k in
                          ("benchmark", "num_prompts", "samples_asked", "samples_scored",
                           "model_errors", "sampling")}))
    print("metrics slime logs:", json.dumps(received["metrics"]))
    prompts = sum(run["num_prompts"] for run in response.get("runs", []))
    print(f"chat requests transformers serve received for the evaluation: "
          f"{evidence['model_chat_requests']} (prompts x n = {prompts * N_SAMPLES})")

    problems = []
    runs = response.get("runs", [])
    for run in runs:
        name, asked, scored = run["benchmark"], run.get("samples_asked"), run.get("samples_scored")
        if asked is None or scored is None:
            problems.append(f"{name}: the response does not say how many samples were scored")
            continue
        if asked != run["num_prompts"] * N_SAMPLES:
            problems.append(f"{name}: asked {asked} samples, not prompts x {N_SAMPLES}")
        if asked - scored != run.get("model_errors"):
            problems.append(f"{name}: {asked - scored} samples missing but model_errors {run.get('model_errors')}")
        if asked != scored and not response.get("warning"):
            problems.append(f"{name}: {asked - scored} samples missing and no warning")
    # Each answer of the model server is one sample: every sample asked for is one of its
    # answers or a model error, or a sample was scored that the model never wrote.
    errors = sum(run.get("model_errors") or 0 for run in runs)
    if evidence["model_chat_requests"] + errors < prompts * N_SAMPLES:
        problems.append(f"{prompts * N_SAMPLES} samples asked for, {evidence['model_chat_requests']} one-choice "
                        f"answers received and {errors} model errors, status {response.get('status')!r}")
    evidence["problems"] = problems
    if args.out:
        args.out.write_text(json.dumps(evidence, indent=1))
    for problem in problems:
        print("PROBLEM:", problem)
    print("ok" if not problems else "benchlab misreported the samples")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
