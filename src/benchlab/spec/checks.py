"""The checks of a spec that its schema cannot express, run on the data as written.

They work on the plain data (after variables are filled in), not on validated
models, so that they run even when the schema finds problems too: a spec's
problems all come in one message. Parts too malformed to check here are left to
the schema's own messages. Each check returns ``(loc, message)`` pairs; the
caller adds the file and line.
"""

from __future__ import annotations

import difflib
import itertools
import re
import string
from dataclasses import dataclass
from typing import Any, NamedTuple

from benchlab.json_types import ConfigValues

#: Placeholders every command template may use besides params and variables.
BUILTIN_PLACEHOLDERS = ("task", "config", "seed", "run_dir", "run_id", "benchmark")

NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._+-]*$")
# Characters a grid value may not hold: they would make its config's name ambiguous.
GRID_VALUE_BAD = re.compile(r"[\s/,=\[\]]")

#: Where a problem is in the spec as written: keys and list indices from its top (``("configs", 2, "name")``).
Loc = tuple[str | int, ...]


class Found(NamedTuple):
    """One problem a check found: where it is in the spec (the caller adds the file and line)
    and what is wrong, in words."""

    loc: Loc
    message: str


def placeholders(template: str) -> list[str]:
    """Names of the ``{placeholders}`` in a command template (``{{`` escapes a brace)."""
    return [name for _, name, _, _ in string.Formatter().parse(template) if name is not None]


def grid_coordinate(value: Any) -> str:
    """A grid value as it appears in a config's name: ``0.001``, ``32``, ``adam``, ``true``, ``null``."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, float):
        return repr(float(value))
    if isinstance(value, int):
        return str(int(value))
    return str(value)


def grid_names(name: str, grid: dict[str, list[Any]]) -> list[str]:
    """The names of a grid config's combinations, the last param varying fastest."""
    keys = list(grid)
    return [f"{name}[" + ",".join(f"{k}={grid_coordinate(v)}" for k, v in zip(keys, combo, strict=True)) + "]"
            for combo in itertools.product(*(grid[k] for k in keys))]


@dataclass(frozen=True)
class _Item:
    """A task or config as written, with what the checks need of it."""

    kind: str  # "tasks" or "configs"
    index: int
    name: str
    keys: frozenset[str]  # its params, and for a config its grid's params
    command: str | None


def _items(data: dict[str, Any], kind: str) -> list[_Item]:
    items = data.get(kind)
    out = []
    for i, item in enumerate(items if isinstance(items, list) else []):
        if not isinstance(item, dict) or not isinstance(item.get("name"), str):
            continue
        keys = set(item["params"]) if isinstance(item.get("params"), dict) else set()
        if kind == "configs" and isinstance(item.get("grid"), dict):
            keys |= set(item["grid"])
        command = item.get("command")
        out.append(_Item(kind, i, item["name"], frozenset(map(str, keys)),
                         command if isinstance(command, str) else None))
    return out


def _valid_grid(grid: Any) -> dict[str, list[Any]] | None:
    if not isinstance(grid, dict) or not grid:
        return None
    if not all(isinstance(v, list) and v and not any(isinstance(x, dict | list) for x in v) for v in grid.values()):
        return None
    return grid


def semantic_problems(data: ConfigValues, variables: ConfigValues) -> list[Found]:
    """Names, duplicates, the baseline, commands and placeholders, and params typed by variables.

    ``data`` is the spec's YAML document as the user wrote it (variables filled in), not yet a
    ``Spec``: its fields are checked here, so it is a plain mapping; ``variables`` are the spec's
    variables with the overrides applied.
    """
    found: list[Found] = []
    name = data.get("name")
    if isinstance(name, str) and not NAME_RE.match(name):
        found.append(Found(("name",), f"expected letters, digits and . _ + - only, got {name!r}"))
    tasks, configs = _items(data, "tasks"), _items(data, "configs")
    for items in (tasks, configs):
        seen: dict[str, int] = {}
        for item in items:
            if not NAME_RE.match(item.name):
                found.append(Found((item.kind, item.index, "name"),
                              f"expected letters, digits and . _ + - only (it names folders), got {item.name!r}"))
            if item.name in seen:
                found.append(Found((item.kind, item.index, "name"),
                              f"duplicate name {item.name!r} (also {item.kind}[{seen[item.name]}])"))
            else:
                seen[item.name] = item.index
    found += _metric_problems(data.get("metrics"))
    found += _task_range_problems(data, tasks)
    found += _baseline_problems(data, configs)
    found += command_problems(data.get("command"), tasks, configs, variables)
    found += typed_param_problems(data, variables)
    return found


def _metric_problems(metrics: Any) -> list[Found]:
    if not isinstance(metrics, dict):
        return []

    def name_of(m: Any) -> Any:
        return m.get("name") if isinstance(m, dict) else m

    names = [name_of(metrics.get("primary"))]
    secondary = metrics.get("secondary")
    secondary = secondary if isinstance(secondary, list) else []
    names += [name_of(m) for m in secondary]
    return [Found(("metrics", "secondary", i, "name"), f"duplicate metric {name_of(m)!r}")
            for i, m in enumerate(secondary) if isinstance(name_of(m), str) and names.count(name_of(m)) > 1]


def _task_range_problems(data: dict[str, Any], tasks: list[_Item]) -> list[Found]:
    """A task's ``range`` names metrics of the spec."""
    metrics = data.get("metrics")
    if not isinstance(metrics, dict):
        return []
    entries = [metrics.get("primary"), *(metrics.get("secondary") or [])]
    names = [m.get("name") if isinstance(m, dict) else m for m in entries]
    found: list[Found] = []
    raw: list[Any] = data.get("tasks") or []
    for item in tasks:
        declared = raw[item.index].get("range") if isinstance(raw[item.index], dict) else None
        if not isinstance(declared, dict):
            continue
        for metric in declared:
            if metric not in names:
                found.append(Found((item.kind, item.index, "range", metric),
                              f"names no metric of the spec: {metric!r} (metrics: "
                              f"{', '.join(str(n) for n in names if n is not None)})"))
    return found


def _baseline_problems(data: dict[str, Any], configs: list[_Item]) -> list[Found]:
    baseline = data.get("baseline")
    if not isinstance(baseline, str):
        return []
    raw: list[Any] = data["configs"]  # configs were found in it
    grids = {c.name: grid_names(c.name, g) for c in configs
             if (g := _valid_grid(raw[c.index].get("grid"))) is not None}
    if baseline in grids:
        names = grids[baseline]
        shown = ", ".join(names[:4]) + (f" and {len(names) - 4} more" if len(names) > 4 else "")
        return [Found(("baseline",), f"{baseline!r} is a grid of {len(names)} configs; name one of them: {shown}")]
    known = {c.name for c in configs} | {n for names in grids.values() for n in names}
    if baseline in known:
        return []
    written = [c.name for c in configs]
    close = difflib.get_close_matches(baseline, written, n=1)
    hint = f"; did you mean {close[0]!r}?" if close else ""
    return [Found(("baseline",), f"names no config: {baseline!r}{hint} (configs: {', '.join(written)})")]


def _shown(pairs: list[str]) -> str:
    return ", ".join(pairs[:3]) + (f" and {len(pairs) - 3} more" if len(pairs) > 3 else "")


def command_problems(spec_command: Any, tasks: list[_Item], configs: list[_Item],
                     variables: ConfigValues) -> list[Found]:
    """Missing commands and unknown placeholders, each reported once where the command is written.

    A run's command is its config's, else its task's, else the spec's; a placeholder must be
    known (a builtin, a variable, or a param) to every (task, config) that uses the command.
    """
    found: list[Found] = []
    spec_command = spec_command if isinstance(spec_command, str) else None
    # (where the command is written, the command, the tasks and configs that use it)
    uses: list[tuple[Loc, str, list[_Item], list[_Item]]] = []
    plain_configs = [c for c in configs if c.command is None]
    plain_tasks = [t for t in tasks if t.command is None]
    for c in configs:
        if c.command is not None:
            uses.append((("configs", c.index, "command"), c.command, tasks, [c]))
    for t in tasks:
        if t.command is not None and plain_configs:
            uses.append((("tasks", t.index, "command"), t.command, [t], plain_configs))
    if plain_configs and plain_tasks:
        if spec_command is not None:
            uses.append((("command",), spec_command, plain_tasks, plain_configs))
        elif len(plain_configs) == len(configs) and len(plain_tasks) == len(tasks):
            found.append(Found(("command",),
                               "required: set 'command' at the top of the spec, or on each config or task"))
        else:
            pairs = [f"{t.name}/{c.name}" for t in plain_tasks for c in plain_configs]
            found.append(Found(("configs", plain_configs[0].index, "command"),
                          f"no command for {_shown(pairs)}: set 'command' at the top of the spec, "
                          "or on each config or task"))
    common = set(BUILTIN_PLACEHOLDERS) | set(variables)
    for loc, template, users_t, users_c in uses:
        try:
            used = placeholders(template)
        except ValueError as exc:
            found.append(Found(loc, f"malformed command template: {exc}"))
            continue
        reported: set[str] = set()
        for name in used:
            base = re.split(r"[.\[!:]", name, maxsplit=1)[0]
            if base in common or base in reported:
                continue
            tasks_without = [t for t in users_t if base not in t.keys]
            configs_without = [c for c in users_c if base not in c.keys]
            if not tasks_without or not configs_without:
                continue
            reported.add(base)
            if len(tasks_without) == len(users_t) and len(configs_without) == len(users_c):
                known = common.union(*(t.keys for t in users_t), *(c.keys for c in users_c))
                close = difflib.get_close_matches(base, sorted(known), n=1)
                hint = f"; did you mean {{{close[0]}}}?" if close else ""
                found.append(Found(loc, f"unknown placeholder {{{name}}}{hint} (known: {', '.join(sorted(known))})"))
            else:
                lacking = [f"{t.name}/{c.name}" for t in tasks_without for c in configs_without]
                found.append(Found(loc, f"placeholder {{{name}}} has no value for {_shown(lacking)} (task/config); "
                                   "give it a default in 'variables' (null renders as nothing)"))
    return found


def type_mismatch(default: Any, value: Any) -> str | None:
    """What is wrong with ``value`` standing in for a variable whose value is ``default``, if anything.

    A variable that is a number or a boolean gives its type to the params and overrides that
    replace it; ``null`` (no value: nothing in a command) may replace anything.
    """
    if value is None or default is None:
        return None
    if isinstance(default, bool):
        return None if isinstance(value, bool) else "true or false"
    if isinstance(default, int | float):
        return None if isinstance(value, int | float) and not isinstance(value, bool) else "a number"
    return None


def typed_param_problems(data: ConfigValues, variables: ConfigValues) -> list[Found]:
    """Params and grid values whose type differs from the variable they override (``lr: fast``
    where the variable ``lr`` is a number); ``data`` is the raw YAML document, as in
    :func:`semantic_problems`."""
    found: list[Found] = []
    for kind in ("tasks", "configs"):
        items = data.get(kind)
        for i, item in enumerate(items if isinstance(items, list) else []):
            if not isinstance(item, dict):
                continue
            places: list[tuple[Loc, Any, Any]] = []
            if isinstance(item.get("params"), dict):
                places += [((kind, i, "params", k), k, v) for k, v in item["params"].items()]
            if kind == "configs" and isinstance(item.get("grid"), dict):
                places += [((kind, i, "grid", k, j), k, v) for k, values in item["grid"].items()
                           if isinstance(values, list) for j, v in enumerate(values)]
            for loc, key, value in places:
                if key not in variables:
                    continue
                expected = type_mismatch(variables[key], value)
                if expected is not None:
                    got = repr(value) if not isinstance(value, dict | list) else type(value).__name__
                    found.append(Found(loc, f"expected {expected}, got {got} (variables.{key} is "
                                       f"{variables[key]!r})"))
    return found


def check_seeds(v: list[int] | int) -> list[int] | int:
    """A ``seeds`` field: a positive count (0..n-1) or a non-empty list without repeats."""
    if isinstance(v, int) and v < 1:
        raise ValueError(f"expected a positive count or a list of seeds, got {v}")
    if isinstance(v, list):
        if not v:
            raise ValueError("expected at least one seed")
        dupes = sorted({s for s in v if v.count(s) > 1})
        if dupes:
            raise ValueError(f"duplicate seeds {dupes}")
    return v
