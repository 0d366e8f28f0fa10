"""Runs and their ids: expanding a ``Spec`` into every (task, config, seed).

A run's id is a short hash of what defines it — benchmark, task, config,
resolved parameters, seed and command — so the same spec names the same runs
every time, and changing a parameter renames exactly the runs it touches.
Its human name is its coordinates, ``digits/mlp/s3``.
"""

from __future__ import annotations

import gc
import hashlib
import json
import shlex
import string
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from itertools import chain
from pathlib import Path
from typing import Any

from benchlab.json_types import ConfigValues
from benchlab.spec import Config, Resources, Spec, Task
from benchlab.spec.quoting import canonical, plain, shell_words, text_of

ID_LENGTH = 12
_ID_BYTES = ID_LENGTH // 2  # an id is the hex of the hash's first bytes
RUN_DIR_PLACEHOLDER = "{run_dir}"
# Stands for the run's id while the command is rendered: no value can hold a NUL byte.
_RUN_ID_MARK = "\x00run_id\x00"
_SEED_MARK = "\x00seed\x00"


class _Plain(string.Formatter):
    """str.format for environment values: text as it is, true/false, JSON for lists and mappings."""

    def format_field(self, value: Any, format_spec: str) -> str:
        if isinstance(value, _Raw):
            return value.text
        return text_of(value, format_spec)


class _Quoting(string.Formatter):
    """str.format for commands: every substituted value becomes shell words (``benchlab.spec.quoting``)."""

    def format_field(self, value: Any, format_spec: str) -> str:
        if isinstance(value, _Raw):
            return value.text
        return shell_words(value, format_spec)


@dataclass(frozen=True)
class _Raw:
    text: str


_FORMATTER = _Quoting()
_PLAIN = _Plain()


@dataclass(frozen=True)
class Run:
    """One (task, config, seed) of a benchmark, with everything needed to launch it."""

    run_id: str
    benchmark: str
    task: str
    config: str
    seed: int
    params: ConfigValues
    command: str  # rendered, with the literal '{run_dir}' still in it (see ``command_for``)
    env: dict[str, str] = field(default_factory=dict)
    workdir: str = "."
    resources: Resources = field(default_factory=Resources)
    timeout: float | None = None
    retries: int = 2
    retry_on: dict[str, int] = field(default_factory=dict)  # per failure class, over ``retries``

    @property
    def name(self) -> str:
        return f"{self.task}/{self.config}/s{self.seed}"

    def command_for(self, run_dir: Path | str) -> str:
        """The shell command with the run directory filled in."""
        return self.command.replace(RUN_DIR_PLACEHOLDER, shlex.quote(str(run_dir)))

    def context(self) -> dict[str, str]:
        """What a metric source may name: ``{task}``, ``{config}``, ``{seed}`` and every param."""
        return run_context(self.task, self.config, self.seed, self.params)

    def resolved_config(self) -> ConfigValues:
        """Everything that defines this run, as written to its ``config.yaml`` (the run's
        configuration as its command reads it: the user's params and values under benchlab's keys)."""
        return {
            "run_id": self.run_id,
            "name": self.name,
            "benchmark": self.benchmark,
            "task": self.task,
            "config": self.config,
            "seed": self.seed,
            "params": self.params,
            "command": self.command,
            "workdir": self.workdir,
            "env": self.env,
            "resources": self.resources.model_dump(exclude_defaults=True),
            "timeout": self.timeout,
            "retries": self.retries,
            **({"retry_on": self.retry_on} if self.retry_on else {}),
        }

    def retries_for(self, failure_class: str) -> int:
        """How many times a failure of ``failure_class`` may be retried."""
        return self.retry_on.get(failure_class, self.retries)


def run_context(task: str, config: str, seed: int, params: ConfigValues) -> dict[str, str]:
    """The placeholders a metric source of this run may use."""
    ctx = {k: str(v) for k, v in params.items()}
    ctx.update(task=task, config=config, seed=str(seed))
    return ctx


def run_id(benchmark: str, task: str, config: str, params: ConfigValues, seed: int,
           command: str) -> str:
    """A stable short id: the first 12 hex digits of the SHA-256 of the run's definition."""
    return _hash_id(benchmark, task, config, canonical(params), seed, command)


def _hash_id(benchmark: str, task: str, config: str, params: dict[str, Any], seed: int, command: str) -> str:
    blob = json.dumps(
        {"benchmark": benchmark, "task": task, "config": config, "params": params,
         "seed": seed, "command": command},
        sort_keys=True, separators=(",", ":"), default=str,
    )
    return hashlib.sha256(blob.encode()).hexdigest()[:ID_LENGTH]


def command_template(spec: Spec, task: Task, cfg: Config) -> str | None:
    """The command of a (task, config): the config's, else the task's, else the spec's."""
    if cfg.command is not None:
        return cfg.command
    return task.command if task.command is not None else spec.command


_Piece = tuple[str, str | None, str, str | None]  # literal text, field name, format spec, conversion
_COMPILED: dict[str, list[_Piece] | None] = {}


def _compile(template: str) -> list[_Piece] | None:
    """``template`` split into literal text and placeholders, once; None where a placeholder
    reaches into a value (``{x.y}``, ``{x[0]}``) or nests, which ``str.format`` handles."""
    if template not in _COMPILED:
        pieces: list[_Piece] | None = []
        for literal, name, spec, conv in string.Formatter().parse(template):
            if name is not None and (not name.isidentifier() or "{" in (spec or "")):
                pieces = None
                break
            assert pieces is not None
            pieces.append((literal, name, spec or "", conv))
        _COMPILED[template] = pieces
    return _COMPILED[template]


def _render(template: str, values: dict[str, Any]) -> str:
    pieces = _compile(template)
    if pieces is None:
        return _FORMATTER.vformat(template, (), values)
    out = []
    for literal, name, spec, conv in pieces:
        out.append(literal)
        if name is not None:
            value = values[name]
            if conv is not None:
                value = _FORMATTER.convert_field(value, conv)
            out.append(_FORMATTER.format_field(value, spec))
    return "".join(out)


def _seed_is_plain(template: str) -> bool:
    """Whether every ``{seed}`` of ``template`` is bare (no format spec or conversion)."""
    return all(spec == "" and conv is None for _, name, spec, conv in string.Formatter().parse(template)
               if name == "seed")


@dataclass(frozen=True)
class _Pair:
    """What one (task, config) gives each of its runs, worked out once for all seeds."""

    task: Task
    config: Config
    params: dict[str, Any]  # plain values, as runs carry them
    canonical: dict[str, Any]  # as run ids hash them
    values: dict[str, Any]  # every placeholder but the seed
    template: str
    rendered: str | None  # the command with the seed still to fill in, where that is safe


def expand(spec: Spec) -> list[Run]:
    """Every run of the spec, seed-major: each seed of every (task, config) before the next seed.

    Seed-major order means an interrupted sweep already holds paired seeds for
    every config, which is what comparisons need.

    What the runs of a (task, config) share (the parts of the id's JSON, the rendered
    command, the run itself) is worked out once per pair: at 100,000 runs, building each
    run from scratch took a second, most of the time before a sweep's first launch.
    """
    workdir = str(spec.work_path)
    retry_on = spec.retry_budget
    plain_env = not any("{" in v for v in spec.env.values())
    pairs = []
    for task in spec.tasks:
        for cfg in spec.configs:
            params = {**task.params, **cfg.params}
            template = command_template(spec, task, cfg)
            assert template is not None  # guaranteed by spec validation
            values: dict[str, Any] = {**spec.variables, **params, "task": task.name, "config": cfg.name,
                                      "benchmark": spec.name, "run_dir": _Raw(RUN_DIR_PLACEHOLDER),
                                      "run_id": _Raw(_RUN_ID_MARK)}
            # A bare {seed} is an integer's digits: rendered once per pair, filled in per seed.
            rendered = (_render(template, {**values, "seed": _Raw(_SEED_MARK)})
                        if _seed_is_plain(template) else None)
            pairs.append(_Pair(task, cfg, plain(params), canonical(params), values, template, rendered))
    with _collector_paused():
        return _expand_pairs(spec, pairs, workdir, retry_on, plain_env)


@contextmanager
def _collector_paused() -> Iterator[None]:
    """Hold off the cycle collector: a plan is hundreds of thousands of new objects, none in a
    cycle, and the collector's passes over them took a fifth of the time of building them."""
    was_on = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_on:
            gc.enable()


def _expand_pairs(spec: Spec, pairs: list[_Pair], workdir: str, retry_on: dict[str, int],
                  plain_env: bool) -> list[Run]:
    seeds = [(seed, str(seed)) for seed in spec.seed_list]
    makers = [_RunMaker(spec, pair, workdir, retry_on, plain_env).runs(seeds) for pair in pairs]
    # Seed-major: the first seed of every pair, pair by pair, then the next seed. Each pair's runs
    # are made one at a time in that order, so that the runs lie in memory in plan order: every
    # later pass over the plan (the runs to do, their order, the plan's digest) then reads memory
    # in sequence, where runs made pair by pair made each pass jump between 100 places and took
    # two to three times as long.
    return list(chain.from_iterable(zip(*makers, strict=True)))


class _RunMaker:
    """Makes the runs of one (task, config) from what they share.

    Where ``{seed}`` is bare in the command (the usual case), the command and the JSON of the
    id are made by replacing the seed's mark with its digits, never rendered or JSON-encoded per
    run; a run is its pair's fields copied, with its own id, seed and command filled in."""

    def __init__(self, spec: Spec, pair: _Pair, workdir: str, retry_on: dict[str, int], plain_env: bool):
        task, cfg = pair.task, pair.config
        self.pair = pair
        self.blob = _IdBlob(spec.name, task.name, cfg.name, pair.canonical)
        self.env = None if plain_env else spec.env
        self.proto = Run(run_id="", benchmark=spec.name, task=task.name, config=cfg.name, seed=0,
                         params=pair.params, command="", env=dict(spec.env) if plain_env else {},
                         workdir=workdir, resources=cfg.resources or spec.resources, timeout=spec.timeout,
                         retries=spec.retries, retry_on=retry_on).__dict__

    def runs(self, seeds: list[tuple[int, str]]) -> Iterator[Run]:
        """The pair's run of each seed, in the order of ``seeds``, made as they are asked for."""
        rendered = self.pair.rendered
        if rendered is None:
            for seed, _ in seeds:
                yield self._rendered(seed)
            return
        # The command as the id hashes it: with '{run_id}' in it (as ids always have).
        id_command = rendered.replace(_RUN_ID_MARK, "{run_id}")
        has_id = _RUN_ID_MARK in rendered
        blob, proto, env = self.blob, self.proto, self.env
        head, tail = blob.head(id_command), blob.tail
        sha256 = hashlib.sha256
        seeded = _SEED_MARK in rendered
        if seeded:
            # The JSON of the command with the seed's mark in it: a seed's digits need no escaping,
            # so replacing the mark's JSON with them gives the JSON of the command with the seed.
            command_json, mark_json = blob.dump(id_command), blob.dump(_SEED_MARK)[1:-1]
        command = rendered
        for seed, digits in seeds:
            if seeded:
                command = rendered.replace(_SEED_MARK, digits)
                head = blob.head_json(command_json.replace(mark_json, digits))
            rid = sha256((head + digits + tail).encode()).digest()[:_ID_BYTES].hex()
            fields = proto.copy()
            fields["run_id"] = rid
            fields["seed"] = seed
            fields["command"] = command.replace(_RUN_ID_MARK, rid) if has_id else command
            if env is not None:
                fields["env"] = self._env(seed, rid)
            run = _new_run(Run)
            # Run is frozen: its fields are filled in as __init__ would, without its per-field checks.
            _set_attr(run, "__dict__", fields)
            yield run

    def _rendered(self, seed: int) -> Run:
        """The run of ``seed`` where the command is rendered for each seed (``{seed:03d}``, ...)."""
        pair = self.pair
        command = _render(pair.template, {**pair.values, "seed": seed})
        rid = self.blob.run_id(json.dumps(seed), command.replace(_RUN_ID_MARK, "{run_id}"))
        fields = self.proto.copy()
        fields["run_id"] = rid
        fields["seed"] = seed
        fields["command"] = command.replace(_RUN_ID_MARK, rid)
        if self.env is not None:
            fields["env"] = self._env(seed, rid)
        run = _new_run(Run)
        _set_attr(run, "__dict__", fields)
        return run

    def _env(self, seed: int, rid: str) -> dict[str, str]:
        assert self.env is not None
        values = {**self.pair.values, "seed": seed, "run_id": rid}
        return {k: _PLAIN.vformat(v, (), values) if "{" in v else v for k, v in self.env.items()}


_new_run, _set_attr = object.__new__, object.__setattr__


class _IdBlob:
    """The JSON that a pair's run ids hash (see ``_hash_id``), built from text pieces made once
    per pair: only the command and the seed change from run to run. The pieces are those
    ``json.dumps(..., sort_keys=True)`` writes, key by key in sorted order."""

    def __init__(self, benchmark: str, task: str, config: str, params: dict[str, Any]):
        self._head = '{"benchmark":' + self.dump(benchmark) + ',"command":'
        self._middle = ',"config":' + self.dump(config) + ',"params":' + self.dump(params) + ',"seed":'
        self.tail = ',"task":' + self.dump(task) + "}"
        self._command: tuple[str, str] = ("", "")

    @staticmethod
    def dump(value: Any) -> str:
        return json.dumps(value, sort_keys=True, separators=(",", ":"), default=str)

    def head(self, command: str) -> str:
        """The JSON up to the seed, for ``command``."""
        return self.head_json(self.dump(command))

    def head_json(self, command_json: str) -> str:
        """The JSON up to the seed, for a command already JSON-encoded."""
        return self._head + command_json + self._middle

    def hash(self, head: str, seed_json: str) -> str:
        """The id of the run whose JSON is ``head`` (:meth:`head`) and then the seed's JSON."""
        return hashlib.sha256((head + seed_json + self.tail).encode()).hexdigest()[:ID_LENGTH]

    def run_id(self, seed_json: str, command: str) -> str:
        """The id of this pair's run of the seed written ``seed_json`` (its JSON) and ``command``."""
        if self._command[0] != command or not self._command[1]:
            self._command = (command, self.head(command))
        return self.hash(self._command[1], seed_json)
