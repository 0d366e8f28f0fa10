"""How a code answer is judged: the answer computes values in a sandbox, the verdict is decided here.

A program that runs the answer cannot be trusted to report on it: the answer
shares its process, so it can rewrite memory, swap classes, patch what the
tests compare with, or print whatever the reader expects. So no verdict is
ever read from the answer's process:

1. ``testplan.plan_tests`` splits the tests, on this side, into the calls
   into the answer (answer probes), what only the tests' own code computes
   (tests probes) and the comparison (glue). Where a statement needs data
   the tests compute (``random.Random(42)``), ``testdata.py`` first runs the
   tests' own code alone in a fresh tests' sandbox, and the statement is
   split again with that data written as literals.
2. The **answer's sandbox** runs the answer, then each answer probe, and sends
   back each value as plain data (``plain.py``'s tagged JSON). The program holds
   the answer, the tests' imports, the calls' arguments, and nothing of the
   expected side: there is no secret, no verdict and no expected value in it
   to find or forge. Whatever it sends is taken for the answer's return
   values (and the arguments it changed in place), which is all an answer
   decides in ``answer + tests``.
3. Where a test needs its own code (a helper it defines, ``numpy``,
   ``unittest``), a second, fresh **tests' sandbox** runs the tests' setup
   without a line of the answer and evaluates those parts, given the answer's
   values as plain data.
4. **Here**, ``glue.Glue`` rebuilds exact built-ins from the data and
   evaluates each check (``==``, ``math.isclose``...) with Python's own code.

Which of the tests' names that are also Python's builtins reach the answer (``def sum``
under test) is ``entry.choices``'s decision: the item's ``entry_point``, else each way of
binding them, a test passing only where every way passed it.

A check passes when its comparison is true (or, for a call, when it returns).
A call that raised or an answer's sandbox that ended before it sent its values
fails the check, with why. Tests that cannot be split (``testplan.Unjudgeable``,
a setup statement the split would drop), and tests whose split check failed for
a reason other than a false comparison (a value that is not plain data, a name
missing in the tests' sandbox), are judged by ``live.judge_whole`` instead: the
tests' program runs whole in the tests' sandbox, each call of the answer's
reaching the answer's sandbox through here as plain data.
"""

from __future__ import annotations

import ast
import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from benchlab.evaluate import entry, live, plain, testdata
from benchlab.evaluate.glue import GLUE_BUILTINS, Glue, GlueError, module, truth
from benchlab.evaluate.testplan import Plan, Probe, plan_tests


@dataclass(frozen=True)
class HarnessReport:
    """The verdict: one per test, and why the first failing one failed."""

    passed: tuple[bool, ...]
    why: str = ""

    @property
    def all_passed(self) -> bool:
        return bool(self.passed) and all(self.passed)


class _Runs(Protocol):
    async def run(self, program: str) -> Any: ...


# The sandboxed programs: plain.py's functions, then this runner. It is the same for both sandboxes;
# the tests' one has no answer. Its report is one JSON line on the output it kept.
_RUNNER = r'''

def _run(answer, steps):
    import json, os
    dumps, write, exit_now = json.dumps, os.write, os._exit
    out = os.dup(1)
    os.dup2(os.open(os.devnull, os.O_WRONLY), 1)
    ns = {"__name__": "__main__", "__builtins__": __builtins__}
    report = {"loaded": "", "values": {}, "failed": [], "modules": {}}
    live = {}  # a tests' name -> the object last handed to the answer for it, as the answer left it
    if answer is not None:
        try:
            exec(compile(answer, "<answer>", "exec", dont_inherit=True), ns)
        except BaseException as exc:
            report["loaded"] = type(exc).__name__
            steps = ()
    for step in steps:
        kind, index = step[0], step[1]
        try:
            if kind == "exec":
                exec(compile(step[2], "<tests>", "exec", dont_inherit=True), ns)
            elif kind == "own":
                for name in step[2]:
                    if name not in ns:  # the function under test, missing: never Python's builtin instead
                        def absent(*args, _name=name, **kwargs):
                            raise NameError(_name)
                        ns[name] = absent
            elif kind == "forget":
                for name in step[2]:
                    live.pop(name, None)
            elif kind == "module":
                value = ns.get(step[2])
                report["modules"][step[2]] = value.__name__ if type(value) is type(os) else ""
            else:
                pid, source, inject, bind, mutates = step[2:]
                for name, data in inject.items():
                    tests_name = mutates.get(name)
                    ns[name] = live[tests_name] if tests_name in live else decode(data)
                    if tests_name is not None and type(ns[name]) in (list, dict, set, bytearray):
                        live[tests_name] = ns[name]
                try:
                    value = eval(compile(source, "<tests>", "eval", dont_inherit=True), ns)
                except BaseException as exc:
                    report["values"][pid] = ["e", type(exc).__name__]
                    if bind:
                        raise
                    continue
                try:
                    report["values"][pid] = encode(value)
                except BaseException as exc:
                    report["values"][pid] = ["x", "its value could not be read: " + type(exc).__name__]
                for name in mutates:
                    if type(ns[name]) in (list, dict, set, bytearray):
                        report["values"][pid + ">" + name] = encode(ns[name])
                if bind:
                    ns["__bl_value"] = value
                    exec(bind + " = __bl_value", ns)
        except BaseException as exc:
            report["failed"].append([index, type(exc).__name__])
    write(out, (dumps(report) + "\n").encode())
    exit_now(0)


_run(__ANSWER__, __STEPS__)
'''


def _program(answer: str | None, steps: list[list]) -> str:
    return plain.SOURCE + _RUNNER.replace("__ANSWER__", repr(answer)).replace("__STEPS__", repr(steps))


@dataclass
class _Report:
    """What a sandbox sent: the answer loaded or not, probe values, failed statements, module names."""

    ran: bool
    loaded: str = ""
    values: dict[str, Any] | None = None
    failed: dict[int, str] | None = None
    modules: dict[str, str] | None = None
    why: str = ""


def _read(stdout: str, asked: set[str], why_not: str) -> _Report:
    """The report on the last line of ``stdout``; only the probes asked of this sandbox count."""
    lines = stdout.strip().splitlines()
    try:
        data = json.loads(lines[-1])
    except (ValueError, IndexError, RecursionError):
        return _Report(False, why="the program ended before it reported: " + why_not)
    if not isinstance(data, dict) or not isinstance(data.get("values"), dict):
        return _Report(False, why="the program ended before it reported: " + why_not)
    values: dict[str, Any] = {}
    for pid, encoded in data["values"].items():
        if pid in asked or pid.split(">", 1)[0] + ">" in asked:
            try:
                values[pid] = plain.decode(encoded)
            except (plain.PlainDataError, RecursionError):
                values[pid] = plain.Failed("its value is not plain data")
    failed = {}
    for item in data.get("failed") or []:
        if isinstance(item, list) and len(item) == 2 and type(item[0]) is int and isinstance(item[1], str):
            failed[item[0]] = item[1][:100]
    modules = {k: v for k, v in (data.get("modules") or {}).items() if isinstance(k, str) and isinstance(v, str)}
    loaded = str(data["loaded"]) if isinstance(data.get("loaded"), str) else "?"
    return _Report(True, loaded, values, failed, modules)


@dataclass
class _Walk:
    """One pass over the plan: the injections it could compute and, at the end, the verdicts."""

    injections: dict[str, dict[str, list]]
    passed: list[bool]
    whys: list[str]


def _walk(plan: Plan, values: dict[str, Any], failed: dict[int, str], modules: dict[str, Any]) -> _Walk:
    env: dict[str, Any] = dict(GLUE_BUILTINS)
    env.update(modules)
    injections: dict[str, dict[str, list]] = {}
    passed = [True] * plan.tests
    whys = [""] * plan.tests
    broken = ""
    changes = {p.pid: p for p in plan.probes if p.mutates}
    applied: set[str] = set()

    def fail(test: int | None, why: str) -> None:
        if test is not None and passed[test]:
            passed[test] = False
            whys[test] = why

    def changed_in_place(pid: str) -> None:
        """The arguments the answer's call ``pid`` changed: what the tests read from its return on."""
        if pid not in changes or pid in applied:
            return
        applied.add(pid)
        probe = changes[pid]
        for name, tests_name in probe.mutates.items():
            after = values.get(f"{pid}>{name}")
            if after is None or type(env.get(tests_name)) is not type(after):
                continue
            unrolled = plan.unrolled_over.get(tests_name, -1)
            if unrolled > probe.step and after != env[tests_name]:
                fail(plan.steps[min(unrolled, len(plan.steps) - 1)].test,
                     f"the answer changed {tests_name} in place, and a later loop of the tests over it was "
                     "unrolled over its value before the call")
            env[tests_name] = after

    glue = Glue(env, values, on_read=changed_in_place)

    for step in plan.steps:
        for probe in plan.probes_at(step.index):
            computed: dict[str, list] = {}
            for name, node in probe.inject.items():
                try:
                    computed[name] = plain.encode(glue.eval(node))
                except Exception:  # noqa: BLE001 - a value not computable (yet): the probe is not sent
                    break
            else:
                injections[probe.pid] = computed
        if broken:
            fail(step.test, broken)
            continue
        if step.index in failed:
            why = f"{failed[step.index]} in the tests' setup"
            if step.test is None:
                broken = why
            fail(step.test, why)
            continue
        try:
            if step.kind == "setup":
                for name, module_name in step.modules.items():
                    env[name] = module(module_name)
                if step.glue is not None and step.targets is not None:
                    value = glue.eval(step.glue)
                    _assign(env, step.targets, value)
            elif step.kind == "check" and step.glue is not None:
                ran = step.mode == "runs" and isinstance(step.glue, ast.Name) and isinstance(
                    values.get(step.glue.id), plain.Failed) and values[step.glue.id].opaque
                value = True if ran else glue.eval(step.glue)
                if step.mode == "truth" and not truth(value):
                    fail(step.test, "AssertionError")
            elif step.kind == "unjudgeable":
                fail(step.test, "cannot be judged apart from the answer: " + step.why)
            elif step.kind == "fails":
                fail(step.test, step.why)
        except GlueError as exc:
            fail(step.test, str(exc))
            if step.kind == "setup" and step.test is None:
                broken = str(exc)
        except Exception as exc:  # noqa: BLE001 - Python's own error in a comparison fails the check
            fail(step.test, type(exc).__name__)
            if step.kind == "setup" and step.test is None:
                broken = type(exc).__name__
        for probe in plan.probes_at(step.index):
            changed_in_place(probe.pid)  # a call the statement ran but whose value it did not read
    return _Walk(injections, passed, whys)


def _assign(env: dict[str, Any], targets: ast.expr, value: Any) -> None:
    if isinstance(targets, ast.Name):
        env[targets.id] = value
        return
    if isinstance(value, plain.Failed):
        raise GlueError(value.why)
    items = list(value)
    if not isinstance(targets, ast.Tuple | ast.List) or len(items) != len(targets.elts):
        raise ValueError("unpacking")
    for target, item in zip(targets.elts, items, strict=True):
        _assign(env, target, item)


def _answer_steps(plan: Plan, injections: dict[str, dict[str, list]]) -> list[list]:
    steps: list[list] = [["own", -1, sorted(plan.answer_names)]] if plan.answer_names else []
    steps += [["module", -1, name] for name in sorted(plan.free_modules)]
    mutated = {name for probe in plan.probes for name in probe.mutates.values()}
    for step in plan.steps:
        if step.binds & mutated:
            steps.append(["forget", step.index, sorted(step.binds & mutated)])
        if step.in_answer:
            steps.append(["exec", step.index, step.source])
        for probe in plan.probes_at(step.index):
            if probe.side == "answer" and probe.pid in injections:
                steps.append(["probe", step.index, probe.pid, probe.source, injections[probe.pid], probe.bind,
                              probe.mutates])
    return steps


def _tests_steps(plan: Plan, injections: dict[str, dict[str, list]]) -> list[list]:
    steps: list[list] = [["exec", -1, f"import {name}"] for name in sorted(plan.free_modules)]
    for step in plan.steps:
        if step.in_tests:
            steps.append(["exec", step.index, step.source])
        for probe in plan.probes_at(step.index):
            if probe.side == "tests" and probe.pid in injections:
                steps.append(["probe", step.index, probe.pid, probe.source, injections[probe.pid], "", {}])
    return steps


def _side(plan: Plan, side: str) -> list[Probe]:
    return [p for p in plan.probes if p.side == side]


def _ended(result: Any) -> str:
    if getattr(result, "error", ""):
        return str(result.error)
    if getattr(result, "timed_out", False):
        return "timed out"
    return f"exit code {getattr(result, 'exit_code', '?')}"


def _split_may_be_wrong(passed: list[bool], whys: list[str]) -> bool:
    """A check of the split failed for a reason the split itself, not the answer, may cause (anything
    but a false comparison or an answer that did not load): the tests' program, run whole, decides."""
    return any(not ok and why != "AssertionError" and not why.startswith("the answer raised ")
               for ok, why in zip(passed, whys, strict=True))


def _runs_nowhere(step: Any) -> bool:
    """A statement of the tests' setup that neither sandbox runs and the glue does not follow (a loop
    that calls the answer and raises): the split would drop it."""
    return (step.kind == "setup" and step.test is None and step.glue is None and not step.in_tests
            and not step.in_answer and not step.modules and bool(step.source.strip()))


async def judge(sandbox: _Runs, answer: str, tests: str | Sequence[str], entry_point: str | None = None
                ) -> HarnessReport:
    """Run ``answer`` against ``tests``: its calls in ``sandbox``, the verdict here.

    ``entry_point``: the item's function under test, where it names one. Where the answer
    defines names of Python's builtins that the tests use, the tests are judged once per way
    of binding them (``entry.choices``) and a test passes only where every judgement passed it.
    Tests the split cannot take apart, or whose split check failed for a reason of the split's
    own, are judged with the tests' program run whole in a sandbox of its own (``live.py``)."""
    ways = entry.choices(answer, tests, entry_point)
    if ways.why:
        return HarnessReport((False,) * count_tests(tests), f"test 1: {ways.why}")
    passed: list[bool] = []
    whys: list[str] = []
    for way in ways.ways:
        got, got_whys = await _judge_one(sandbox, answer, tests, way)
        if not passed:
            passed, whys = [True] * len(got), [""] * len(got)
        if len(got) != len(passed):  # each way plans the same statements: a mismatch is a bug, never a pass
            got, got_whys = [False] * len(passed), [f"judged as {len(got)} tests, not {len(passed)}"] * len(passed)
        for i, (ok, why) in enumerate(zip(got, got_whys, strict=True)):
            if passed[i] and not ok:
                passed[i], whys[i] = False, why + ways.describe(way)
        if not any(passed):
            break  # no later way can pass a test again
    why = next((f"test {i + 1}: {w}" for i, (ok, w) in enumerate(zip(passed, whys, strict=True)) if not ok), "")
    return HarnessReport(tuple(passed), why)


async def _judge_one(sandbox: _Runs, answer: str, tests: str | Sequence[str], own: frozenset[str]
                     ) -> tuple[list[bool], list[str]]:
    """Each test's verdict and why, with the builtin names in ``own`` reaching the answer."""
    plan = plan_tests(tests, answer_names=own)
    if plan.unsplit:
        # The tests compute data the split needs: their own code runs first, alone, and hands it over.
        expanded = testdata.expand(tests)
        result = await sandbox.run(testdata.program(expanded, own))
        recording = testdata.read(result.stdout, _ended(result))
        replacements, notes = testdata.rewrite(expanded, recording, set(plan.unsplit))
        plan = plan_tests(tests, replacements, notes, answer_names=own)
    whole = hasattr(sandbox, "pair")
    if whole and any(step.kind == "unjudgeable" or _runs_nowhere(step) for step in plan.steps):
        return await live.judge_whole(sandbox, answer, tests, plan.tests, own)
    passed, whys = await _judge_split(sandbox, answer, plan)
    if whole and _split_may_be_wrong(passed, whys):
        return await live.judge_whole(sandbox, answer, tests, plan.tests, own)
    return passed, whys


async def _judge_split(sandbox: _Runs, answer: str, plan: Plan) -> tuple[list[bool], list[str]]:
    """Each test's verdict and why, from the split: the answer's probes, the tests' probes, the glue here."""
    values: dict[str, Any] = {}
    failed: dict[int, str] = {}
    first = _walk(plan, values, failed, {})
    result = await sandbox.run(_program(answer, _answer_steps(plan, first.injections)))
    asked = {p.pid for p in _side(plan, "answer")} | {p.pid + ">" for p in _side(plan, "answer") if p.mutates}
    report = _read(result.stdout, asked, _ended(result))
    if not report.ran:
        return [False] * plan.tests, [report.why] * plan.tests
    if report.loaded:
        return [False] * plan.tests, [f"the answer raised {report.loaded} before the tests"] * plan.tests
    values.update(report.values or {})
    failed.update(report.failed or {})
    for probe in _side(plan, "answer"):
        values.setdefault(probe.pid, plain.Failed("the answer's sandbox did not compute it"))
    modules: dict[str, Any] = {}
    for name in plan.free_modules:
        found = (report.modules or {}).get(name, "")
        modules[name] = module(name) if found == name else plain.Failed(
            f"the tests use {name}, which the answer does not bind to the module {name}")
    tests_side = _side(plan, "tests")
    # The tests' sandbox also runs when a statement of the tests only it runs could fail.
    if tests_side or any(s.in_tests and not s.in_answer and s.glue is None for s in plan.steps):
        middle = _walk(plan, values, failed, modules)
        result = await sandbox.run(_program(None, _tests_steps(plan, middle.injections)))
        tests_report = _read(result.stdout, {p.pid for p in tests_side}, _ended(result))
        values.update(tests_report.values or {})
        failed.update(tests_report.failed or {})
        for probe in tests_side:
            values.setdefault(probe.pid, plain.Failed(
                "the tests' sandbox did not compute it" + (f" ({tests_report.why})" if tests_report.why else "")))
    final = _walk(plan, values, failed, modules)
    return final.passed, final.whys


def count_tests(tests: str | Sequence[str]) -> int:
    """How many tests ``judge`` reports on for ``tests``."""
    return plan_tests(tests).tests
