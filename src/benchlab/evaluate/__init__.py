"""The evaluation service: run evaluation datasets against an OpenAI-compatible model and score them.

``create_app`` builds the HTTP server that trainers delegate evaluation to;
``run_once`` is the same evaluation as a one-shot call (``benchlab eval``).
Scorers, the code sandbox and the metrics are usable on their own.
"""

from __future__ import annotations

from typing import Any

from benchlab.evaluate.config import EvalConfig, load_config
from benchlab.evaluate.metrics import SampleScore, aggregate, flatten, majority_answer, pass_at_k

__all__ = [
    "EvalConfig",
    "MathVerifyPool",
    "Sandbox",
    "SandboxLimits",
    "SandboxResult",
    "SampleScore",
    "aggregate",
    "create_app",
    "create_stub_app",
    "flatten",
    "load_config",
    "majority_answer",
    "pass_at_k",
    "run_once",
]

_LAZY = {
    "MathVerifyPool": "benchlab.evaluate.mathpool",
    "Sandbox": "benchlab.evaluate.sandbox",
    "SandboxLimits": "benchlab.evaluate.sandbox",
    "SandboxResult": "benchlab.evaluate.sandbox",
    "create_app": "benchlab.evaluate.server",
    "create_stub_app": "benchlab.evaluate.stub",
    "run_once": "benchlab.evaluate.oneshot",
}


def __getattr__(name: str) -> Any:
    # FastAPI and httpx load only when the server or client parts are asked for.
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'benchlab.evaluate' has no attribute {name!r}")
