"""The evaluation rules of the field, as checks on runs that call lm-evaluation-harness or vLLM.

Teams that publish lm-eval numbers learned them the hard way: tensor parallelism above 1
changes the scores of small models (reductions run in another order), the seed and the
sampling temperature must be fixed and written down, and a checkpoint must be whole before
the harness loads it (else it fails with "Repo id must be in the form ..." for a missing
folder, or evaluates a half-written one).

- :func:`parse_call` reads what a run's command asks of ``lm_eval`` or ``vllm``;
- :func:`rule_warnings` is what ``benchlab validate`` and ``benchlab run`` warn about and
  ``benchlab.run`` returns: tensor parallelism > 1, a seed not named or repeated where it
  samples, one task's configs compared at different temperatures or seeds, each unless the
  spec's ``reasons:`` says why (``tensor_parallel``, ``seed``, ``temperature``);
- :func:`checkpoint_problems` refuses a run before launch whose local checkpoint is
  missing or incomplete (``benchlab validate`` and ``benchlab run``);
- :func:`settings_of` is what a run's ``provenance.json`` records under ``evaluation``,
  and :func:`settings_line` what the report's Settings line shows.
"""

from __future__ import annotations

import importlib.metadata
import os
import re
import shlex
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypedDict

from benchlab.errors import Problem, SpecError
from benchlab.json_types import ConfigValues

if TYPE_CHECKING:
    from benchlab.collect.lm_eval import LmEvalProvenance
    from benchlab.plan import Run
    from benchlab.spec import Spec

LM_EVAL, VLLM = "lm_eval", "vllm"


@dataclass(frozen=True)
class EvalCall:
    """What one command asks of an evaluation tool; None where it does not say."""

    tool: str  # lm_eval | vllm
    model: str | None = None  # lm_eval's pretrained=, vllm's served model
    seed: str | None = None
    temperature: str | None = None
    tensor_parallel_size: int | None = None
    batch_size: str | None = None


class EvaluationSettings(TypedDict):
    """A run's provenance under ``evaluation`` (JSON): :class:`EvalCall`'s fields and the tool's
    version, as the harness's results file says they ran where it says."""

    tool: str
    model: str | None
    seed: str | None
    temperature: str | None
    tensor_parallel_size: int | None
    batch_size: str | None
    version: str | None


def _tokens(command: str) -> list[str]:
    try:
        return shlex.split(command)
    except ValueError:
        return command.split()


def _option(tokens: list[str], *names: str) -> str | None:
    for i, tok in enumerate(tokens):
        for name in names:
            if tok == name and i + 1 < len(tokens):
                return tokens[i + 1]
            if tok.startswith(name + "="):
                return tok[len(name) + 1:]
    return None


def _pairs(text: str | None) -> dict[str, str]:
    """``k=v,k=v`` (lm-eval's --model_args and --gen_kwargs) as a dict."""
    out = {}
    for part in (text or "").split(","):
        key, sep, value = part.partition("=")
        if sep:
            out[key.strip()] = value.strip()
    return out


def _int(value: str | None) -> int | None:
    try:
        return int(value) if value is not None else None
    except ValueError:
        return None


#: What shell quoting adds to a word and splitting a command drops from it.
_QUOTING = str.maketrans("", "", "'\"\\")


def _may_call_a_tool(command: str) -> bool:
    """Whether ``command`` holds a word that names a tool :func:`parse_call` reads. Splitting a
    command into words only drops quotes and backslashes, so such a word is there, contiguous, in
    the command without them: a command where none is can be passed over without splitting it (a
    sweep of 100,000 runs is asked this twice a run before its first launch)."""
    bare = command.translate(_QUOTING)
    return "lm_eval" in bare or "lm-eval" in bare or "vllm" in bare


def parse_call(command: str) -> EvalCall | None:
    """The evaluation tool ``command`` runs (``lm_eval``/``lm-eval``, ``python -m lm_eval``,
    ``vllm serve``, ``python -m vllm.entrypoints...``) and what it asks; None for other commands."""
    if not _may_call_a_tool(command):
        return None
    tokens = _tokens(command)
    names = [os.path.basename(t) for t in tokens]
    if any(n in ("lm_eval", "lm-eval") for n in names) or "lm_eval" in tokens:
        model_args = _pairs(_option(tokens, "--model_args", "--model-args"))
        gen = _pairs(_option(tokens, "--gen_kwargs", "--gen-kwargs"))
        seed = _option(tokens, "--seed")
        return EvalCall(
            LM_EVAL,
            model=model_args.get("pretrained") or model_args.get("model"),
            seed=seed,
            temperature=gen.get("temperature") or model_args.get("temperature"),
            tensor_parallel_size=_int(model_args.get("tensor_parallel_size")),
            batch_size=_option(tokens, "--batch_size", "--batch-size"),
        )
    if "vllm" in names or any(t.startswith("vllm.") for t in tokens):
        model = _option(tokens, "--model")
        if model is None and "serve" in tokens:
            after = tokens[tokens.index("serve") + 1:]
            model = after[0] if after and not after[0].startswith("-") else None
        return EvalCall(
            VLLM,
            model=model,
            seed=_option(tokens, "--seed"),
            tensor_parallel_size=_int(_option(tokens, "--tensor-parallel-size", "-tp")),
            batch_size=_option(tokens, "--max-num-seqs"),
        )
    return None


#: The rules a spec may depart from, saying why under ``reasons:`` (the spec's model lists the same).
RULES = ("tensor_parallel", "seed", "temperature")


def _say_why(rule: str) -> str:
    return f'or say why in the spec: reasons: {{{rule}: "..."}}'


def _float(value: str | None) -> float | None:
    try:
        return float(value) if value is not None else None
    except ValueError:
        return None


def _calls(runs: list[Any]) -> list[tuple[Any, EvalCall]]:
    """The runs that call an evaluation tool, each with what its command asks of it."""
    return [(run, call) for run in runs if (call := parse_call(run.command)) is not None]


def _wide(calls: list[tuple[Any, EvalCall]]) -> list[str]:
    wide: dict[int, list[str]] = {}
    for run, call in calls:
        if (call.tensor_parallel_size or 1) > 1:
            names = wide.setdefault(call.tensor_parallel_size or 1, [])
            if run.config not in names:
                names.append(run.config)
    return [
        f"config(s) {', '.join(configs)} run with tensor_parallel_size={tp}: lm-eval scores of small models "
        "differ with tensor parallelism above 1; use tensor_parallel_size=1 where the model fits one GPU, "
        + _say_why("tensor_parallel")
        for tp, configs in sorted(wide.items())
    ]


def _seeds(calls: list[tuple[Any, EvalCall]]) -> list[str]:
    """A call that names no seed; a sampling call whose seed is the same in every seed of its config."""
    unnamed: dict[str, list[str]] = {}
    per_config: dict[tuple[str, str], list[tuple[Any, EvalCall]]] = {}
    for run, call in calls:
        if call.seed is None:
            names = unnamed.setdefault(call.tool, [])
            if run.config not in names:
                names.append(run.config)
        per_config.setdefault((run.task, run.config), []).append((run, call))
    out = [
        f"config(s) {', '.join(configs)} run {tool} with no --seed: the tool's default seed then decides what "
        "is random in it (few-shot order, sampling), and neither the spec nor BENCHMARKS.md says which seed "
        "that is; pass --seed {seed} (benchlab's seed), " + _say_why("seed")
        for tool, configs in unnamed.items()
    ]
    repeated: list[str] = []
    for (_task, config), group in per_config.items():
        seeds = {run.seed for run, _ in group}
        tool_seeds = {call.seed for _, call in group}
        temperature = max((_float(call.temperature) or 0.0 for _, call in group), default=0.0)
        if len(seeds) > 1 and len(tool_seeds) == 1 and None not in tool_seeds and temperature > 0:
            text = (f"config {config} samples at temperature {temperature:g} with --seed {next(iter(tool_seeds))} "
                    f"in each of its {len(seeds)} seeds: they repeat one sample, so their spread says nothing "
                    "of the sampling's; pass --seed {seed} (benchlab's seed), " + _say_why("seed"))
            if text not in repeated:
                repeated.append(text)
    return out + repeated


def _compared(calls: list[tuple[Any, EvalCall]], field: str, rule: str, unset: str) -> list[str]:
    """Configs of one task run at different values of ``field`` (temperature, seed) for the same seed."""
    by_task: dict[str, dict[int, dict[str, str]]] = {}
    for run, call in calls:
        value = getattr(call, field)
        number = _float(value)
        shown = unset if value is None else (f"{number:g}" if number is not None else value)
        by_task.setdefault(run.task, {}).setdefault(run.seed, {}).setdefault(run.config, shown)
    out = []
    for task, per_seed in by_task.items():
        for values in per_seed.values():
            if len(set(values.values())) > 1:
                listed = ", ".join(f"{config}: {value}" for config, value in values.items())
                out.append(f"task {task} compares configs run at different {field}s ({listed}): their scores "
                           f"differ by more than the config; run them at one {field}, " + _say_why(rule))
                break
    return out


def rule_warnings(spec: Any, runs: list[Any]) -> list[str]:
    """Warnings of the field's rules for the runs of ``spec`` (a Spec and its expanded Runs): what
    ``benchlab validate`` and ``benchlab run`` print and ``benchlab.run`` returns, the same text.

    - ``tensor_parallel``: a run at tensor_parallel_size > 1;
    - ``seed``: an lm-eval or vLLM call that names no ``--seed``; a call that samples (temperature
      above 0) with the same ``--seed`` in every seed of its config; configs of one task run at
      different seeds for the same benchlab seed;
    - ``temperature``: configs of one task run at different temperatures (one that states none runs
      at its task's default, which differs from any stated one as written).

    A rule whose key the spec's ``reasons:`` holds is not checked."""
    reasons = getattr(spec, "reasons", None) or {}
    calls = _calls(runs)
    out: list[str] = []
    if not reasons.get("tensor_parallel"):
        out += _wide(calls)
    if not reasons.get("seed"):
        out += _seeds(calls)
        out += _compared([(r, c) for r, c in calls if c.seed is not None], "seed", "seed", "tool default")
    if not reasons.get("temperature"):
        out += _compared(calls, "temperature", "temperature", "task default")
    return out


def _local_path(model: str, workdir: Path) -> Path | None:
    """``model`` as a local folder when it is written as one (absolute, ./, ../, ~, or an
    existing folder); None for a hub id such as ``org/name``."""
    if model.startswith(("/", "./", "../", "~")):
        return Path(os.path.expanduser(model)) if not model.startswith(("./", "../")) else workdir / model
    candidate = workdir / model
    return candidate if candidate.is_dir() else None


def checkpoint_problems(runs: list[Any], where: str, workdir: Path | None = None) -> list[Problem]:
    """A problem for each run whose command loads a local checkpoint that is missing, not a
    folder, or not whole (no weights, shards missing from its index, a shard cut short)."""
    from benchlab.execute.watch import weights_problem

    problems: list[Problem] = []
    seen: set[Path] = set()
    base = workdir or Path.cwd()
    for run in runs:
        call = parse_call(run.command)
        if call is None or not call.model or "{" in call.model:
            continue
        path = _local_path(call.model, base)
        if path is None or path in seen:
            continue
        seen.add(path)
        if not path.exists():
            why = "no such folder"
        elif not path.is_dir():
            why = "not a folder"
        else:
            why = weights_problem(path) or ""
        if why:
            problems.append(Problem(where, None, f"configs[{run.config}]",
                                    f"the checkpoint {call.model} that {call.tool} would load: {why}"))
    return problems


def refuse_incomplete_checkpoints(spec: Spec, runs: list[Run], statuses: Callable[[], Mapping[str, str]],
                                  *, rerun_all: bool = False) -> None:
    """Raise :class:`~benchlab.errors.SpecError` when a run still to do would load a local
    checkpoint that is missing or not whole (:func:`checkpoint_problems`), before anything runs.

    A completed run is not to do (unless ``rerun_all``): its checkpoint may have been moved or
    deleted since, and the results folder stays usable. ``statuses`` gives the ledger's run
    states by id; it is asked only when some run of ``runs`` has a problem, so a plan that loads
    no local checkpoint never reads the ledger for this.
    """
    from benchlab.ledger import COMPLETED

    where = str(spec.path) if spec.path is not None else spec.name
    if not checkpoint_problems(runs, where, spec.work_path):
        return
    known = {} if rerun_all else statuses()
    todo = [r for r in runs if known.get(r.run_id) != COMPLETED]
    problems = checkpoint_problems(todo, where, spec.work_path)
    if problems:
        raise SpecError(problems)


def tool_version(tool: str) -> str | None:
    """The installed version of the tool's package (``lm_eval``, ``vllm``), or None."""
    for dist in ({LM_EVAL: ("lm_eval", "lm-eval"), VLLM: ("vllm",)}.get(tool, ())):
        try:
            return importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            continue
    return None


def settings_of(command: str, lm_eval: LmEvalProvenance | None = None) -> EvaluationSettings | None:
    """What a run's provenance records under ``evaluation``: tool, harness version, seed,
    temperature, tensor parallelism, batch size, model. ``lm_eval`` is the provenance read from
    the harness's results file, whose ``config`` says what actually ran; the command fills the rest."""
    call = parse_call(command)
    if call is None:
        return None
    out = EvaluationSettings(tool=call.tool, model=call.model, seed=call.seed, temperature=call.temperature,
                             tensor_parallel_size=call.tensor_parallel_size, batch_size=call.batch_size,
                             version=tool_version(call.tool))
    if lm_eval:
        harness = lm_eval.get("lm_eval_version")
        if harness:
            out["version"] = str(harness)
        ran = lm_eval.get("run_config") or {}
        if ran.get("random_seed") is not None:
            out["seed"] = str(ran["random_seed"])
        if ran.get("batch_size") is not None:
            out["batch_size"] = str(ran["batch_size"])
        model_args = lm_eval.get("model_args")
        model_args = model_args if isinstance(model_args, dict) else _pairs(
            model_args if isinstance(model_args, str) else None)
        if _int(str(model_args.get("tensor_parallel_size"))) is not None:
            out["tensor_parallel_size"] = _int(str(model_args["tensor_parallel_size"]))
        gen = ran.get("gen_kwargs")
        gen = gen if isinstance(gen, dict) else _pairs(gen if isinstance(gen, str) else None)
        if gen.get("temperature") is not None:
            out["temperature"] = str(gen["temperature"])
    return out


def settings_line(command: str, seeds: list[int], version: str | None = None) -> str:
    """``lm_eval: seed 1234, temperature task default, tensor_parallel_size 1, batch_size auto,
    version 0.4.13`` for a task's command template (its params and variables filled in);
    '' for a command that runs no evaluation tool."""
    call = parse_call(command)
    if call is None:
        return ""
    seed = call.seed
    if seed is not None and "{seed}" in seed:
        seed = ", ".join(str(s) for s in seeds)
    parts = [
        f"seed {seed if seed is not None else 'tool default'}",
        f"temperature {call.temperature if call.temperature is not None else 'task default'}",
        f"tensor_parallel_size {call.tensor_parallel_size or 1}",
        f"batch_size {call.batch_size or 'tool default'}",
    ]
    if version:
        parts.append(f"{call.tool} {version}")
    return f"{call.tool}: " + ", ".join(parts)


def fill(template: str, values: ConfigValues) -> str:
    """``template`` with each ``{name}`` of ``values`` (a spec's variables and parameters) filled in;
    other placeholders kept."""
    return re.sub(r"\{([A-Za-z_][A-Za-z0-9_]*)\}",
                  lambda m: str(values[m.group(1)]) if m.group(1) in values else m.group(0), template)
