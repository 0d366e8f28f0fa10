"""Reading a spec: YAML in, a validated ``Spec`` out, every problem reported at once.

A spec names the tasks, the configs, the seeds, the command template of a run,
the metrics and where each is read from, resources, timeout and retries.
Spec ``variables`` (like SLM-Lab's ``${max_frame}``) can be used as ``${name}``
anywhere in the spec and as ``{name}`` in command templates, and are
overridden from the command line with ``-s name=value``.

Errors name the file, the line and the field:
``spec.yaml:14 configs[2].params.lr: expected a number, got 'fast' (variables.lr is 0.01)``.
"""

from __future__ import annotations

import difflib
import gc
import json
import re
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ValidationError

from benchlab.errors import OverrideError, Problem, SpecError
from benchlab.json_types import ConfigValues, JsonObject
from benchlab.spec.checks import semantic_problems, type_mismatch
from benchlab.spec.models import (
    Config,
    Metric,
    Metrics,
    MetricSource,
    Origin,
    Reference,
    Resources,
    Spec,
    Task,
)
from benchlab.spec.quoting import WrittenFloat, as_written, plain, shell_words
from benchlab.spec.search import ParamSpace, Search, SearchMetric, search_problems
from benchlab.spec.yaml_reader import MAX_BYTES, ExponentText, Lines, YamlProblem, read_yaml

_VAR_RE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")

# Spec attributes that say where a spec came from, not what its YAML holds.
_NOT_IN_YAML = ("path", "overrides", "grids", "backend_sections")


def _fmt_loc(loc: tuple[Any, ...]) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else str(part)
    return out


def _model_at(loc: tuple[Any, ...], root: type[BaseModel] = Spec) -> type[BaseModel] | None:
    """The model class whose fields live at ``loc`` under ``root`` (for 'did you mean' suggestions)."""
    model: Any = root
    for part in loc:
        if isinstance(part, int):
            continue
        field = model.model_fields.get(part) if hasattr(model, "model_fields") else None
        if field is None:
            field = next((f for f in model.model_fields.values() if f.alias == part), None)
        if field is None:
            return None
        ann = field.annotation
        found = None
        for cand in (Task, Config, Metrics, Metric, MetricSource, Resources, Reference, Search, SearchMetric,
                     ParamSpace, Origin):
            if cand is ann or cand in getattr(ann, "__args__", ()) or any(
                cand in getattr(a, "__args__", ()) for a in getattr(ann, "__args__", ())
            ):
                found = cand
                break
        if found is None:
            return None
        model = found
    return model


def _field_names(model: type[BaseModel]) -> list[str]:
    if model is MetricSource:  # its keys are the extractors' (the registry's), not its own fields
        return MetricSource.yaml_fields()
    return [f.alias or name for name, f in model.model_fields.items()
            if not (model is Spec and name in _NOT_IN_YAML)]


def _describe_type(error: dict[str, Any]) -> str:
    kind = error["type"]
    got = error.get("input")
    got_s = repr(got) if not isinstance(got, dict | list) else type(got).__name__
    expected = {
        "float_parsing": "a number",
        "float_type": "a number",
        "int_parsing": "a whole number",
        "int_type": "a whole number",
        "int_from_float": "a whole number",
        "string_type": "a string",
        "bool_parsing": "true or false",
        "bool_type": "true or false",
        "dict_type": "a mapping",
        "list_type": "a list",
        "model_type": "a mapping",
        "model_attributes_type": "a mapping",
        "literal_error": "one of " + str(error.get("ctx", {}).get("expected", "")),
    }.get(kind)
    if expected:
        return f"expected {expected}, got {got_s}"
    if kind == "missing":
        return "required field is missing"
    if kind == "too_short":
        return "must not be empty"
    if kind in ("greater_than_equal", "greater_than"):
        bound = error.get("ctx", {}).get("ge", error.get("ctx", {}).get("gt"))
        word = "at least" if kind == "greater_than_equal" else "more than"
        return f"expected {word} {bound}, got {got_s}"
    msg = str(error.get("msg", "invalid value"))
    return msg.removeprefix("Value error, ")


def _problems_from_validation(exc: ValidationError, file: str, lines: Lines, prefix: tuple[str, ...] = (),
                              root: type[BaseModel] = Spec) -> list[Problem]:
    """One problem per place of ``exc``; ``prefix``: where ``root``, the model validated, sits in the spec."""
    problems: list[Problem] = []
    seen: set[tuple[Any, ...]] = set()
    for err in exc.errors():
        loc = (*prefix, *err["loc"])
        # Unions (seeds: list|int) report one error per branch; keep the first per place.
        loc = tuple(p for p in loc if not (isinstance(p, str) and p in ("list[int]", "int")))
        if loc in seen:
            continue
        seen.add(loc)
        if err["type"] == "extra_forbidden":
            key = loc[-1]
            parent = _model_at(loc[len(prefix):-1], root)
            valid = _field_names(parent) if parent else []
            close = difflib.get_close_matches(str(key), valid, n=1)
            msg = f"unknown field {key!r}"
            if close:
                msg += f"; did you mean {close[0]!r}?"
            if valid:
                msg += f" (valid fields: {', '.join(valid)})"
            problems.append(Problem(file, lines.line_for(loc), _fmt_loc(loc[:-1]) or "spec", msg))
            continue
        message = _describe_type(dict(err))
        if loc == ("seeds",) and err["type"] in ("list_type", "int_type", "int_parsing", "int_from_float"):
            got = err.get("input")
            if isinstance(got, list):
                continue  # a list with a bad item: the item's own error says it
            message = f"expected a count (5 means seeds 0..4) or a list of seeds, got {got!r}"
        problems.append(Problem(file, lines.line_for(loc), _fmt_loc(loc), message))
    return problems


def _backend_sections(body: dict[str, Any], file: str, lines: Lines,
                      problems: list[Problem]) -> tuple[dict[str, BaseModel], dict[str, Any]]:
    """The top-level keys named after a backend that declares a section of its own (``launcher:``),
    each validated by that backend's model (its problems added to ``problems`` with their lines),
    and the body without them. Only a key that names a known backend loads that backend's module."""
    from benchlab.errors import BackendUnavailable
    from benchlab.execute.base import get_backend, known_backends

    extra = [k for k in body if isinstance(k, str) and k not in Spec.model_fields]
    if not extra:
        return {}, body
    names = set(known_backends())
    sections: dict[str, BaseModel] = {}
    rest = dict(body)
    for key in extra:
        if key not in names:
            continue
        try:
            model = get_backend(key).section
        except (BackendUnavailable, ImportError):
            continue
        if model is None:
            continue
        raw = rest.pop(key)
        try:
            sections[key] = model.model_validate(raw)
        except ValidationError as exc:
            problems += _problems_from_validation(exc, file, lines, prefix=(key,), root=model)
    return sections, rest


def _parse_override(text: str) -> tuple[str, Any]:
    key, sep, raw = text.partition("=")
    key = key.strip()
    if not sep or not key:
        raise OverrideError(text, "expected key=value")
    try:
        value = yaml.safe_load(raw) if raw.strip() else ""
    except yaml.YAMLError:
        value = raw
    if isinstance(value, str):
        # YAML 1.1 reads 1e7 as a string; on a command line it is a number.
        for cast in (int, float):
            try:
                return key, as_written(cast(value), raw)
            except ValueError:
                continue
    # A number renders in commands as it was typed (1e2 stays 1e2) and compares as a number.
    return key, as_written(value, raw)


def _apply_paths(data: dict[str, Any], items: list[tuple[str, Any]], variables: dict[str, Any], file: str,
                 applied: dict[str, Any]) -> list[tuple[str, Any]]:
    """Apply the overrides that name a place of the spec (``configs.mlp.params.lr=1e-3``, ``seeds=10``;
    see :mod:`benchlab.spec.paths`) to the document; the others (variables) are returned."""
    from benchlab.spec.paths import apply_path, is_path

    fields = {n for n in Spec.model_fields} | {f.alias for f in Spec.model_fields.values() if f.alias}
    rest = []
    for key, value in items:
        if not is_path(key, variables, fields - {"variables"}):
            rest.append((key, value))
            continue
        # As typed (a number keeps its spelling): what the ledger keeps and a later collect applies again.
        raw = json.dumps(plain(value)) if isinstance(value, list | dict) else str(value)
        # Read from the text again: the overrides recorded in a ledger come back as that text.
        apply_path(data, key, _parse_override(f"{key}={raw}")[1], raw, file,
                   lambda text: _parse_override(f"x={text}")[1])
        applied[key] = raw
    return rest


def _is_command(loc: tuple[Any, ...]) -> bool:
    return loc == ("command",) or (len(loc) == 3 and loc[0] in ("tasks", "configs") and loc[2] == "command")


def _typed_place(loc: tuple[Any, ...]) -> bool:
    """Whether values at ``loc`` are data handed to runs (params, grid values), where ``1e-3`` is a number."""
    return len(loc) >= 4 and loc[0] in ("tasks", "configs") and loc[2] in ("params", "grid")


def _as_value(node: Any, typed: bool) -> Any:
    if isinstance(node, ExponentText):
        return WrittenFloat(float(node.replace("_", "")), str(node)) if typed else str(node)
    return node


def _passes(value: Any) -> bool:
    """Whether ``value`` is kept as it is: not a container, a variable use, or a number-like text."""
    cls = value.__class__
    return (cls is str and "${" not in value) or cls is int or cls is float or cls is bool or value is None


class _SecretUse:
    """A secret variable as interpolation sees it: usable in a command only, as ``"$ENV"``."""

    def __init__(self, name: str):
        from benchlab.secrets import env_name

        self.env = env_name(name)


def _param_places(data: dict[str, Any]) -> dict[str, str]:
    """Each name a task or config sets per run (a param or a grid param) -> where it is first set.

    A variable of such a name is only a default: its value differs from run to run."""
    places: dict[str, str] = {}
    for kind in ("tasks", "configs"):
        items = data.get(kind)
        for i, item in enumerate(items if isinstance(items, list) else []):
            if not isinstance(item, dict):
                continue
            for field in ("params", "grid"):
                if isinstance(item.get(field), dict):
                    for key in item[field]:
                        if isinstance(key, str):
                            places.setdefault(key, f"{kind}[{i}].{field}.{key}")
    return places


def _interpolate(node: Any, variables: dict[str, Any], loc: tuple[Any, ...],
                 unknown: list[tuple[tuple[Any, ...], str]],
                 per_run: dict[str, str] | None = None,
                 fixed: list[tuple[tuple[Any, ...], str]] | None = None) -> Any:
    """``node`` with every ``${name}`` filled in from ``variables`` (unknown names are noted).

    ``per_run`` names the variables a param or grid sets run by run: in a command such a
    ``${name}`` becomes the placeholder ``{name}``, filled in per run like any param; anywhere
    else it would be filled in once with the default, so the place is noted in ``fixed``."""
    per_run = per_run if per_run is not None else {}
    fixed = fixed if fixed is not None else []
    if isinstance(node, dict):
        # Plain values are the bulk of a big spec: they pass without a location being built.
        return {k: v if _passes(v) else _interpolate(v, variables, (*loc, k), unknown, per_run, fixed)
                for k, v in node.items()}
    if isinstance(node, list):
        return [v if _passes(v) else _interpolate(v, variables, (*loc, i), unknown, per_run, fixed)
                for i, v in enumerate(node)]
    if not isinstance(node, str) or "${" not in node:
        return _as_value(node, _typed_place(loc))
    if _is_command(loc):
        # In a command a variable becomes shell words, quoted exactly as a {param} is; its braces
        # are doubled so that the value is never read as a placeholder.
        def words(m: re.Match[str]) -> str:
            if isinstance(variables.get(m.group(1)), _SecretUse):
                # The value reaches the run through its environment; the command holds the name.
                return f'"${variables[m.group(1)].env}"'
            if m.group(1) in per_run and m.group(1) in variables:
                return "{" + m.group(1) + "}"  # the run's own value, which a param or grid may set
            if m.group(1) in variables:
                return shell_words(variables[m.group(1)]).replace("{", "{{").replace("}", "}}")
            unknown.append((loc, m.group(1)))
            return m.group(0)

        return _VAR_RE.sub(words, node)
    secret = next((m.group(1) for m in _VAR_RE.finditer(node) if isinstance(variables.get(m.group(1)), _SecretUse)),
                  None)
    if secret is not None:
        unknown.append((loc, f"secret:{secret}"))
        return node
    if len(loc) == 2 and loc[0] == "env":
        # The environment takes placeholders too, so it gets the run's own value the same way.
        node = _VAR_RE.sub(lambda m: "{" + m.group(1) + "}" if m.group(1) in per_run and m.group(1) in variables
                           else m.group(0), node)
        if "${" not in node:
            return node
    fixed += [(loc, m.group(1)) for m in _VAR_RE.finditer(node)
              if m.group(1) in per_run and m.group(1) in variables]
    whole = _VAR_RE.fullmatch(node)
    if whole:
        name = whole.group(1)
        if name in variables:
            return variables[name]  # a lone ${x} keeps the variable's type
        unknown.append((loc, name))
        return str(node)

    def sub(m: re.Match[str]) -> str:
        if m.group(1) in variables:
            return str(variables[m.group(1)])
        unknown.append((loc, m.group(1)))
        return m.group(0)

    return _VAR_RE.sub(sub, node)


def load_spec(path: str | Path, overrides: list[str] | ConfigValues | None = None) -> Spec:
    """Read, interpolate and validate a spec file.

    ``overrides`` are ``key=value`` strings (from ``-s``) or a mapping of variable names to
    values as the user would write them; each must name a spec variable. Raises ``SpecError``
    listing every problem found, or ``OverrideError`` for an override that names no variable.
    """
    path = Path(path)
    file = str(path)
    if not path.exists():
        raise SpecError([Problem(file, None, "", "spec file not found")])
    if path.is_dir():
        raise SpecError([Problem(file, None, "", "is a folder; expected a YAML spec file")])
    try:
        size = path.stat().st_size
        if size > MAX_BYTES:
            raise SpecError([Problem(file, None, "", f"is {size / 2**20:.1f} MB; a spec may be at most "
                                                     f"{MAX_BYTES // 2**20} MB (see docs/spec.md, 'Limits')")])
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise SpecError([Problem(file, None, "", f"cannot read: {exc}")]) from None
    return parse_spec(text, file=file, overrides=overrides, path=path)


def parse_spec(text: str, file: str = "<spec>", overrides: list[str] | ConfigValues | None = None,
               path: Path | None = None) -> Spec:
    """Validate a spec given as YAML text (see ``load_spec``).

    Every problem is found in one pass: duplicate keys, unknown variables, the schema's
    problems and the semantic ones (names, the baseline, commands and placeholders, params
    typed by the variables they override) come in one ``SpecError``, each once, in line order.
    """
    # A spec builds many small containers and frees none of them while it is read: the cyclic
    # collector would only walk them again and again (a third of the time of a large spec).
    collecting = gc.isenabled()
    gc.disable()
    try:
        return _parse(text, file, overrides, path)
    finally:
        if collecting:
            gc.enable()


def _parse(text: str, file: str, overrides: list[str] | dict[str, Any] | None, path: Path | None) -> Spec:
    try:
        document = read_yaml(text)
    except YamlProblem as exc:
        raise SpecError([Problem(file, exc.line, "", exc.message)]) from None
    data, lines = document.data, document.lines
    if not isinstance(data, dict):
        raise SpecError([Problem(file, 1, "", "expected a mapping with 'name', 'tasks', 'configs', ...")])
    found: list[tuple[tuple[Any, ...], str]] = [
        ((*where, key), f"duplicate key {key!r} (also line {first}); the second would silently win")
        for where, key, _, first in document.duplicates]

    variables = data.get("variables") or {}
    if not isinstance(variables, dict):
        found.append((("variables",), "expected a mapping of names to values"))
        variables = {}
    variables = {k: _as_value(v, True) for k, v in variables.items()}
    applied: dict[str, Any] = {}
    items = list(overrides.items()) if isinstance(overrides, dict) else [
        _parse_override(o) for o in (overrides or [])]
    items = _apply_paths(data, items, variables, file, applied)
    for key, value in items:
        if key not in variables:
            known = ", ".join(sorted(variables)) or "none defined"
            close = difflib.get_close_matches(key, list(variables), n=1)
            hint = f"did you mean {close[0]!r}? " if close else ""
            sweep = (f"; to sweep a config's param: -s configs.NAME.params.{key}={value}"
                     if isinstance(value, str) and "," in value else "")
            raise OverrideError(f"{key}={value}", f"names no variable of {file}; {hint}variables: {known}{sweep}")
        expected = type_mismatch(variables[key], value)
        if expected is not None:
            hint = ""
            if isinstance(value, str) and "," in value:
                # Hydra's multirun spelling (lr=1e-3,1e-4): say where benchlab's sweeps live.
                hint = (f"; to run several values, give a config a grid: grid: {{{key}: [{value}]}} "
                        f"(docs/spec.md, Grids), or sweep a config's param: -s configs.NAME.params.{key}={value}")
            raise OverrideError(f"{key}={value}", f"expected {expected}, got {value!r} (variables.{key} is "
                                                  f"{variables[key]!r} in {file}){hint}")
        variables[key] = value
        applied[key] = value

    secret_names = _secret_names(data.get("secrets"), variables, found)
    values = {k: "" if variables[k] is None else str(variables[k]) for k in secret_names}
    from benchlab.secrets import MASK

    unknown: list[tuple[tuple[Any, ...], str]] = []
    fixed: list[tuple[tuple[Any, ...], str]] = []
    per_run = _param_places(data)
    body = {k: v for k, v in data.items() if k != "variables"}
    body = _interpolate(body, {**variables, **{k: _SecretUse(k) for k in secret_names}}, (), unknown, per_run,
                        fixed)
    known = ", ".join(sorted(variables)) or "none defined"
    found += [(loc, f"secret variable ${{{name[7:]}}} can be used in a command only, where it reaches the run "
                    "through the environment (docs/spec.md, Secrets)") if name.startswith("secret:")
              else (loc, f"unknown variable ${{{name}}} (variables: {known})") for loc, name in unknown]
    found += _secret_placeholders(body, secret_names)
    unknown = [u for u in unknown if not u[1].startswith("secret:")]
    # Outside a command ${name} is filled in once, before any run exists: a grid or param of that
    # name would silently not reach it, so the spec is refused rather than run with the default.
    found += [(loc, f"${{{name}}} is filled in once with variables.{name}, but {per_run[name]} sets "
                    f"{name} per run, which would not reach here; use {{{name}}} in the command, or "
                    f"give this field its own param") for loc, name in fixed]
    variables = {k: MASK if k in secret_names else v for k, v in variables.items()}
    applied = {k: MASK if k in secret_names else v for k, v in applied.items()}
    body["variables"] = variables
    problems = [Problem(file, lines.line_for(loc), _fmt_loc(loc), message) for loc, message in found]
    sections, body = _backend_sections(body, file, lines, problems)
    spec: Spec | None = None
    try:
        spec = Spec.model_validate(body)
        spec.backend_sections = sections
    except ValidationError as exc:
        # A value with an unknown variable has its own message; the schema's would repeat it.
        at_unknown = {_fmt_loc(loc) for loc, _ in unknown}
        problems += [p for p in _problems_from_validation(exc, file, lines) if p.field not in at_unknown]
    problems += [Problem(file, lines.line_for(loc), _fmt_loc(loc), message)
                 for loc, message in [*semantic_problems(body, variables), *search_problems(body)]]
    if problems:
        unique = list(dict.fromkeys(problems))
        unique.sort(key=lambda p: p.line or 0)
        raise SpecError(unique)
    assert spec is not None  # no problems means the schema passed
    spec.path = path
    spec.overrides = applied
    spec._secret_values = values
    return spec


def _secret_names(raw: Any, variables: dict[str, Any], found: list[tuple[tuple[Any, ...], str]]) -> list[str]:
    """The names under ``secrets:``, each a variable of the spec (problems noted in ``found``)."""
    if raw is None:
        return []
    if not isinstance(raw, list) or not all(isinstance(x, str) for x in raw):
        found.append((("secrets",), "expected a list of variable names"))
        return []
    names = []
    for i, name in enumerate(raw):
        if name not in variables:
            known = ", ".join(sorted(variables)) or "none defined"
            found.append((("secrets", i), f"{name!r} names no variable (variables: {known}); give it one, e.g. "
                                          f"variables: {{{name}: null}} and -s {name}=..."))
        else:
            names.append(name)
    return names


def _secret_placeholders(body: dict[str, Any], secret_names: list[str]) -> list[tuple[tuple[Any, ...], str]]:
    """A secret variable written ``{name}`` in a command would be formatted into its text."""
    if not secret_names:
        return []
    out = []
    places: list[tuple[tuple[Any, ...], Any]] = [(("command",), body.get("command"))]
    for kind in ("tasks", "configs"):
        for i, item in enumerate(body.get(kind) or []):
            if isinstance(item, dict):
                places.append(((kind, i, "command"), item.get("command")))
    for loc, command in places:
        if not isinstance(command, str):
            continue
        for name in secret_names:
            if re.search(r"(?<!\{)\{" + re.escape(name) + r"(?:[:!][^}]*)?\}(?!\})", command):
                out.append((loc, f"secret variable {{{name}}} would be written into the command's text; "
                                 f"write ${{{name}}}, which passes it through the environment"))
    return out


def json_schema() -> JsonObject:
    """The JSON Schema of a spec file, for editors and validators (a JSON Schema document, a
    format whose fields JSON Schema fixes)."""
    schema = Spec.model_json_schema(by_alias=True)
    for name in _NOT_IN_YAML:
        schema.get("properties", {}).pop(name, None)
    schema["title"] = "benchlab spec"
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    return schema
