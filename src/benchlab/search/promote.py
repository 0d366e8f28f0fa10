"""Promotion: a new spec file, the original plus a config with the best trial's params.

The new file sits beside the original (``bench.yaml`` -> ``bench.<NAME>.yaml``) and never
replaces a file. Its text is the original's, comments and layout kept (a YAML round trip, block
or flow style alike), with the new config added at the end of ``configs:``, checked to be there
before the file is written; a comment at the top and the config's ``origin`` say which study, trial and
metric its params come from. The config keeps the base config's other fields (command,
resources), so ``benchlab run`` on the new file runs exactly one config more, on the benchmark's
own seeds, into the same results folder (``origin`` lets the promoted spec take it over).
"""

from __future__ import annotations

import io
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchlab.errors import SearchError, SpecError
from benchlab.json_types import ConfigValues
from benchlab.search.driver import base_config_name, search_folder
from benchlab.search.study import SUMMARY_ATTR, goal_of, read_study
from benchlab.spec import Spec, parse_spec
from benchlab.spec.checks import NAME_RE


@dataclass(frozen=True)
class Promoted:
    """What ``promote`` wrote."""

    path: Path
    config: str
    study: str
    trial: int
    metric: str
    value: float
    params: ConfigValues


def promoted_path(spec_path: Path, name: str) -> Path:
    return spec_path.with_name(f"{spec_path.stem}.{name}{spec_path.suffix or '.yaml'}")


def promote(spec: Spec, results_dir: Path | str, name: str) -> Promoted:
    """Write the spec with a config ``name`` holding the best trial's params (see the module doc)."""
    if spec.search is None or spec.path is None:
        raise SearchError(spec.name, "promotion needs a spec file with a `search` section")
    study_name = f"{spec.name}:{spec.search.name}"
    if not NAME_RE.match(name):
        raise SearchError(study_name, f"--promote {name!r}: a config name takes letters, digits and . _ + - only")
    taken = {c.name for c in spec.configs} | set(spec.grids)
    if name in taken:
        raise SearchError(study_name, f"--promote {name}: {spec.path} already has a config {name!r}; pick another name")
    target = promoted_path(spec.path, name)
    if target.exists():
        raise SearchError(study_name, f"{target} exists; promotion never overwrites a file: move it away or pick "
                                      "another name")
    study = read_study(search_folder(results_dir, spec))
    try:
        best = study.best_trial
    except ValueError:
        raise SearchError(study_name, f"the study {study.study_name} has no completed trial yet: nothing to "
                                      "promote") from None
    search = spec.search
    base = base_config_name(spec)
    text = spec.path.read_text(encoding="utf-8")
    params = {k: _plain(v) for k, v in best.params.items()}
    assert best.value is not None  # a completed trial has its value
    value = float(best.value)
    seeds = search.seed_list(spec.seed_list)
    origin = {"spec": os.path.basename(spec.path), "study": study.study_name, "trial": best.number,
              "metric": search.metric.name, "value": value, "goal": goal_of(spec),
              "summary": str(study.user_attrs.get(SUMMARY_ATTR, search.metric.summary)), "seeds": seeds}
    note = (f"promoted by `benchlab search --promote {name}`: config {name} is trial {best.number} of study "
            f"{study.study_name} ({search.metric.name} = {value:.6g}, {origin['goal']}, {origin['summary']} over "
            f"search seeds {seeds})")
    header = (f"# This file is {spec.path.name} with one config more, {name},\n"
              f"# {note}.\n")
    new_text = header + _with_config(text, base, name, params, origin,
                                     f"{base} tuned by benchlab search (study {study.study_name}, "
                                     f"trial {best.number})")
    _check_written(spec, new_text, target, name, params, study_name)
    with open(target, "x", encoding="utf-8") as fh:  # "x": never replaces a file written meanwhile
        fh.write(new_text)
    return Promoted(target, name, study.study_name, best.number, search.metric.name, value, params)


def _plain(value: Any) -> Any:
    return value.item() if hasattr(value, "item") else value


def _with_config(text: str, base: str, name: str, params: dict[str, Any], origin: dict[str, Any],
                 description: str) -> str:
    """``text`` with a config ``name`` added as the last item of ``configs:``: the base config's
    fields with ``params`` over its own, a description and ``origin``.

    The YAML is edited as a round trip (ruamel.yaml), so comments and the layout of the rest
    stay as written whatever it is: block or flow style, any indentation."""
    from ruamel.yaml import YAML
    from ruamel.yaml.comments import CommentedMap, CommentedSeq
    from ruamel.yaml.scalarstring import DoubleQuotedScalarString
    from ruamel.yaml.util import load_yaml_guess_indent

    yaml_rt = YAML()
    yaml_rt.preserve_quotes = True
    yaml_rt.width = 4096  # lines of the original are never re-wrapped
    yaml_rt.brace_single_entry_mapping_in_flow_sequence = True  # [{name: t}] stays as written
    _, sequence, offset = load_yaml_guess_indent(text)
    if sequence:
        offset = offset or 0
        yaml_rt.indent(mapping=sequence - offset if offset else sequence, sequence=sequence, offset=offset)
    data = yaml_rt.load(text)
    configs = data.get("configs")
    raw_base = next((c for c in configs if isinstance(c, dict) and c.get("name") == base), {})

    def flow(value: Any) -> Any:
        # Leaves as one-line mappings and lists, as a hand-written config would have them.
        if isinstance(value, dict):
            out = CommentedMap((k, flow(v)) for k, v in value.items())
            out.fa.set_flow_style()
            return out
        if isinstance(value, list):
            seq = CommentedSeq(flow(v) for v in value)
            seq.fa.set_flow_style()
            return seq
        if isinstance(value, str) and not isinstance(value, DoubleQuotedScalarString):
            # Quoted: ruamel writes YAML 1.2, where `yes`, `on`, `1:30` or `0o17` are plain
            # strings, while the spec is read by YAML 1.1's rules, where they are not.
            return DoubleQuotedScalarString(value)
        return value

    entry = CommentedMap()
    for key, val in raw_base.items():
        if key not in ("grid", "origin", "name", "params", "description"):
            entry[key] = val
    entry.insert(0, "name", name)
    entry["params"] = flow({**dict(raw_base.get("params") or {}), **params})
    entry["description"] = description
    entry["origin"] = flow(origin)
    configs.append(entry)
    out = io.StringIO()
    yaml_rt.dump(data, out)
    return out.getvalue()


def _check_written(spec: Spec, new_text: str, target: Path, name: str, params: dict[str, Any],
                   study_name: str) -> None:
    """Refuse to write a promoted spec that does not hold what promotion says: the original's
    configs unchanged and config ``name`` with ``params``."""
    try:
        new = parse_spec(new_text, file=str(target), overrides=dict(spec.overrides), path=target)
    except SpecError as exc:
        raise SearchError(study_name, f"the promoted spec would not validate, so {target} was not written: "
                                      f"{exc}") from None
    before = [c.model_dump() for c in spec.configs]
    after = [c.model_dump() for c in new.configs if c.name != name]
    added = next((c for c in new.configs if c.name == name), None)
    if added is None or before != after or any(not _same(added.params.get(k), v) for k, v in params.items()):
        raise SearchError(study_name, f"the promoted spec does not hold config {name!r} with the trial's params "
                                      f"beside the original configs, so {target} was not written")


def _same(read: Any, written: Any) -> bool:
    """Equal and of the same kind: ``True`` is not ``1``, nor ``"1"`` a number."""
    if isinstance(written, float) and isinstance(read, float) and written != written:
        return read != read  # both NaN
    return _kind(read) == _kind(written) and read == written


def _kind(value: Any) -> type:
    """The plain type a value is read as (the spec keeps a float's written text in a subclass)."""
    for kind in (bool, int, float, str):
        if isinstance(value, kind):
            return kind
    return type(value)
