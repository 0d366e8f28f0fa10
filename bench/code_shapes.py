"""Test shapes as benchmark authors write them: does a correct answer score 1 and a wrong one 0?

Runs each shape of ``tests/evaluate/shape_corpus.py`` through the code judge with
the real sandbox and prints one row per shape: what the correct answer scored,
what the wrong one scored, and the reason where a correct answer scored 0.

    PYTHONPATH=src python bench/code_shapes.py

Needs bubblewrap and a cgroup it may write (as root), as the code scorer does.
"""

from __future__ import annotations

import asyncio
import importlib.util
from pathlib import Path

from benchlab.evaluate.harness import judge
from benchlab.evaluate.sandbox import Sandbox, SandboxLimits

_CORPUS = Path(__file__).resolve().parents[1] / "tests" / "evaluate" / "shape_corpus.py"


def _shapes() -> dict:
    spec = importlib.util.spec_from_file_location("shape_corpus", _CORPUS)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.SHAPES


async def _run() -> None:
    sandbox = Sandbox(SandboxLimits(timeout_secs=10, cpu_secs=8, memory_mb=512), concurrency=2)
    shapes = _shapes()
    reports = await asyncio.gather(*(judge(sandbox, answer, tests)
                                     for tests, right, wrong in shapes.values() for answer in (right, wrong)))
    print(f"{'shape':<68} {'correct':>8} {'wrong':>6}  why the correct one failed")
    ok = 0
    for i, name in enumerate(shapes):
        right, wrong = reports[2 * i], reports[2 * i + 1]
        good = right.all_passed and not wrong.all_passed
        ok += good
        print(f"{name:<68} {int(right.all_passed):>8} {int(wrong.all_passed):>6}  {right.why[:90]}")
    n = len(shapes)
    right_ok = sum(reports[2 * i].all_passed for i in range(n))
    wrong_ok = sum(reports[2 * i + 1].all_passed for i in range(n))
    unjudged = sum("cannot be judged" in reports[2 * i].why for i in range(n))
    print(f"\n{ok}/{n} shapes: correct scored 1 and wrong scored 0")
    print(f"correct answers scored 1: {right_ok}/{n} ({n - right_ok} scored 0, {unjudged} of them "
          f"as 'cannot be judged'); wrong answers scored 1: {wrong_ok}/{n}")


if __name__ == "__main__":
    asyncio.run(_run())
