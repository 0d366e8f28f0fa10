"""A results file shaped like the one lm-evaluation-harness v0.4.9 writes (the numbers are made up).

The shape follows the harness's ``results_<timestamp>.json``: per task ``metric,filter`` keys with
``metric_stderr,filter`` companions (``"N/A"`` where it could not compute one), a group with its
subtasks in ``groups`` and ``group_subtasks``, ``versions``, ``n-shot``, ``n-samples`` with
``original`` and ``effective`` counts, and ``config`` with ``model_args``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


def results_v049(limit: int | None = None) -> dict[str, Any]:
    """The file's content; ``limit`` caps gsm8k's effective samples as ``--limit`` does."""
    gsm8k_n = 1319 if limit is None else min(limit, 1319)
    return {
        "results": {
            "gsm8k": {
                "alias": "gsm8k",
                "exact_match,strict-match": 0.5625,
                "exact_match_stderr,strict-match": 0.0137,
                "exact_match,flexible-extract": 0.5875,
                "exact_match_stderr,flexible-extract": 0.0135,
            },
            "mmlu_stem": {"alias": "stem", "acc,none": 0.4125, "acc_stderr,none": "N/A"},
            "mmlu_abstract_algebra": {"alias": " - abstract_algebra", "acc,none": 0.31, "acc_stderr,none": 0.0465},
            "mmlu_college_physics": {"alias": " - college_physics", "acc,none": 0.2549, "acc_stderr,none": 0.0434},
        },
        "groups": {"mmlu_stem": {"alias": "stem", "acc,none": 0.4125, "acc_stderr,none": "N/A"}},
        "group_subtasks": {
            "mmlu_stem": ["mmlu_abstract_algebra", "mmlu_college_physics"],
            "gsm8k": [],
        },
        "configs": {"gsm8k": {"task": "gsm8k", "num_fewshot": 5, "output_type": "generate_until"}},
        "versions": {"gsm8k": 3.0, "mmlu_stem": 2.0, "mmlu_abstract_algebra": 1.0, "mmlu_college_physics": 1.0},
        "n-shot": {"gsm8k": 5, "mmlu_abstract_algebra": 0, "mmlu_college_physics": 0},
        "higher_is_better": {"gsm8k": {"exact_match": True}, "mmlu_stem": {"acc": True}},
        "n-samples": {
            "gsm8k": {"original": 1319, "effective": gsm8k_n},
            "mmlu_abstract_algebra": {"original": 100, "effective": 100},
            "mmlu_college_physics": {"original": 102, "effective": 102},
        },
        "config": {
            "model": "vllm",
            "model_args": "pretrained=/ckpt/step-1000,tensor_parallel_size=1,dtype=bfloat16",
            "batch_size": "auto",
            "limit": None if limit is None else float(limit),
            "bootstrap_iters": 100000,
        },
        "git_hash": "a1b2c3d",
        "date": 1767225600.25,
        "lm_eval_version": "0.4.9",
        "model_source": "vllm",
        "model_name": "/ckpt/step-1000",
        "model_name_sanitized": "__ckpt__step-1000",
        "total_evaluation_time_seconds": "812.5",
    }


def write_results_v049(folder: Path, stamp: str = "2026-01-01T00-00-00.000001", limit: int | None = None) -> Path:
    """Write the file where ``lm_eval --output_path folder`` would: ``<folder>/<model>/results_<stamp>.json``."""
    out = folder / "__ckpt__step-1000"
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"results_{stamp}.json"
    path.write_text(json.dumps(results_v049(limit), indent=2))
    return path


# A checkpoint evaluation's command: an lm_eval stand-in that writes a v0.4.9-shaped results file into --output_path.
LM_EVAL_SCRIPT = r'''
import os, shutil, sys
out = os.path.join(sys.argv[1], "__ckpt__step-1000")
os.makedirs(out, exist_ok=True)
shutil.copy(os.path.join(os.path.dirname(os.path.abspath(__file__)), "results.json"),
            os.path.join(out, "results_2026-01-01T00-00-00.000001.json"))
'''

LM_EVAL_SPEC = """
name: ckpt-eval
tasks: [{name: gsm8k}]
configs: [{name: step-1000}]
seeds: [0]
retries: 0
command: python run.py {run_dir}
metrics:
  primary: {name: "exact_match,strict-match", goal: max, from: {lm_eval: .}}
"""
